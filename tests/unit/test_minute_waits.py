"""The minute's waits (service/minute_waits.py): one read of the WaitingRequests index serves the
backstop's bound and the gauges', and the sync's own writes keep it true (issue 38)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from capacity_launcher.domain.capacity.capacity_wait import HeldWait, deadline_before
from capacity_launcher.domain.launch_request import MAX_CAPACITY_WAIT
from capacity_launcher.domain.records.status import RequestRecord, RequestStatus
from capacity_launcher.service.minute_waits import MinuteWaits

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def waiting(request_id: str, deadline: datetime) -> HeldWait:
    record = RequestRecord(
        request_id=request_id,
        status=RequestStatus.WAITING,
        requested=1,
        launched=0,
        received_at=deadline - timedelta(days=1),
        finished_at=deadline - timedelta(days=1),
        wait_for_capacity_until=deadline,
    )
    return HeldWait(record, "m-1", waiting_until=int(deadline.timestamp()))


class Index:
    """The index as a Query with a `waitingUntil < before` condition reads it."""

    def __init__(self, *waits: HeldWait) -> None:
        self.waits = {w.record.request_id: w for w in waits}
        self.reads: list[datetime] = []
        self.refuse = False

    def overdue_waits(self, deadline_before_: datetime) -> list[HeldWait]:
        self.reads.append(deadline_before_)
        return [w for w in self.waits.values() if deadline_before(w, deadline_before_)]

    def end_wait(self, wait: HeldWait, outcome: RequestRecord) -> bool:
        if self.refuse:
            return False
        self.waits[wait.record.request_id] = replace(wait, record=outcome)
        return True

    def clear_wait(self, request_id: str) -> None:
        self.waits.pop(request_id, None)


def test_one_read_answers_the_backstop_and_the_gauges_as_their_queries_would() -> None:
    overdue, live = waiting("r-overdue", NOW - timedelta(hours=3)), waiting("r-live", NOW)
    index = Index(overdue, live)
    minute = MinuteWaits(index)
    backstop = NOW - timedelta(hours=2)
    assert minute.overdue_waits(backstop) == index.overdue_waits(backstop) == [overdue]
    gauges = NOW + MAX_CAPACITY_WAIT
    assert minute.overdue_waits(gauges) == index.overdue_waits(gauges) == [overdue, live]
    # The minute read the index once (and the test twice)
    assert len(index.reads) == 3


def test_the_sync_s_own_writes_keep_the_read_true_and_a_refused_one_reads_again() -> None:
    overdue, live = waiting("r-overdue", NOW - timedelta(hours=3)), waiting("r-live", NOW)
    index = Index(overdue, live)
    minute = MinuteWaits(index)
    (wait,) = minute.overdue_waits(NOW - timedelta(hours=2))
    failed = wait.record.model_copy(update={"status": RequestStatus.FAILED})
    # An ended wait is its outcome (the gauges skip it); a cleared one is gone
    assert minute.end_wait(wait, failed)
    statuses = [w.record.status for w in minute.overdue_waits(NOW + MAX_CAPACITY_WAIT)]
    assert statuses == [RequestStatus.FAILED, RequestStatus.WAITING]
    minute.clear_wait("r-overdue")
    assert minute.overdue_waits(NOW + MAX_CAPACITY_WAIT) == [live]
    assert len(index.reads) == 1
    # A write another writer's change refused: the next call reads the index again
    index.refuse = True
    refused = live.record.model_copy(update={"status": RequestStatus.FAILED})
    assert not minute.end_wait(live, refused)
    assert minute.overdue_waits(NOW + MAX_CAPACITY_WAIT) == [live]
    assert len(index.reads) == 2
