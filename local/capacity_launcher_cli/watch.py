"""`get TYPE --watch`: the listing, then each row that is new or changed since the last poll, one
poll every `--watch-interval` seconds, until Ctrl-C or SIGTERM (exit 0), as `kubectl get -w`
prints. Rows that disappear are not printed (kubectl's plain watch does not either)."""

from __future__ import annotations

import argparse
import contextlib
import io
import signal
import sys
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from capacity_launcher_cli.deployment import Deployment

Command = Callable[[argparse.Namespace, "Deployment"], int]


def pause(seconds: float) -> None:
    """Between polls (tests replace it)."""
    time.sleep(seconds)


def _row(line: str) -> str:
    """A row as compared between polls: columns are padded to the widest cell of each poll."""
    return " ".join(line.split())


@contextlib.contextmanager
def _terminated_as_interrupt() -> Iterator[None]:
    def interrupt(_signal: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _listing(
    command: Command, args: argparse.Namespace, deployment: Deployment
) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = command(args, deployment)
    return code, out.getvalue(), err.getvalue()


def watch(
    command: Command,
    args: argparse.Namespace,
    deployment: Deployment,
) -> int:
    """Poll ``command``'s listing and print what changed; its exit code if a poll fails."""
    seen: set[str] = set()
    header_shown = polled = False
    with contextlib.suppress(KeyboardInterrupt), _terminated_as_interrupt():
        while True:
            code, text, said = _listing(command, args, deployment)
            if code != 0 or not polled:  # "No resources found" and warnings: once, not per poll
                sys.stderr.write(said)
            polled = True
            if code != 0:
                sys.stdout.write(text)
                return code
            lines = text.splitlines()
            headed = args.output != "name" and lines
            header, rows = (lines[0], lines[1:]) if headed else ("", lines)
            if rows and header and not header_shown:
                print(header)
                header_shown = True
            for line in rows:
                if _row(line) not in seen:
                    print(line)
            seen = {_row(line) for line in rows}
            sys.stdout.flush()
            pause(args.watch_interval)
    return 0
