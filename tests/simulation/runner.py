"""Runs the simulation as `make soak` and a developer do, in a fresh interpreter: so that tests
get the fixed PYTHONHASHSEED (set and dict order) whatever pytest was started with."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


def run(seed: int, profile: str, steps: int | None = None, minutes: float | None = None) -> Run:
    """One run in a subprocess (it fixes PYTHONHASHSEED itself): its outcome and whole trace;
    bounded by `steps`, by wall `minutes` (a soak's bound) or by the profile's own."""
    with tempfile.TemporaryDirectory(prefix="simulation-") as scratch:
        trace, outcome = Path(scratch, "trace.txt"), Path(scratch, "outcome.json")
        command = [sys.executable, "-m", "tests.simulation", "--profile", profile]
        command += ["--seed", str(seed), "--trace-out", str(trace)]
        command += ["--outcome-json", str(outcome)]
        command += [] if steps is None else ["--steps", str(steps)]
        command += [] if minutes is None else ["--minutes", str(minutes)]
        environment = {**os.environ, "PYTHONPATH": PYTHONPATH}
        environment.pop("PYTHONHASHSEED", None)  # the runner's own choice, as on the command line
        done = subprocess.run(
            command, cwd=ROOT, env=environment, capture_output=True, text=True, check=False
        )
        if not outcome.exists():
            raise AssertionError(f"the simulation did not finish:\n{done.stdout}\n{done.stderr}")
        return Run(
            seed,
            profile,
            steps,
            json.loads(outcome.read_text(encoding="utf-8")),
            trace.read_text(encoding="utf-8").splitlines(),
            done.stdout,
        )


def first_difference(first: list[str], second: list[str]) -> str | None:
    """Where two traces part, with the lines before it; None when they are the same."""
    for index, (a, b) in enumerate(zip(first, second, strict=False)):
        if a != b:
            before = "\n".join(f"    {line}" for line in first[max(0, index - 5) : index])
            return f"line {index + 1}:\n{before}\n  - {a}\n  + {b}"
    if len(first) != len(second):
        return f"one trace has {len(first)} lines, the other {len(second)}"
    return None
