"""`get --watch`: the listing once, then only rows new or changed, until interrupted."""

from __future__ import annotations

import argparse
import signal
import sys
from typing import Any

import pytest

from capacity_launcher_cli import watch as watching

POLLS = [
    ("", "No resources found\n"),
    ("NAME   STATUS\nweb-1  Waiting\n", ""),
    ("NAME    STATUS\nweb-1   Waiting\nweb-22  Fulfilled\n", "No resources found\n"),
    ("NAME    STATUS\nweb-1   Fulfilled\nweb-22  Fulfilled\n", ""),
]


def run(monkeypatch: pytest.MonkeyPatch, stop: str = "interrupt") -> tuple[int, int]:
    polls = iter(POLLS)
    paused: list[float] = []

    def listing(args: argparse.Namespace, deployment: Any) -> int:
        out, err = next(polls)
        print(out, end="")
        sys.stderr.write(err)
        return 0

    def pause(seconds: float) -> None:
        paused.append(seconds)
        if len(paused) == len(POLLS):
            if stop == "interrupt":
                raise KeyboardInterrupt
            signal.raise_signal(signal.SIGTERM)

    monkeypatch.setattr(watching, "pause", pause)
    args = argparse.Namespace(output="table", watch_interval=0.5)
    return watching.watch(listing, args, None), len(paused)  # type: ignore[arg-type]


@pytest.mark.parametrize("stop", ["interrupt", "sigterm"])
def test_watch_prints_the_header_once_then_changed_rows(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], stop: str
) -> None:
    assert run(monkeypatch, stop) == (0, 4)
    out, err = capsys.readouterr()
    assert out.splitlines() == [
        "NAME   STATUS",
        "web-1  Waiting",
        "web-22  Fulfilled",  # new; web-1 unchanged though its padding moved
        "web-1   Fulfilled",  # changed
    ]
    assert err == "No resources found\n"  # said once, not on every poll
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # put back as it was


def test_a_failing_poll_ends_the_watch_with_its_code(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def failing(args: argparse.Namespace, deployment: Any) -> int:
        sys.stderr.write("error: table gone\n")
        return 1

    monkeypatch.setattr(watching, "pause", lambda _: None)
    args = argparse.Namespace(output="table", watch_interval=0.5)
    assert watching.watch(failing, args, None) == 1  # type: ignore[arg-type]
    assert capsys.readouterr().err == "error: table gone\n"
