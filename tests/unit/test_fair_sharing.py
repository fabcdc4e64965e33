"""Issue 37, fair sharing: a quota's dominant resource share (Kueue's, weighted by
`spec.fairSharing.weight`), the order a wake tries its window in (domain/accounting/
fair_sharing.py), and the wake loop ordering by it over fakes (service/admission_queue.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from decimal import Decimal
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from capacity_launcher.domain.accounting import fair_sharing
from capacity_launcher.domain.accounting.admission_queue import MAX_PASSES, QueueEntry
from capacity_launcher.domain.accounting.fair_sharing import (
    FAIR_WINDOW,
    INFINITE,
    dominant_share,
    fair_order,
)
from capacity_launcher.domain.apis.quotas import CapacityQuota, parse_quota
from capacity_launcher.domain.errors import ConfigValidationError
from capacity_launcher.domain.quantities import Resources
from capacity_launcher.service.admission_queue import AdmissionQueue
from tests.unit.test_admission_queue import Held, Items, Sent, _entry

POOL = "p"


def _quota(
    name: str,
    cpu: str = "4",
    *,
    weight: Any = None,
    cohort: str | None = "c",
    lending: str | None = None,
    gpu: str | None = None,
) -> CapacityQuota:
    resources: list[dict[str, Any]] = [{"name": "cpu", "nominalQuota": cpu}]
    if lending is not None:
        resources[0]["lendingLimit"] = lending
    covered = ["cpu"]
    if gpu is not None:
        resources.append({"name": "nvidia.com/gpu", "nominalQuota": gpu})
        covered.append("nvidia.com/gpu")
    spec: dict[str, Any] = {
        "requesters": [name],
        "resourceGroups": [
            {"coveredResources": covered, "flavors": [{"name": POOL, "resources": resources}]}
        ],
    }
    if cohort is not None:
        spec |= {"cohort": cohort, "allowBorrowing": True}
    if weight is not None:
        spec["fairSharing"] = {"weight": weight}
    document = {
        "apiVersion": "capacity-launcher/v1",
        "kind": "CapacityQuota",
        "metadata": {"name": name},
        "spec": spec,
    }
    return parse_quota(document)


def _using(**cpus: int) -> dict[tuple[str, str], Resources]:
    return {(team, POOL): Resources(cpu=Decimal(n)) for team, n in cpus.items()}


# -- the contract ---------------------------------------------------------------------------------


def test_the_weight_defaults_to_one_takes_fractions_and_zero_and_names_its_field() -> None:
    assert _quota("a").spec.fair_weight == 1
    assert "fairSharing" not in _quota("a").model_dump(by_alias=True, exclude_none=True)["spec"]
    assert _quota("a", weight="0.5").spec.fair_weight == Decimal("0.5")
    assert _quota("a", weight=3).spec.fair_weight == 3
    assert _quota("a", weight=0).spec.fair_weight == 0
    for bad, rule in [(-1, "greater than or equal to 0"), ("0.0001", "thousandth"), (True, "")]:
        with pytest.raises(ConfigValidationError, match=rf"spec\.fairSharing\.weight.*{rule}"):
            _quota("a", weight=bad)


# -- the share ------------------------------------------------------------------------------------


def test_the_share_is_the_borrowed_part_of_what_the_cohort_lends_divided_by_the_weight() -> None:
    a, b = _quota("a"), _quota("b", weight=3)
    quotas = [a, b]
    usage = _using(a=6, b=8)  # a borrows 2, b borrows 4, of 8 the cohort lends

    assert dominant_share(a, quotas, usage, POOL) == Decimal(2) / 8
    assert dominant_share(b, quotas, usage, POOL) == Decimal(4) / 8 / 3


def test_the_cohort_lends_the_lending_limits_where_they_are_set() -> None:
    a, b = _quota("a"), _quota("b", lending="2")
    usage = _using(a=7)  # borrows 3 of 4 + 2

    assert dominant_share(a, [a, b], usage, POOL) == Decimal(3) / 6


def test_the_dominant_resource_is_the_largest_ratio() -> None:
    a, b = _quota("a", gpu="2"), _quota("b", gpu="6")
    usage = {("a", POOL): Resources(cpu=Decimal(5), gpu=4)}  # cpu 1/8, gpus 2/8

    assert dominant_share(a, [a, b], usage, POOL) == Decimal(2) / 8


def test_within_nominal_or_without_a_cohort_the_share_is_zero() -> None:
    a, b = _quota("a"), _quota("b")
    alone = _quota("alone", cohort=None)

    assert dominant_share(a, [a, b], _using(a=4), POOL) == 0
    assert dominant_share(alone, [alone], _using(alone=4), POOL) == 0


def test_a_weight_of_zero_is_infinite_while_it_borrows_and_zero_within_nominal() -> None:
    a, b = _quota("a", weight=0), _quota("b")

    assert dominant_share(a, [a, b], _using(a=5), POOL) == INFINITE
    assert dominant_share(a, [a, b], _using(a=3), POOL) == 0


# -- the order a wake tries its window in ---------------------------------------------------------


def _of(request_id: str, requester: str, priority: int = 0, *, at: int = 0) -> QueueEntry:
    return replace(_entry(request_id, priority, at=at), requester=requester)


def test_priority_first_then_the_lowest_share_then_arrival() -> None:
    early_a, late_b, later_b = _of("a1", "a"), _of("b1", "b", at=1), _of("b2", "b", at=2)
    urgent_a = _of("a2", "a", 9, at=3)
    share = {"a1": Decimal("0.5"), "a2": Decimal("0.5"), "b1": Decimal("0.1"), "b2": Decimal("0.1")}

    order = fair_order([early_a, late_b, later_b, urgent_a], share)

    assert [e.request_id for e in order] == ["a2", "b1", "b2", "a1"]


def test_an_entry_that_blocks_goes_first_in_its_priority_whatever_its_share() -> None:
    starved = replace(_of("a1", "a", at=5), passes=MAX_PASSES)
    other = _of("b1", "b")

    order = fair_order([other, starved], {"a1": Decimal(1), "b1": Decimal(0)})

    assert [e.request_id for e in order] == ["a1", "b1"]


def test_a_passed_wake_goes_to_the_next_in_fair_order_else_behind_in_the_queue() -> None:
    entries = [_of("a1", "a"), _of("b1", "b", at=1), _of("b2", "b", at=2)]
    order = fair_order(entries, {"a1": Decimal(1)})  # b1, b2, a1

    assert [e.request_id for e in fair_sharing.after(order, entries[1].key)] == ["b2", "a1"]
    gone = _of("a0", "a", at=-1).key  # before the window's first: everything behind it
    assert [e.request_id for e in fair_sharing.after(order, gone)] == ["b1", "b2", "a1"]


def test_usage_is_read_only_when_two_quotas_wait_one_item_per_cohort() -> None:
    a, b, c = _quota("a"), _quota("b"), _quota("c", cohort="other")
    one = {"a1": a, "a2": a}
    assert fair_sharing.usage_items(one, POOL) == []
    assert fair_sharing.usage_items({"a1": a, "b1": b, "c1": c}, POOL) == [
        "QuotaUsage#c#p",
        "QuotaUsage#other#p",
    ]


@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.sampled_from("abc"), st.integers(0, 100)),
        min_size=1,
        max_size=FAIR_WINDOW,
    ),
    st.dictionaries(st.sampled_from("abc"), st.decimals(0, 10, places=3)),
)
def test_the_fair_order_never_puts_a_lower_priority_or_a_higher_share_first(
    drawn: list[tuple[int, str, int]], team_share: dict[str, Decimal]
) -> None:
    entries = [_of(f"r{i}", team, p, at=at) for i, (p, team, at) in enumerate(drawn)]
    share = {e.request_id: team_share.get(e.requester or "", Decimal(0)) for e in entries}

    order = fair_order(entries, share)

    assert sorted(e.key for e in order) == sorted(e.key for e in entries)
    for first, then in pairwise(order):
        assert first.priority >= then.priority
        if first.priority == then.priority:
            assert (share[first.request_id], first.key) <= (share[then.request_id], then.key)


# -- the wake loop, over fakes --------------------------------------------------------------------


class Usage:
    def __init__(self, usage: dict[tuple[str, str], Resources]) -> None:
        self.usage = usage
        self.reads: list[list[str]] = []

    def usage_in(self, items: Sequence[str], pool: str) -> dict[tuple[str, str], Resources]:
        self.reads.append(list(items))
        return self.usage


def test_a_wake_admits_the_team_furthest_below_its_share_first_in_one_query() -> None:
    a, b = _quota("a"), _quota("b", weight=3)
    entries = [_of("a1", "a"), _of("a2", "a", at=1), _of("b1", "b", at=2)]
    items = Items(*entries)
    usage = Usage(_using(a=6, b=8))  # a: 2/8, b: 4/8/3
    sent = Sent()
    admission = AdmissionQueue(items, Held("a1", "a2", "b1"), sent, lambda: [a, b], usage)

    assert admission.wake(POOL) == "b1"
    assert items.queries == 1 and len(usage.reads) == 1 and len(sent.sent) == 1


def test_with_one_quota_waiting_the_wake_reads_no_usage_and_keeps_arrival_order() -> None:
    a, b = _quota("a"), _quota("b")
    items = Items(_of("a1", "a"), _of("a2", "a", at=1))
    usage = Usage(_using(a=8))
    admission = AdmissionQueue(items, Held("a1", "a2"), Sent(), lambda: [a, b], usage)

    assert admission.wake(POOL) == "a1"
    assert usage.reads == []


def test_a_refused_entry_passes_the_wake_to_the_next_in_fair_order() -> None:
    a, b = _quota("a"), _quota("b")
    first_a, b1, b2 = _of("a1", "a"), _of("b1", "b", at=1), _of("b2", "b", at=2)
    items = Items(first_a, b1, b2)
    usage = Usage(_using(a=8))  # a borrows: b's requests go first
    admission = AdmissionQueue(items, Held("a1", "b1", "b2"), Sent(), lambda: [a, b], usage)
    assert admission.wake(POOL) == "b1"

    admission.enqueue(b1)  # refused again

    assert items.entries[b2.key].wake == 2  # b2, not a1 that is ahead in the queue
    assert items.entries[first_a.key].wake == 0


# -- the bound under sustained contention ---------------------------------------------------------

WEIGHTS = st.decimals(Decimal("0.25"), Decimal(4), places=2)


@given(st.lists(WEIGHTS, min_size=2, max_size=4), st.integers(20, 80))
def test_under_sustained_contention_each_team_is_within_the_team_count_of_its_weight_share(
    weights: list[Decimal], rooms: int
) -> None:
    """Teams of one cohort that borrow everything they run (nominal 0), each keeping 2 requests
    of one instance waiting (the window holds them all); each room event wakes one, admitted.
    Then, after N admissions, team i's count is within T (the number of teams) of N * w_i / W."""
    teams = [f"t{i}" for i in range(len(weights))]
    quotas = [_quota("lender", "1000")] + [
        _quota(t, "0", weight=str(w)) for t, w in zip(teams, weights, strict=True)
    ]
    usage = Usage({})
    arrivals = iter(range(10**6))
    waiting = [_of(f"{t}-{next(arrivals)}", t, at=next(arrivals)) for t in teams for _ in "ab"]
    items = Items(*waiting)
    held = Held(*(e.request_id for e in waiting))
    admission = AdmissionQueue(items, held, Sent(), lambda: quotas, usage)
    admitted = dict.fromkeys(teams, 0)
    for _ in range(rooms):
        woken = admission.wake(POOL)
        assert woken is not None
        team = woken.split("-")[0]
        admitted[team] += 1  # admitted: it runs one more instance, borrowed
        usage.usage[(team, POOL)] = Resources(cpu=Decimal(admitted[team]))
        items.remove(POOL, next(k for k, e in items.entries.items() if e.request_id == woken))
        again = _of(f"{team}-{next(arrivals)}", team, at=next(arrivals))  # it asks again
        items.put(again)
        held.held[again.request_id] = "held"
    total = sum(weights)
    for team, weight in zip(teams, weights, strict=True):
        assert abs(admitted[team] - rooms * weight / total) <= len(teams), admitted
