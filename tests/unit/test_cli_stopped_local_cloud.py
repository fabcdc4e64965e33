"""Every command run against a local cloud that has stopped (its `.capacity-launcher/local.json`
left behind, its port closed) fails at once with one line naming the endpoint and saying to
start the cloud (issue 40: "a dead endpoint fails fast with a clear message"). `submit` reads the
cloud's clock over plain HTTP before anything boto3 does: it printed urllib's bare
`<urlopen error [Errno 111] Connection refused>` before."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest

from capacity_launcher_cli.main import main


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def stale_local_file(tmp_path: Path) -> tuple[Path, str]:
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    names = {
        "region": "us-east-1",
        "endpoint_url": endpoint,
        "event_bus": "capacity-launcher",
        "launch_queue_url": f"{endpoint}/123456789012/launch",
        "dead_letter_queue_url": f"{endpoint}/123456789012/dead",
        "state_table": "state",
        "unavailable_offerings_table": "ice",
        "idempotency_table": "idempotency",
        "ice_ttl_seconds": 180,
        "limit_lease_seconds": 60,
    }
    path = tmp_path / "local.json"
    path.write_text(json.dumps(names))
    return path, endpoint


@pytest.mark.parametrize(
    "command",
    [
        ["get", "nodepools"],
        ["submit", "--node-pool", "general", "--count", "1"],
        ["submit", "--node-pool", "general", "--count", "1", "--dry-run"],
        ["status", "r-1"],
    ],
    ids=" ".join,
)
def test_a_command_against_a_stopped_local_cloud_names_it_and_says_to_start_it(
    command: list[str],
    stale_local_file: tuple[Path, str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    path, endpoint = stale_local_file
    began = time.monotonic()

    code = main([*command, "--local-file", str(path)])

    error = capsys.readouterr().err
    assert code == 1
    assert endpoint in error, error
    assert "is the local cloud running? (`capacity-launcher local up`)" in error, error
    assert "Traceback" not in error
    assert time.monotonic() - began < 5
