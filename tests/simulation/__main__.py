"""`python -m tests.simulation --seed S --minutes M --report docs/SOAK.md`

String hashing must be fixed for a seed to replay exactly (set and dict order): without
`PYTHONHASHSEED`, the runner executes itself again with it set (determinism.HASH_SEED), before it
imports the service, moto and the simulation: about 2 s of CPU a run would otherwise spend twice.

A run collects cyclic garbage less often than Python's default (tests/support/collector): its heap
holds half a million objects (moto's backends and catalogues, the parsed instance-type listing),
and the default thresholds walked all of it four times in a 40-step run and the young objects
over 500 times, about 2 s of a run's 30 s of CPU; these thresholds spend under 1 s. Only when
cycles are freed changes (the service frees almost everything by reference counting): no call,
no order, no answer, so a seed's trace stays the same."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from typing import TYPE_CHECKING

from tests.simulation.determinism import HASH_SEED
from tests.support.collector import collect_less_often

if TYPE_CHECKING:
    from tests.simulation.scheduler import Outcome


def _hash_seed_fixed(argv: list[str] | None) -> None:
    """Re-execute with PYTHONHASHSEED set, unless it already is (to anything but `random`)."""
    if os.environ.get("PYTHONHASHSEED", "random") != "random":
        return
    environment = {**os.environ, "PYTHONHASHSEED": HASH_SEED}
    arguments = sys.argv[1:] if argv is None else argv
    sys.stdout.flush()
    warnings = [f"-W{option}" for option in sys.warnoptions]  # make soak's -W, kept
    command = [sys.executable, *warnings, "-m", "tests.simulation", *arguments]
    os.execve(sys.executable, command, environment)


def _parser(profiles: list[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tests.simulation")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--profile", choices=profiles, default="soak")
    parser.add_argument("--minutes", type=float, help="wall-clock minutes (soak-style run)")
    parser.add_argument("--steps", type=int, help="a fixed number of steps instead")
    parser.add_argument("--report", help="write a Markdown report here")
    parser.add_argument("--trace", action="store_true", help="print every step's operation")
    parser.add_argument("--trace-out", help="write the whole trace (every step's fingerprint)")
    parser.add_argument("--outcome-json", help="write the counts, checks and violations as JSON")
    return parser


def main(argv: list[str] | None = None) -> int:
    _hash_seed_fixed(argv)
    collect_less_often()
    from tests.simulation.operations import PROFILES
    from tests.simulation.report import markdown, summary
    from tests.simulation.scheduler import Simulation

    args = _parser(sorted(PROFILES)).parse_args(argv)
    profile = PROFILES[args.profile]
    if args.minutes is not None:
        profile = dataclasses.replace(profile, wall_minutes=args.minutes, steps=10**9)
    if args.steps is not None:
        profile = dataclasses.replace(profile, wall_minutes=None, steps=args.steps)
    outcome = Simulation(args.seed, profile, process_ends=True).run()  # nothing runs after it
    if args.trace:
        print("\n".join(outcome.trace))
    print(summary(outcome, profile))
    if args.report:
        with open(args.report, "w", encoding="utf-8") as report:
            report.write(markdown(outcome, profile))
    if args.trace_out:
        with open(args.trace_out, "w", encoding="utf-8") as trace:
            trace.write("\n".join(outcome.trace) + "\n")
    if args.outcome_json:
        with open(args.outcome_json, "w", encoding="utf-8") as written:
            json.dump(outcome_as_json(outcome, summary(outcome, profile)), written)
    return 1 if outcome.violations else 0


def outcome_as_json(outcome: Outcome, text: str) -> dict[str, object]:
    return {
        "steps": outcome.steps,
        "requests": outcome.requests,
        "quiescences": outcome.quiescences,
        "checks": dict(outcome.checks),
        "invocations": dict(outcome.invocations),
        "operations": dict(outcome.operations),
        "versions": dict(outcome.versions.written),
        "versions_refused": dict(outcome.versions.refused),
        "violations": [v.line() for v in outcome.violations],
        "invariants": sorted({v.invariant for v in outcome.violations}),
        "summary": text,
    }


if __name__ == "__main__":
    sys.exit(main())
