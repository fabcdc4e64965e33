"""Runs the simulation as `make soak` and a developer do, in an interpreter of its own: so that
tests get the fixed PYTHONHASHSEED (set and dict order) whatever pytest was started with. Each run
is a child forked from one warm server per test process (fork_server.py: the imports paid once),
or, with `fresh=True`, a fresh `python -m tests.simulation` as a developer runs it."""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from tests.simulation.determinism import HASH_SEED

ROOT = Path(__file__).resolve().parents[2]
PYTHONPATH = "layers/core:local:."


@dataclass(frozen=True)
class Run:
    seed: int
    profile: str
    steps: int | None
    outcome: dict[str, Any]
    trace: list[str]
    output: str

    @property
    def replay(self) -> str:
        steps = f" --steps {self.steps}" if self.steps is not None else ""
        return (
            f"PYTHONPATH={PYTHONPATH} python -m tests.simulation --profile {self.profile}"
            f" --seed {self.seed}{steps} --trace"
        )


def run(
    seed: int,
    profile: str,
    steps: int | None = None,
    minutes: float | None = None,
    *,
    fresh: bool = False,
) -> Run:
    """One run in a process of its own (forked from the warm server, or `fresh`): its outcome and
    whole trace; bounded by `steps`, by wall `minutes` (a soak's bound) or by the profile's own."""
    with tempfile.TemporaryDirectory(prefix="simulation-") as scratch:
        trace, outcome = Path(scratch, "trace.txt"), Path(scratch, "outcome.json")
        arguments = ["--profile", profile, "--seed", str(seed), "--trace-out", str(trace)]
        arguments += ["--outcome-json", str(outcome)]
        arguments += [] if steps is None else ["--steps", str(steps)]
        arguments += [] if minutes is None else ["--minutes", str(minutes)]
        printed = Path(scratch, "output.txt")
        output = _fresh(arguments) if fresh else _SERVER.run(arguments, printed)
        if not outcome.exists():
            raise AssertionError(f"the simulation did not finish:\n{output}")
        return Run(
            seed,
            profile,
            steps,
            json.loads(outcome.read_text(encoding="utf-8")),
            trace.read_text(encoding="utf-8").splitlines(),
            output,
        )


def _environment() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": PYTHONPATH}


def _fresh(arguments: list[str]) -> str:
    """`python -m tests.simulation ...` in a new interpreter, which fixes PYTHONHASHSEED itself."""
    environment = _environment()
    environment.pop("PYTHONHASHSEED", None)  # the runner's own choice, as on the command line
    done = subprocess.run(
        [sys.executable, "-m", "tests.simulation", *arguments],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout + done.stderr


class _ForkServer:
    """This process's warm server (fork_server.py), started at its first run; it ends when this
    process does (its input closes)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[str] | None = None

    def run(self, arguments: list[str], output: Path) -> str:
        with self._lock:
            process = self._started()
            requests, answers = self._pipes(process)
            requests.write(json.dumps({"argv": arguments, "stdout": str(output)}) + "\n")
            requests.flush()
            answer = answers.readline()
            if not answer:
                self._process = None
                raise AssertionError(f"the fork server ended (status {process.wait()})")
        return output.read_text(encoding="utf-8") if output.exists() else ""

    def _started(self) -> subprocess.Popen[str]:
        if self._process is None or self._process.poll() is not None:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "tests.simulation.fork_server"],
                cwd=ROOT,
                env={**_environment(), "PYTHONHASHSEED": HASH_SEED},
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            atexit.register(self.stop)
        return self._process

    def stop(self) -> None:
        """Close its input and wait for it to end (at this process's exit)."""
        process, self._process = self._process, None
        if process is not None and process.stdin is not None:
            process.stdin.close()
            process.wait(timeout=60)
            if process.stdout is not None:
                process.stdout.close()

    @staticmethod
    def _pipes(process: subprocess.Popen[str]) -> tuple[IO[str], IO[str]]:
        assert process.stdin is not None and process.stdout is not None
        return process.stdin, process.stdout


_SERVER = _ForkServer()


def first_difference(first: list[str], second: list[str]) -> str | None:
    """Where two traces part, with the lines before it; None when they are the same."""
    for index, (a, b) in enumerate(zip(first, second, strict=False)):
        if a != b:
            before = "\n".join(f"    {line}" for line in first[max(0, index - 5) : index])
            return f"line {index + 1}:\n{before}\n  - {a}\n  + {b}"
    if len(first) != len(second):
        return f"one trace has {len(first)} lines, the other {len(second)}"
    return None
