"""`capacity-launcher ... | head`: a reader that stops early ends the command quietly, exit 0,
with no BrokenPipeError traceback (kubectl's behaviour; docs/cli.md, "Exit codes").

The reader is simulated: stdout's writes raise BrokenPipeError, as they do once `head` has
exited (some sandboxes never report EPIPE on a real pipe)."""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterator

import pytest

from capacity_launcher_cli.main import main


class ClosedPipe(io.TextIOBase):
    """stdout after its reader went away: every write fails as a closed pipe's does."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def fileno(self) -> int:
        return self._fd


@pytest.fixture
def pipe() -> Iterator[int]:
    """A pipe's write end (its read end held open, so only the simulated writes fail)."""
    read_end, write_end = os.pipe()
    yield write_end
    os.close(read_end)
    os.close(write_end)


def test_a_closed_pipe_ends_the_command_quietly(pipe: int, monkeypatch: pytest.MonkeyPatch) -> None:
    closed_stdout = pipe
    monkeypatch.setattr(sys, "stdout", ClosedPipe(closed_stdout))

    assert main(["completion", "bash"]) == 0
    # stdout's descriptor now goes to /dev/null: the interpreter's last flush cannot fail
    assert os.readlink(f"/proc/self/fd/{closed_stdout}") == os.devnull
