"""`local up` on a taken port fails at once naming it, and stops on SIGTERM even while starting."""

from __future__ import annotations

import argparse
import os
import signal
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from local_cloud import up_command
from local_cloud.address import PortInUse, port_taken
from local_cloud.cloud import LocalCloud, LocalCloudOptions


@pytest.fixture
def taken() -> Iterator[int]:
    """A port another program listens on."""
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        yield int(other.getsockname()[1])


def _args(port: int, local_file: Path, web_port: int | None = None) -> argparse.Namespace:
    return argparse.Namespace(
        host="127.0.0.1", port=port, region="us-east-1", template=None,
        local_file=str(local_file), visibility_timeout=None, no_schedules=True, web_port=web_port,
    )  # fmt: skip


def test_up_on_a_taken_port_fails_naming_it_and_leaves_the_others_names(
    taken: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given another local cloud's names where this one would write its own
    names = tmp_path / "local.json"
    names.write_text("{}")
    # When `local up` is asked for the taken port
    code = up_command.up(_args(taken, names))
    # Then it fails, naming the port and what to do, and leaves the other's names alone
    assert code == 1
    error = capsys.readouterr().err
    assert f"error: port {taken} on 127.0.0.1 is in use" in error
    assert "--port" in error
    assert names.exists()


def test_up_with_a_taken_web_port_fails_naming_it_before_starting(
    taken: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # When `local up` is asked to serve the web view on a taken port
    names = tmp_path / "local.json"
    code = up_command.up(_args(0, names, web_port=taken))
    # Then it fails at once, naming the flag and the port, and starts nothing
    assert code == 1
    assert f"error: --web-port: port {taken} on 127.0.0.1 is in use" in capsys.readouterr().err
    assert not names.exists()


def test_a_port_taken_after_the_check_fails_the_start_instead_of_hanging(taken: int) -> None:
    # Given the port check passed, then another program took the port (here: it already has)
    environment = dict(os.environ)
    cloud = LocalCloud(LocalCloudOptions(port=taken, schedules=False, instance_events=False))
    # When the cloud starts, moto's server cannot bind: start() raises (moto's own waits forever)
    with pytest.raises(PortInUse, match=f"port {taken} on 127.0.0.1 is in use"):
        cloud.start()
    # And the process is as it was
    assert dict(os.environ) == environment


def test_a_free_port_and_port_zero_are_servable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = int(probe.getsockname()[1])
    assert port_taken("127.0.0.1", free) is None
    assert port_taken("127.0.0.1", 0) is None


def test_sigterm_while_starting_stops_the_cloud(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Given a start that is interrupted by SIGTERM before it finishes
    stopped: list[bool] = []

    def slow_start(self: LocalCloud) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        signal.pause()  # never reached: the handler raises first
        raise AssertionError("SIGTERM did not interrupt the start")

    monkeypatch.setattr(LocalCloud, "start", slow_start)
    monkeypatch.setattr(LocalCloud, "stop", lambda self: stopped.append(True))
    previous = signal.getsignal(signal.SIGTERM)
    try:
        # When `local up` runs
        code = up_command.up(_args(0, tmp_path / "local.json"))
    finally:
        signal.signal(signal.SIGTERM, previous)
    # Then it stops cleanly, writing no names
    assert code == 0
    assert stopped == [True]
    assert not (tmp_path / "local.json").exists()
