"""`python -m benchmarks.cli_startup`: how long `capacity-launcher --help`, `--version`,
`completion bash` and `explain` (the models, no deployment) take, beside two baselines in the
same run: the bare interpreter, and the interpreter importing boto3 (what every run paid before
the CLI loaded it lazily). Goal: --help well under a second, near the bare interpreter."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

RUNS = 7
PYTHON = sys.executable
CLI = str(Path(PYTHON).with_name("capacity-launcher"))
CASES = {
    "python -c pass (baseline)": [PYTHON, "-c", "pass"],
    "python -c 'import boto3' (baseline)": [PYTHON, "-c", "import boto3"],
    "capacity-launcher --help": [CLI, "--help"],
    "capacity-launcher get --help": [CLI, "get", "--help"],
    "capacity-launcher --version": [CLI, "--version"],
    "capacity-launcher completion bash": [CLI, "completion", "bash"],
    "capacity-launcher explain np.spec.requirements": [CLI, "explain", "np.spec.requirements"],
}


def median_seconds(command: list[str], runs: int = RUNS) -> float:
    took = []
    for _ in range(runs):
        began = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        took.append(time.perf_counter() - began)
    return statistics.median(took)


def run() -> dict[str, float]:
    return {name: median_seconds(command) for name, command in CASES.items()}


def main() -> int:
    results = run()
    width = max(len(name) for name in results)
    for name, seconds in results.items():
        print(f"{name:<{width}}  {seconds * 1000:7.0f} ms (median of {RUNS})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
