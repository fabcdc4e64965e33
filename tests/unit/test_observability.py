"""The one observability module: a function with nothing to count prints no warning about it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

LAYER = Path(__file__).resolve().parents[2] / "layers" / "core"

# A cold start, as Lambda (or the local runtime) runs it: import, flush empty metrics, warn.
_INVOCATION = """
import warnings
from capacity_launcher.observability import metrics
metrics.flush_metrics()
warnings.warn("a real problem", UserWarning, stacklevel=1)
"""


def test_an_invocation_without_metrics_prints_no_warning_and_other_warnings_still_show() -> None:
    # Given a fresh process (pytest's own warning capture would hide what a function prints)
    environment = {**os.environ, "PYTHONPATH": str(LAYER), "PYTHONWARNINGS": ""}
    # When a function with nothing to count flushes its metrics, and something else warns
    ran = subprocess.run(
        [sys.executable, "-c", _INVOCATION],
        capture_output=True,
        text=True,
        env=environment,
        check=True,
        timeout=60,
    )
    # Then only the real warning is printed
    assert "a real problem" in ran.stderr
    assert "No application metrics" not in ran.stderr + ran.stdout
