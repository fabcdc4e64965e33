"""`capacity-launcher top` as a person uses it: in a 100x50 terminal (a detached tmux session),
refreshed in place, ended with Ctrl-C or SIGTERM."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from capacity_launcher_cli.deployment import LOCAL_FILE_ENV_VAR
from tests.e2e.conftest import E2E_POOL, E2eCloud

CLI = Path(sys.executable).with_name("capacity-launcher")
WIDTH, HEIGHT = 100, 50

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


class Terminal:
    """One tmux server of its own (its own socket), one session in it."""

    def __init__(self) -> None:
        self.socket = f"cl-top-{uuid.uuid4().hex[:8]}"
        self.session = "top"

    def tmux(self, *args: str) -> subprocess.CompletedProcess[str]:
        # A terminal's size comes from the terminal: COLUMNS/LINES exported by whatever runs
        # the tests would override it (rich reads them first).
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        return subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, check=False, env=env
        )

    def start(self, command: str) -> None:
        started = self.tmux(
            "new-session", "-d", "-s", self.session, "-x", str(WIDTH), "-y", str(HEIGHT), command
        )
        assert started.returncode == 0, started.stderr

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", self.session).stdout

    def alive(self) -> bool:
        return self.tmux("has-session", "-t", self.session).returncode == 0

    def wait_for(self, check: Callable[[str], bool], timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        shown = ""
        while time.monotonic() < deadline:
            shown = self.screen()
            if check(shown):
                return shown
            time.sleep(0.3)
        raise AssertionError(f"the terminal never showed what was expected:\n{shown}")

    def wait_closed(self, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while self.alive() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not self.alive(), f"top still runs:\n{self.screen()}"


@pytest.fixture
def terminal() -> Iterator[Terminal]:
    term = Terminal()
    try:
        yield term
    finally:
        term.tmux("kill-server")


def _top_command(interval: str = "1") -> str:
    local_file = os.environ[LOCAL_FILE_ENV_VAR]
    return f"{CLI} top --local-file {local_file} --interval {interval}"


def _header_time(screen: str) -> str:
    first = screen.splitlines()[0]
    return first.split(" UTC")[0].rsplit(" ", 1)[-1]


def test_top_shows_the_service_live_in_a_100_column_terminal(
    e2e_cloud: E2eCloud, terminal: Terminal
) -> None:
    # Given the local cloud with the e2e pool applied
    # When an operator starts top in a 100-column terminal
    terminal.start(_top_command())
    first = terminal.wait_for(lambda s: "Dry offerings" in s)

    # Then one screen shows the queue, requests, pools, quotas, reservations and dry offerings
    for heading in (
        "capacity-launcher top",
        "Launch queue",
        "Dead letters",
        "Requests in flight:",
        "NodePools: used / limit",
        "CapacityQuotas: used / nominal",
        "Reservations and Capacity Blocks",
        "Dry offerings (ICE cache)",
    ):
        assert heading in first, first
    assert E2E_POOL in first
    # And nothing is wider than the terminal
    assert all(len(line) <= WIDTH for line in first.splitlines())

    # And it refreshes in place: the clock moves, the screen stays one screen from its top line
    later = terminal.wait_for(lambda s: _header_time(s) != _header_time(first))
    assert later.splitlines()[0].startswith("capacity-launcher top")

    # When the operator presses Ctrl-C, top ends
    terminal.tmux("send-keys", "-t", terminal.session, "C-c")
    terminal.wait_closed()


def test_top_ends_on_sigterm(e2e_cloud: E2eCloud, terminal: Terminal) -> None:
    # Given top running, its process id kept by the shell that started it
    pid_file = Path(os.environ[LOCAL_FILE_ENV_VAR]).with_name(f"top-{uuid.uuid4().hex[:6]}.pid")
    terminal.start(f"sh -c 'echo $$ > {pid_file}; exec {_top_command()}'")
    terminal.wait_for(lambda s: "Dry offerings" in s)

    # When it is sent SIGTERM
    os.kill(int(pid_file.read_text().strip()), 15)

    # Then it ends (and its session with it)
    terminal.wait_closed()
