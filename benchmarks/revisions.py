"""Measuring another revision beside this one, in the same run: its tree extracted with `git
archive`, and a benchmark module run over a tree's own code in a child process (its answer the
JSON on its last line)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


@contextmanager
def extracted(revision: str) -> Iterator[Path]:
    """The tree of `revision`, in a temporary folder removed afterwards."""
    with tempfile.TemporaryDirectory() as folder:
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", revision], check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)
        yield Path(folder)


def measured_in(root: Path, script: str, flags: Sequence[str] = ("-W", "ignore")) -> Any:
    """`script` (this repository's file) run with `--json` over `root`'s code (its layers,
    local, tests and benchmarks): the JSON of its last line."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(str(root / p) for p in ("layers/core", "local", "."))
    out = subprocess.run(
        [sys.executable, *flags, str(Path(script).resolve()), "--json"],
        cwd=root,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out.splitlines()[-1])
