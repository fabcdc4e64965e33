"""The short profile of the whole-system simulation: a few seeds, every operation kind mixed in.

A failure prints the seed, the replay command and the violations found (tests/simulation/)."""

from __future__ import annotations

import pytest

from tests.simulation.operations import PROFILES
from tests.simulation.report import summary
from tests.simulation.scheduler import Simulation

SEEDS = (11, 12, 13)


@pytest.mark.parametrize("seed", SEEDS)
def test_every_invariant_holds_under_the_short_profile(seed: int) -> None:
    profile = PROFILES["short"]
    # Given a fresh cloud, and producers, operators, EC2 and faults drawn from this seed
    outcome = Simulation(seed, profile).run()
    # Then the run did work: requests ended, invariants were checked at steps and quiescences
    assert outcome.requests > 0 and outcome.quiescences >= 2, summary(outcome, profile)
    assert outcome.checks["live <= limit (every step)"] > 0, summary(outcome, profile)
    assert outcome.checks["quota usage <= nominal + borrowingLimit"] > 0, summary(outcome, profile)
    assert outcome.checks["quota usage == EC2 (quiescent)"] > 0, summary(outcome, profile)
    # and nothing it checked was violated
    assert outcome.violations == [], summary(outcome, profile)
