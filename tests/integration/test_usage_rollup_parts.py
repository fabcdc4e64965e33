"""The usage roll-up of an estate larger than one transaction: a window of more buckets than
DynamoDB's 100 items a transaction (one per reservation and day at least: a hundred
reservations are enough) is written in parts, each bucket once, whatever run dies between them.

Found by the sync-calls benchmark: at 100 and 1,000 selected reservations the roll-up raised
`TooManyBuckets` every minute, and usage by team stopped being counted for the whole account."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest

from capacity_launcher.adapters import aws
from capacity_launcher.adapters.usage_store import PART_BUCKETS, ROLLING, UsageStore
from capacity_launcher.domain.accounting.team_usage import ReservationHours, RollupMark
from capacity_launcher.service.usage_rollup import UsageRollup
from tests.support.cloud import Cloud

DAY = date(2026, 11, 29)
SINCE = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
UNTIL = SINCE + timedelta(minutes=1)
RESERVATIONS = 2 * PART_BUCKETS + 10  # three parts
MINUTE = round(1 / 60, 6)  # a paid minute, in hours, as the store rounds it


def _reservations(count: int = RESERVATIONS) -> list[ReservationHours]:
    return [
        ReservationHours(f"cr-{n:017x}", "default", "m5.large", {DAY: 1 / 60}, {DAY: 0.0})
        for n in range(count)
    ]


def _store(cloud: Cloud) -> UsageStore:
    return UsageStore(cloud.names.state_table, aws.client("dynamodb"))


def _paid(cloud: Cloud) -> dict[str, float]:
    _, found = _store(cloud).day(DAY)
    return {r.reservation_id: r.paid[DAY] for r in found}


def _started(store: UsageStore) -> None:
    assert store.add(None, SINCE, {}, ())  # the first run only sets the watermark


def test_a_window_of_more_buckets_than_a_transaction_holds_is_counted_whole(cloud: Cloud) -> None:
    store = _store(cloud)
    _started(store)
    assert store.add(SINCE, UNTIL, {}, _reservations())
    paid = _paid(cloud)
    assert len(paid) == RESERVATIONS
    assert set(paid.values()) == {MINUTE}
    assert store.mark().counted_until == UNTIL
    assert store.mark().writing_until is None  # the window in parts ended


class _DiesAtPart:
    """The store's DynamoDB client, dying (as a killed worker) at the `n`th transaction."""

    def __init__(self, n: int) -> None:
        self._db = aws.client("dynamodb")
        self._left = n

    def transact_write_items(self, **kwargs: Any) -> Any:
        self._left -= 1
        if self._left == 0:
            raise SystemExit("killed between parts")
        return self._db.transact_write_items(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)


def test_a_run_dying_between_parts_is_finished_by_the_next_each_bucket_once(cloud: Cloud) -> None:
    _started(_store(cloud))
    dying = UsageStore(cloud.names.state_table, _DiesAtPart(2))
    with pytest.raises(SystemExit):
        dying.add(SINCE, UNTIL, {}, _reservations())
    # The first part is written, the watermark not moved, the window said
    assert len(_paid(cloud)) == PART_BUCKETS
    mark = _store(cloud).mark()
    assert (mark.counted_until, mark.writing_until) == (SINCE, UNTIL)
    # The next run's roll-up finishes that window, not one up to its own now
    later = UNTIL + timedelta(minutes=5)
    rollup = UsageRollup(_store(cloud), cloud.adapters().instance_records(), lambda: later)
    report = rollup.run([], {}, {})
    assert report.until == UNTIL and report.written
    assert _store(cloud).mark() == RollupMark(UNTIL, None)
    # and the window is counted: the same window again is refused (the watermark moved on)
    assert not _store(cloud).add(SINCE, UNTIL, {}, _reservations())


def test_the_window_finished_adds_the_parts_the_dead_run_did_not_write(cloud: Cloud) -> None:
    _started(_store(cloud))
    with pytest.raises(SystemExit):
        UsageStore(cloud.names.state_table, _DiesAtPart(2)).add(SINCE, UNTIL, {}, _reservations())
    store = _store(cloud)
    assert store.mark().writing_until == UNTIL
    assert store.add(SINCE, UNTIL, {}, _reservations())
    paid = _paid(cloud)
    assert len(paid) == RESERVATIONS
    assert set(paid.values()) == {MINUTE}  # the first part's not added twice
    assert store.mark() == RollupMark(UNTIL, None)


def test_another_window_from_the_same_watermark_is_refused_while_one_is_in_parts(
    cloud: Cloud,
) -> None:
    _started(_store(cloud))
    with pytest.raises(SystemExit):
        UsageStore(cloud.names.state_table, _DiesAtPart(2)).add(SINCE, UNTIL, {}, _reservations())
    store = _store(cloud)
    other = UNTIL + timedelta(minutes=1)
    # A longer window, in parts or in one transaction, would count the first part's hour again
    assert not store.add(SINCE, other, {}, _reservations())
    assert not store.add(SINCE, other, {}, _reservations(3))
    assert set(_paid(cloud).values()) == {MINUTE}
    item = aws.client("dynamodb").get_item(
        TableName=cloud.names.state_table,
        Key={"pk": {"S": ROLLING[0]}, "sk": {"S": ROLLING[1]}},
        ConsistentRead=True,
    )
    assert item["Item"]["until"]["S"] == UNTIL.isoformat()
