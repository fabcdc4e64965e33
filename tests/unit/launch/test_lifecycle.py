"""The request lifecycle (service/launch/lifecycle.py): every transition the table allows moves
a request there, every other one is refused, and the trail answers what the pipeline asks (its
first delivery, whether its lease was read in this pool, how often it changed). No moto."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from capacity_launcher.domain.launch_request import parse_launch_request
from capacity_launcher.service.launch.lifecycle import ALLOWED, LifecycleError, Phase
from capacity_launcher.service.launch.progress import Progress
from capacity_launcher.service.resolution import Prepared
from tests.fakes.world import FakeWorld, a_node_class, a_node_pool


def _prepared() -> Prepared:
    world = FakeWorld([a_node_class(), a_node_pool()])
    request = parse_launch_request({"requestId": "r-1", "count": 1})
    return world.launcher().prepare(request, world.clock.now())


PREPARED = _prepared()

MARKS: dict[Phase, Callable[[Progress], None]] = {
    Phase.WAITING: Progress.mark_waiting,
    Phase.LEASED: lambda p: p.mark_leased(2, frozenset({"m5.large"})),
    Phase.UNLEASED: Progress.mark_unleased,
    Phase.SETTLED: Progress.mark_settled,
    Phase.CHANGED: Progress.mark_changed,
    Phase.LAUNCHING: Progress.mark_launching,
    Phase.PASSED_ON: Progress.mark_passed_on,
    Phase.ENDED: Progress.mark_ended,
}


def test_every_target_state_has_its_transition() -> None:
    assert set(MARKS) == set(ALLOWED)


@pytest.mark.parametrize(
    ("source", "target"),
    [(s, t) for t, sources in ALLOWED.items() for s in sorted(sources, key=lambda p: p.value)],
    ids=lambda p: p.value,
)
def test_an_allowed_transition_moves_the_request(source: Phase, target: Phase) -> None:
    item = Progress(PREPARED, source)

    MARKS[target](item)

    # A request an earlier delivery settled stays Settled when an intent names it.
    expected = Phase.SETTLED if (source, target) == (Phase.SETTLED, Phase.LAUNCHING) else target
    assert item.state is expected
    assert item.trail[-1] is expected and item.trail[0] is source


@pytest.mark.parametrize(
    ("source", "target"),
    [(s, t) for t, sources in ALLOWED.items() for s in Phase if s not in sources],
    ids=lambda p: p.value,
)
def test_a_transition_the_table_does_not_allow_is_refused(source: Phase, target: Phase) -> None:
    item = Progress(PREPARED, source)

    with pytest.raises(LifecycleError, match=f"{source.value} -> {target.value}"):
        MARKS[target](item)
    assert item.state is source and item.trail == (source,)


def test_a_request_is_ended_once() -> None:
    item = Progress(PREPARED, Phase.FRESH)
    item.mark_ended()
    with pytest.raises(LifecycleError):
        item.mark_ended()


def test_leased_holds_what_was_granted() -> None:
    item = Progress(PREPARED, Phase.RECOVERED)
    item.mark_unleased()
    item.mark_leased(3, None)
    assert (item.granted, item.lease_types, item.wanted) == (3, None, 3)


def test_the_lease_is_read_in_this_pool_once_the_lease_phase_decided() -> None:
    item = Progress(PREPARED, Phase.RECOVERED)
    before = item.lease_read
    item.mark_unleased()
    assert (before, item.lease_read) == (False, True)
    # Passed on: in the next pool its lease is to be read again.
    item.mark_passed_on()
    there = item.arriving(PREPARED, [])
    assert there.state is Phase.PASSED_ON and not there.lease_read
    assert there.trail == (Phase.RECOVERED, Phase.UNLEASED, Phase.PASSED_ON)


def test_a_change_found_before_the_lease_was_read_leaves_it_unread() -> None:
    item = Progress(PREPARED, Phase.RECOVERED)
    item.mark_changed()
    assert not item.lease_read and item.changes == 1


def test_settled_and_launching_are_what_happened_in_this_pool() -> None:
    item = Progress(PREPARED, Phase.REPLAYING)
    item.mark_launching()
    launching = (item.launching, item.settled)
    item.mark_settled()
    settled = (item.launching, item.settled, item.lease_read)
    item.mark_ended()
    # Ended, it still says what happened here (the exit rule reads it after the settle).
    assert launching == (True, False)
    assert settled == (True, True, True)
    assert (item.launching, item.settled) == (True, True)


def test_first_delivery_goes_with_the_request_to_the_next_pool() -> None:
    item = Progress(PREPARED, Phase.FRESH)
    assert item.first
    item.mark_passed_on()
    assert item.arriving(PREPARED, []).first
    assert not Progress(PREPARED, Phase.RECOVERED).first


def test_changes_count_across_pools_in_one_delivery() -> None:
    item = Progress(PREPARED, Phase.FRESH)
    item.mark_changed()
    again = item.arriving(PREPARED, [])
    assert again.state is Phase.CHANGED and again.changes == 1
    again.mark_changed()
    assert again.changes == 2
