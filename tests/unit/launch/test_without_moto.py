"""The phase tests and their fakes run without moto, the local cloud or the IAM audit: imported
in a fresh interpreter, as a unit test session imports them, none of those is loaded."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
# What only the integration, e2e and simulation suites may load.
CLOUD_ONLY = ("moto", "moto_capacity", "local_cloud", "samtranslator", "tests.infrastructure")


def _loaded_by(*modules: str) -> list[str]:
    check = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in modules)
        + f"print('\\n'.join(m for m in sys.modules if m.split('.')[0] in {CLOUD_ONLY!r} "
        f"or any(m.startswith(p + '.') for p in {CLOUD_ONLY!r})))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}  # pytest's pythonpath too
    done = subprocess.run(
        [sys.executable, "-c", check], cwd=REPO, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.split()


def test_the_phase_tests_and_the_fakes_load_no_moto() -> None:
    assert _loaded_by("tests.conftest", "tests.unit.launch.test_phases", "tests.fakes.world") == []


def test_the_check_sees_moto_when_it_is_loaded() -> None:
    assert "moto" in _loaded_by("moto")
