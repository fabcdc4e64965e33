"""Which offerings a launch attempt claims before asking EC2 (issue 38): only those with
evidence that a claim buys something (domain/capacity/single_flight.py); and the service's loop
over the claim rounds (issue 36), on the in-memory cache."""

from __future__ import annotations

from capacity_launcher.domain.capacity.single_flight import (
    BEING_TRIED,
    CLAIM_EXPIRED,
    RECENTLY_DRY_SECONDS,
    Evidence,
    Standing,
    outcome,
    triage,
)
from capacity_launcher.service.single_flight import take_turn
from tests.fakes.stores import FakeUnavailable

NOW = 1_900_000_000.0
A, B, C = "on-demand:m5.large:us-east-1a", "on-demand:c5.large:us-east-1a", "spot:m5.large:a"


def test_a_healthy_offering_is_asked_about_without_a_claim() -> None:
    sorted_out = triage([A, B, C], Evidence(NOW))
    assert sorted_out.free == {A, B, C}
    assert sorted_out.to_claim == ()


def test_an_offering_dry_a_moment_ago_is_claimed_and_one_dry_long_ago_is_not() -> None:
    evidence = Evidence(
        NOW,
        entries={
            A: Standing("InsufficientInstanceCapacity", NOW - 5),
            B: Standing("InsufficientInstanceCapacity", NOW - RECENTLY_DRY_SECONDS - 1),
        },
    )
    sorted_out = triage([A, B], evidence)
    assert sorted_out.to_claim == (A,)
    assert sorted_out.free == {B}


def test_a_live_entry_is_unavailable_and_a_live_claim_is_awaited_without_a_write() -> None:
    evidence = Evidence(
        NOW,
        entries={A: Standing("InsufficientInstanceCapacity", NOW + 100)},
        claims={B: NOW + 20},
    )
    sorted_out = triage([A, B], evidence)
    assert sorted_out.unavailable == {A: "InsufficientInstanceCapacity"}
    assert sorted_out.awaited == {B: NOW + 20}
    assert sorted_out.to_claim == ()


def test_where_the_container_just_launched_is_free_whatever_it_saw() -> None:
    evidence = Evidence(
        NOW,
        entries={A: Standing("InsufficientInstanceCapacity", NOW - 5)},
        claims={B: NOW + 20},
        launched={A: NOW + 5, B: NOW + 5},
    )
    assert triage([A, B], evidence).free == {A, B}


def test_a_claim_that_expired_while_awaited_is_claimed_again() -> None:
    evidence = Evidence(NOW, claims={A: NOW + 20})
    assert triage([A], evidence, must_claim=[A]).to_claim == (A,)


def test_what_a_read_of_a_claimed_offering_says() -> None:
    assert outcome(None, NOW) is None
    assert outcome(Standing(BEING_TRIED, NOW + 1, claimed=True), NOW) == BEING_TRIED
    assert outcome(Standing(BEING_TRIED, NOW - 1, claimed=True), NOW) == CLAIM_EXPIRED
    assert outcome(Standing("InsufficientInstanceCapacity", NOW + 1), NOW) == (
        "InsufficientInstanceCapacity"
    )
    assert outcome(Standing("InsufficientInstanceCapacity", NOW - 1), NOW) is None


class _Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


def test_the_loop_claims_only_the_evidenced_offering_and_writes_nothing_for_the_rest() -> None:
    clock = _Clock()
    cache = FakeUnavailable(clock, ttl_seconds=10)
    cache.mark([(A, "InsufficientInstanceCapacity", "")])
    clock.now += 11  # A's entry expired a moment ago
    turn = take_turn(cache, [A, B, C], clock=clock, pause=lambda s: None)
    assert turn.mine == {A} and turn.free == {B, C}
    assert set(cache.claims) == {A}


def test_the_loop_waits_for_a_claim_held_elsewhere_and_takes_its_answer() -> None:
    clock = _Clock()
    cache = FakeUnavailable(clock)
    cache.claim_elsewhere(A)
    waits: list[float] = []

    def answer(seconds: float) -> None:
        # the claimer's CreateFleet found A dry while this launcher waited
        waits.append(seconds)
        clock.now += seconds
        cache.mark([(A, "InsufficientInstanceCapacity", "")])

    turn = take_turn(cache, [A], clock=clock, pause=answer)
    assert turn.allowed == frozenset()
    assert turn.unavailable == {A: "InsufficientInstanceCapacity"}
    assert waits == [0.05]
