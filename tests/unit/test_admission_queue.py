"""Issue 37: the admission queues' pure decisions (domain/accounting/admission_queue.py) and the
wake loop over fakes (service/admission_queue.py), without moto."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from capacity_launcher.domain.accounting.admission_queue import (
    MAX_PASSES,
    NOT_ADMITTED_BY_DEADLINE,
    WAKE_WINDOW,
    QueueEntry,
    capacity_awaited,
    entry_key,
    in_order,
    limit_awaited,
    missed_deadline,
    pass_wake_on,
    priority_of,
    queue_check_seconds,
    queue_pool,
    quota_awaited,
    waits_instead,
)
from capacity_launcher.domain.accounting.quota_admission import Cohort
from capacity_launcher.domain.apis.quotas import CapacityQuota
from capacity_launcher.domain.errors import QuotaExceeded
from capacity_launcher.domain.launch_request import parse_launch_request
from capacity_launcher.domain.quantities import Resources
from capacity_launcher.domain.records.status import (
    AwaitedReservation,
    RequestRecord,
    RequestStatus,
    UnavailableOffering,
)
from capacity_launcher.service.admission_queue import AdmissionQueue

NOW = datetime(2026, 11, 28, 12, tzinfo=UTC)
PRIORITIES = st.integers(min_value=-(2**31), max_value=2 * 10**9)


def test_a_quota_refusal_waits_for_the_quota_resource_and_how_much_more() -> None:
    refused = QuotaExceeded("team-a", "gpu", "memory", "over", needed=Decimal(2048))

    awaited = quota_awaited(refused)

    assert awaited is not None
    assert (awaited.kind, awaited.quota, awaited.node_pool, awaited.resource) == (
        "Quota", "team-a", "gpu", "memory"
    )  # fmt: skip
    assert awaited.needed == "2Gi"
    assert awaited.reason == str(refused)


@pytest.mark.parametrize(
    "refused",
    [
        QuotaExceeded(None, "gpu", None, "no quota covers the requester"),
        QuotaExceeded("team-a", "gpu", None, "has no quota in NodePool gpu"),
        QuotaExceeded("team-a", "gpu", "instances", "asks more than its bound", ever=False),
    ],
)
def test_a_refusal_waiting_cannot_cure_is_not_waited_for(refused: QuotaExceeded) -> None:
    assert quota_awaited(refused) is None


def test_the_quota_arithmetic_says_how_much_more_is_needed_and_whether_ever() -> None:
    quota = CapacityQuota.model_validate(
        {
            "apiVersion": "capacity-launcher/v1",
            "kind": "CapacityQuota",
            "metadata": {"name": "team-a"},
            "spec": {
                "requesters": ["team-a"],
                "resourceGroups": [
                    {
                        "coveredResources": ["instances"],
                        "flavors": [
                            {"name": "p", "resources": [{"name": "instances", "nominalQuota": "4"}]}
                        ],
                    }
                ],
            },
        }
    )
    ledger = Cohort([quota], {("team-a", "p"): Resources(cpu=0, memory_mib=0, gpu=0, instances=3)})
    one = Resources(cpu=0, memory_mib=0, gpu=0, instances=1)

    with pytest.raises(QuotaExceeded) as over:
        ledger.admit("team-a", "p", one * 3)
    with pytest.raises(QuotaExceeded) as never:
        ledger.admit("team-a", "p", one * 5)

    assert (over.value.needed, over.value.ever) == (Decimal(2), True)
    assert never.value.ever is False


def test_a_request_waits_only_before_its_deadline_with_nothing_launched_and_something_to_wait_for():
    limit = [limit_awaited("p", "full")]
    deadline = NOW + timedelta(hours=1)

    assert waits_instead(deadline, NOW, 0, limit)
    assert not waits_instead(None, NOW, 0, limit)
    assert not waits_instead(deadline, deadline, 0, limit)
    assert not waits_instead(deadline, NOW, 1, limit)
    assert not waits_instead(deadline, NOW, 0, [])


def test_the_deadline_error_names_what_it_waited_for() -> None:
    error = missed_deadline(NOW, [limit_awaited("p", "full")])

    assert error.code == NOT_ADMITTED_BY_DEADLINE
    assert error.message.startswith("waitForCapacityUntil: 2026-11-28T12:00:00.000Z passed")
    assert "limits of p" in error.message


def test_a_capacity_entry_names_each_dry_offering_once() -> None:
    dry = [
        UnavailableOffering(
            instance_type="p5.48xlarge", zone="a", capacity_type="on-demand", reason="ICE"
        )
    ] * 2

    awaited = capacity_awaited("p", "every offering is dry", dry)

    assert awaited.offerings == ["p5.48xlarge/a/on-demand"]


def test_the_held_copy_comes_back_at_the_deadline_within_sqs_bounds() -> None:
    assert queue_check_seconds(NOW, NOW + timedelta(days=3)) == 900
    assert queue_check_seconds(NOW, NOW + timedelta(minutes=10)) == 601
    assert queue_check_seconds(NOW, NOW + timedelta(seconds=5)) == 60


def test_a_reservation_entry_shows_exactly_the_fields_it_always_had() -> None:
    reservation = AwaitedReservation(
        capacity_reservation_id="cr-1", state="scheduled", capacity_reservation_type="default"
    )
    quota = quota_awaited(QuotaExceeded("q", "p", "cpu", "over", needed=Decimal(2)))

    assert set(reservation.to_dict()) == {
        "capacityReservationId", "state", "capacityReservationType", "startDate"
    }  # fmt: skip
    assert quota is not None and quota.to_dict()["kind"] == "Quota"
    assert "capacityReservationId" not in quota.to_dict()


@given(PRIORITIES, PRIORITIES, st.integers(0, 10**6), st.integers(0, 10**6))
def test_the_sort_key_orders_by_priority_highest_first_then_arrival(
    high: int, low: int, first: int, second: int
) -> None:
    a = entry_key(high, NOW + timedelta(seconds=first), "a")
    b = entry_key(low, NOW + timedelta(seconds=second), "b")

    if high != low:
        assert (a < b) == (high > low)
    elif first != second:
        assert (a < b) == (first < second)
    else:
        assert a < b  # then by requestId


def _entry(request_id: str, priority: int = 0, *, at: int = 0, **kept: int) -> QueueEntry:
    entry = QueueEntry.of(
        "p", request_id, priority, NOW + timedelta(seconds=at), NOW + timedelta(days=1), "{}", "q"
    )
    return replace(entry, **kept)


def test_a_woken_entry_refused_again_passes_the_wake_on_within_the_window() -> None:
    assert pass_wake_on(_entry("a")) is None  # not woken by a room event: its held copy
    assert [pass_wake_on(_entry("a", wake=w)) for w in range(1, WAKE_WINDOW + 1)] == [
        *range(2, WAKE_WINDOW + 1),
        None,
    ]


def test_an_entry_passed_over_too_often_blocks_the_queue_behind_it() -> None:
    assert pass_wake_on(_entry("a", wake=1, passes=MAX_PASSES - 1)) == 2
    assert pass_wake_on(_entry("a", wake=1, passes=MAX_PASSES)) is None


def test_the_queue_a_request_waits_in_is_its_last_refusals_pool() -> None:
    waited = [limit_awaited("a", "full"), limit_awaited("b", "full")]

    assert queue_pool(waited) == "b"
    assert queue_pool([AwaitedReservation(capacity_reservation_id="cr-1")]) is None


# -- the wake loop, over fakes --------------------------------------------------------------------


class Items:
    def __init__(self, *entries: QueueEntry) -> None:
        self.entries = {e.key: e for e in entries}
        self.queries = 0

    def put(self, entry: QueueEntry) -> QueueEntry | None:
        before = self.entries.get(entry.key)
        passes = before.passes if before else 0
        self.entries[entry.key] = replace(entry, wake=0, passes=passes)
        return before

    def head(self, pool: str, after: str | None = None, limit: int = 1) -> list[QueueEntry]:
        self.queries += 1
        ordered = [e for e in in_order(self.entries.values()) if after is None or e.key > after]
        return ordered[:limit]

    def woken(self, entry: QueueEntry, wake: int) -> None:
        if entry.key in self.entries:
            self.entries[entry.key] = replace(self.entries[entry.key], wake=wake)

    def passed_over(self, entry: QueueEntry) -> None:
        found = self.entries[entry.key]
        self.entries[entry.key] = replace(found, passes=found.passes + 1)

    def remove(self, pool: str, entry_key: str) -> None:
        self.entries.pop(entry_key, None)


class Held:
    def __init__(self, *waiting: str) -> None:
        self.held = {r: f"held-{r}" for r in waiting}
        self.final: set[str] = set()

    def waiting(self, request_id: str) -> tuple[RequestRecord, str | None] | None:
        if request_id not in self.held:
            return None
        status = RequestStatus.FAILED if request_id in self.final else RequestStatus.WAITING
        record = RequestRecord(
            request_id=request_id,
            status=status,
            requested=1,
            launched=0,
            received_at=NOW,
            finished_at=NOW,
            waiting_for=[limit_awaited("p", "full")] if status is RequestStatus.WAITING else [],
        )
        return record, self.held[request_id]

    def rehold(self, request_id: str, held_by: str | None, new: str) -> bool:
        if self.held.get(request_id) != held_by:
            return False
        self.held[request_id] = new
        return True


class Sent:
    def __init__(self) -> None:
        self.sent: list[str] = []

    def redrive(self, queue_arn: str, body: str) -> str:
        self.sent.append(body)
        return f"m-{len(self.sent)}"


def _queue(items: Items, held: Held) -> tuple[AdmissionQueue, Sent]:
    sent = Sent()
    return AdmissionQueue(items, held, sent), sent


def test_a_wake_sends_the_heads_message_and_hands_it_the_wait() -> None:
    items = Items(_entry("low", 1), _entry("high", 9, at=5))
    held = Held("low", "high")
    admission, sent = _queue(items, held)

    assert admission.wake("p") == "high"
    assert len(sent.sent) == 1 and items.queries == 1
    assert held.held["high"] == "m-1"
    assert items.entries[entry_key(9, NOW + timedelta(seconds=5), "high")].wake == 1


def test_a_wake_removes_stale_entries_and_wakes_the_first_live_one() -> None:
    items = Items(_entry("gone"), _entry("ended", at=1), _entry("live", at=2))
    held = Held("ended", "live")
    held.final.add("ended")
    admission, _ = _queue(items, held)

    assert admission.wake("p") == "live"
    assert [e.request_id for e in items.entries.values()] == ["live"]


def test_a_woken_head_refused_again_wakes_the_next_and_is_passed_over_once() -> None:
    head, behind = _entry("big"), _entry("small", at=1)
    items = Items(head, behind)
    admission, _ = _queue(items, Held("big", "small"))
    admission.wake("p")

    admission.enqueue(head)  # refused again: waits at its place

    assert items.entries[head.key].passes == 1
    assert items.entries[behind.key].wake == 2  # the wake passed on


def test_leaving_removes_the_entry_and_wakes_the_new_head() -> None:
    first, second = _entry("first"), _entry("second", at=1)
    items = Items(first, second)
    held = Held("first", "second")
    admission, _ = _queue(items, held)
    record, _ = held.waiting("first") or (None, None)
    assert record is not None

    admission.leave(record, 0)

    assert list(items.entries) == [second.key]
    assert held.held["second"] == "m-1"


@given(st.lists(st.tuples(PRIORITIES, st.integers(0, 1000)), min_size=1, max_size=30))
def test_the_wake_cost_is_flat_in_the_number_waiting(waiting: list[tuple[int, int]]) -> None:
    entries = [_entry(f"r{i}", p, at=at) for i, (p, at) in enumerate(waiting)]
    items = Items(*entries)
    admission, sent = _queue(items, Held(*(e.request_id for e in entries)))

    woken = admission.wake("p")

    assert woken == in_order(entries)[0].request_id  # the highest priority, earliest
    assert items.queries == 1 and len(sent.sent) == 1


def test_the_priority_is_the_named_class_else_the_quotas_else_zero() -> None:
    assert priority_of(1000, 5) == 1000
    assert priority_of(-3, 5) == -3
    assert priority_of(None, 5) == 5
    assert priority_of(None, None) == 0


def test_a_launch_request_may_name_a_priority_class() -> None:
    body = {"requestId": "r-1", "count": 1, "priorityClassName": "urgent"}

    parsed = parse_launch_request(body)

    assert parsed.priority_class_name == "urgent"
    assert (
        "priorityClassName" not in parse_launch_request({"requestId": "r-1", "count": 1}).to_dict()
    )
