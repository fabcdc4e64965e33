"""The two long-running entry points, as a user starts them: in their own process."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.e2e.conftest import REPO
from tests.e2e.test_docs_commands import entry_point


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _cli(local_file: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    # A user's shell, not this test process's: AWS_ENDPOINT_URL wins over the local file (the
    # documented override), and a cloud other tests started here sets it in this process.
    return subprocess.run(
        [*entry_point(), *argv, "--local-file", str(local_file)],
        cwd=REPO, capture_output=True, text=True, timeout=90, check=False, env=_shell(),
    )  # fmt: skip


def _shell() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "AWS_ENDPOINT_URL"}


def _advance_clock(endpoint: str, seconds: int) -> None:
    request = urllib.request.Request(
        f"{endpoint}/moto-capacity/clock",
        data=json.dumps({"advanceSeconds": seconds}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10):
        pass


def test_local_up_serves_the_other_commands_and_stops_cleanly(tmp_path: Path) -> None:
    # Given `local up` in its own process, writing its names where we say
    local_file = tmp_path / "local.json"
    port, web_port = _free_port(), _free_port()
    # Its output in files, not pipes nobody reads until it ends: its functions' logs filled a
    # pipe's 64 KiB once, and a process blocked writing them could not stop (seen in one run)
    output, errors = (tmp_path / "up.out").open("w"), (tmp_path / "up.err").open("w")
    up = subprocess.Popen(
        [*entry_point(), "local", "up", "--port", str(port), "--local-file", str(local_file),
         "--no-schedules", "--web-port", str(web_port)],
        cwd=REPO, stdout=output, stderr=errors, text=True, env=_shell(),
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not local_file.exists() and up.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert local_file.exists(), (tmp_path / "up.err").read_text()
        names = json.loads(local_file.read_text())
        assert names["endpoint_url"] == f"http://127.0.0.1:{port}"

        # When another process applies the examples through it
        applied = subprocess.run(
            [*entry_point(), "apply", "-f", "examples", "--local-file", str(local_file)],
            cwd=REPO, capture_output=True, text=True, timeout=60, check=False, env=_shell(),
        )  # fmt: skip
        assert applied.returncode == 0, applied.stderr
        assert re.search(r"nodepool/general (created|configured|unchanged)", applied.stdout)

        # Then a dry run of the examples' reserved-only pool names the group it would try
        dry = _cli(local_file, "submit", "--node-pool", "batch", "--count", "1", "--dry-run")
        assert dry.returncode == 0, dry.stdout + dry.stderr
        (pool,) = json.loads(dry.stdout)["pools"]
        (attempt,) = pool["attempts"]
        assert attempt["capacityType"] == "reserved"
        assert attempt["target"].endswith(":group/batch-reservations")
        assert attempt["available"] == 4
        assert pool["headroom"]["limits"] == 16  # limits: cpu 32, instances 16; c5.large 2 cpu

        # And the pool launches into that group
        batch = _cli(local_file, "submit", "--node-pool", "batch", "--count", "1", "--wait")
        assert batch.returncode == 0, batch.stdout + batch.stderr
        (instance,) = json.loads(batch.stdout)["instances"]
        assert instance["capacityType"] == "reserved"

        # And a function invoked from another process runs on the cloud's clock, as the
        # cloud's own functions do: a day ahead once the clock is moved a day
        _advance_clock(names["endpoint_url"], 86400)
        invoked = _cli(
            local_file, "invoke", "LauncherFunction", "-e", "events/launch_requested.json"
        )
        assert invoked.returncode == 0, invoked.stderr
        record = json.loads(_cli(local_file, "status", "sample-eventbridge-1").stdout)
        finished = datetime.fromisoformat(record["finishedAt"])
        assert finished - datetime.now(UTC) > timedelta(hours=23)

        # And the web view served beside it (--web-port) shows its pools, on its clock
        with urllib.request.urlopen(f"http://127.0.0.1:{web_port}/api/view", timeout=30) as web:
            view = json.loads(web.read())
        assert {"batch", "general", "training"} <= {p["name"] for p in view["pools"]}
        assert datetime.fromisoformat(view["observedAt"]) - datetime.now(UTC) > timedelta(hours=23)
    finally:
        # Then SIGTERM (as Ctrl-C) stops it and removes the names it wrote
        up.send_signal(signal.SIGTERM)
        try:
            code = up.wait(timeout=30)
        except subprocess.TimeoutExpired:
            up.kill()  # nothing left running; what it said is the failure's detail
            code = None
        output.close()
        errors.close()
    assert code == 0, (tmp_path / "up.err").read_text()[-3000:]
    assert not local_file.exists()


def test_demo_tells_the_whole_story_and_leaves_nothing_running(tmp_path: Path) -> None:
    done = subprocess.run(
        [*entry_point(), "demo", "--examples", str(REPO / "examples")],
        cwd=tmp_path, capture_output=True, text=True, timeout=240, check=False, env=_shell(),
    )  # fmt: skip

    assert done.returncode == 0, done.stdout + done.stderr
    for scene in ("train-1", "batch-1", "gang-1", "web-1", "web-2", "bad-1", "gpu-1"):
        assert scene in done.stdout
    # Six requests; the quotas' four steps: borrowed, reclaim requested, terminated, admitted;
    # the queue's two: waiting, admitted when an instance ends; then the block's five: waiting,
    # activated, filled, expiring, expired; then the static pool's evacuation's three: the block
    # filled, replacements beside it before its end, the block's instances terminated.
    assert done.stdout.count(" - as expected") == 6 + 4 + 2 + 5 + 3
    for told in (
        "team-research asks for 5: Fulfilled 5/5",
        "Failed (QuotaExceeded); Capacity Reclaim Requested: 3 of team-research's instances",
        "the sync terminated 3 of them",
        "team-ml asks again: Fulfilled 3/3",
        "research-2: Waiting, waiting for Quota training",
        "terminated; research-2: Fulfilled 1/1",
    ):
        assert told in done.stdout
    assert "a Capacity Block bought" in done.stdout
    for told in (
        "gpu-1, 2 nodes, may wait until",
        "Capacity Reservation Activated",
        "gpu-1 came back from the queue: Fulfilled",
        "Capacity Block Expiring: 2 instance(s) of gpu-1",
        "Capacity Reservation Expired",
    ):
        assert told in done.stdout
    assert "a static pool on a Capacity Block: gpu-static keeps 2 x p4d.24xlarge" in done.stdout
    for told in (
        "the sync launched 2 for gpu-static, 2 in the block",
        "Capacity Block Evacuating (PolicyEvacuate) for 2 instance(s); 2 replacement(s) running "
        "off the block beside them",
        "the next minute the sync terminated the block's 2 instance(s), before EC2 would at",
        "gpu-static still runs 2, none in the block",
    ):
        assert told in done.stdout
    for table in ("Requests", "Instances", "Capacity reservations", "Unavailable offerings"):
        assert table in done.stdout
    assert "on-demand:m5.large:us-east-1a" in done.stdout
    # No function output leaks into the story; it went to the log file.
    assert '"_aws"' not in done.stdout
    assert (tmp_path / ".capacity-launcher" / "demo-functions.log").stat().st_size > 0
