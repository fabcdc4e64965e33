"""`python -m tests.simulation --seed S --minutes M --report docs/SOAK.md`"""

from __future__ import annotations

import argparse
import dataclasses
import sys

from tests.simulation.operations import PROFILES
from tests.simulation.report import markdown, summary
from tests.simulation.scheduler import Simulation


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.simulation")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--profile", choices=sorted(PROFILES), default="soak")
    parser.add_argument("--minutes", type=float, help="wall-clock minutes (soak-style run)")
    parser.add_argument("--steps", type=int, help="a fixed number of steps instead")
    parser.add_argument("--report", help="write a Markdown report here")
    parser.add_argument("--trace", action="store_true", help="print every step's operation")
    args = parser.parse_args(argv)
    profile = PROFILES[args.profile]
    if args.minutes is not None:
        profile = dataclasses.replace(profile, wall_minutes=args.minutes, steps=10**9)
    if args.steps is not None:
        profile = dataclasses.replace(profile, wall_minutes=None, steps=args.steps)
    outcome = Simulation(args.seed, profile).run()
    if args.trace:
        print("\n".join(outcome.trace))
    print(summary(outcome, profile))
    if args.report:
        with open(args.report, "w", encoding="utf-8") as report:
            report.write(markdown(outcome, profile))
    return 1 if outcome.violations else 0


if __name__ == "__main__":
    sys.exit(main())
