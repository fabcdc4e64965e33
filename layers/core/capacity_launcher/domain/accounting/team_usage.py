"""Usage by team: instance-hours per requester, pool and capacity type, reservation hours paid and
used, and the idle share of each reservation attributed to the teams that used it (issue 39).

The sync rolls usage up each run over the window since the last roll-up (`window_usage`): each of
our instances counts the part of its life inside the window, from its launch (`launchedAt`) to
its release (`releasedAt`, set by the stop or termination that released it) or to now while it
runs; hours are split at UTC midnight into one bucket per day, requester, pool, capacity kind,
instance type and reservation. Each selected reservation counts `total` (paid) and
`total - available` (used) instance-hours over the window, at the counts the sync saw (the same
counts as the idle accounting of domain/capacity/idle_reservations.py).

The idle share (`usage_report`): a reservation's idle hours of a day (paid minus used) are
attributed to the requesters in proportion to their instance-hours in that reservation that day.
A day on which none of our instances used it leaves its idle hours unattributed (`requester`
None): nobody of ours asked for it that day, so no team is blamed for it.

Estimated cost only from a price table the operator gives (`PriceTable`); a row whose instance
type and capacity kind the table does not price has no cost, never a guessed one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from capacity_launcher.domain.errors import CapacityLauncherError

CapacityKind = Literal["reserved", "block", "on-demand", "spot"]
CAPACITY_KINDS: tuple[CapacityKind, ...] = ("reserved", "block", "on-demand", "spot")
SECONDS_PER_HOUR = 3600.0
# How far back a report reads (one Query per day).
MAX_REPORT_DAYS = 400


@dataclass(frozen=True)
class Lifetime:
    """One instance of ours as usage counts it: who, where, and when it ran."""

    instance_id: str
    requester: str | None
    node_pool: str | None
    capacity_kind: CapacityKind
    instance_type: str
    reservation_id: str | None
    start: datetime
    end: datetime | None  # None while it runs


@dataclass(frozen=True, order=True)
class UsageBucket:
    """One bucket of a day's instance-hours (one stored item)."""

    day: date
    requester: str | None
    node_pool: str | None
    capacity_kind: str
    instance_type: str
    reservation_id: str | None


@dataclass(frozen=True)
class RollupMark:
    """Where the usage roll-up stands: the end of the last window counted (None: never set), and
    the end of a window a run began writing in parts from it and did not finish (the next run
    finishes that window, not a longer one, so no bucket counts an hour twice)."""

    counted_until: datetime | None
    writing_until: datetime | None = None


@dataclass(frozen=True)
class ReservationHours:
    """A reservation's paid and used instance-hours over a window, by day."""

    reservation_id: str
    reservation_type: str
    instance_type: str
    paid: Mapping[date, float]
    used: Mapping[date, float]


def merged_hours(earlier: ReservationHours | None, later: ReservationHours) -> ReservationHours:
    """One reservation's hours of several days, as one."""
    if earlier is None:
        return later
    return ReservationHours(
        later.reservation_id,
        later.reservation_type,
        later.instance_type,
        {**earlier.paid, **later.paid},
        {**earlier.used, **later.used},
    )


def capacity_kind(capacity_type: str, reservation_type: str | None) -> CapacityKind:
    """`reserved` capacity of a Capacity Block is `block`; the rest as launched."""
    if capacity_type == "reserved":
        return "block" if reservation_type == "capacity-block" else "reserved"
    return "spot" if capacity_type == "spot" else "on-demand"


def hours_by_day(start: datetime, end: datetime) -> dict[date, float]:
    """The hours of [start, end) on each UTC day they touch."""
    start, end = start.astimezone(UTC), end.astimezone(UTC)
    found: dict[date, float] = {}
    while start < end:
        midnight = datetime.combine(start.date() + timedelta(days=1), time(), tzinfo=UTC)
        step_end = min(end, midnight)
        found[start.date()] = found.get(start.date(), 0.0) + (
            (step_end - start).total_seconds() / SECONDS_PER_HOUR
        )
        start = step_end
    return found


def window_usage(
    lifetimes: Iterable[Lifetime], since: datetime, until: datetime
) -> dict[UsageBucket, float]:
    """Each lifetime's hours inside [since, until), by day and bucket."""
    usage: dict[UsageBucket, float] = defaultdict(float)
    for life in lifetimes:
        start = max(life.start, since)
        end = min(life.end or until, until)
        for day, hours in hours_by_day(start, end).items():
            key = UsageBucket(
                day,
                life.requester,
                life.node_pool,
                life.capacity_kind,
                life.instance_type,
                life.reservation_id,
            )
            usage[key] += hours
    return dict(usage)


def reservation_window(
    reservation_id: str,
    reservation_type: str,
    instance_type: str,
    total: int,
    available: int,
    since: datetime,
    until: datetime,
) -> ReservationHours:
    """Paid (`total`) and used (`total - available`) instance-hours over [since, until)."""
    by_day = hours_by_day(since, until)
    used = max(total - max(available, 0), 0)
    return ReservationHours(
        reservation_id,
        reservation_type,
        instance_type,
        {d: total * h for d, h in by_day.items()},
        {d: used * h for d, h in by_day.items()},
    )


# -- the price table ------------------------------------------------------------------------


class PriceTableError(CapacityLauncherError):
    """A price table that does not parse: names the field and the rule."""


class PriceTable(BaseModel):
    """USD per instance-hour, per capacity kind and instance type, as the operator states them:
    `reserved` and `block` price a reservation's hours (paid whether used or not)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    currency: str = "USD"
    on_demand: dict[str, Decimal] = Field(default_factory=dict, alias="onDemand")
    spot: dict[str, Decimal] = Field(default_factory=dict)
    reserved: dict[str, Decimal] = Field(default_factory=dict)
    block: dict[str, Decimal] = Field(default_factory=dict)

    def price(self, kind: str, instance_type: str) -> Decimal | None:
        table = {
            "on-demand": self.on_demand,
            "spot": self.spot,
            "reserved": self.reserved,
            "block": self.block,
        }.get(kind, {})
        found = table.get(instance_type)
        return found if found is not None and found >= 0 else None


def price_table(document: object) -> PriceTable:
    """A price table from its parsed JSON or YAML, or PriceTableError naming what is wrong."""
    try:
        table = PriceTable.model_validate(document)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(document)"
        raise PriceTableError(
            f"price table: {where}: {first['msg']} (expected onDemand, spot, reserved and block, "
            "each mapping an instance type to USD per hour)"
        ) from error
    negative = [
        f"{name}.{itype}"
        for name, prices in (
            ("onDemand", table.on_demand),
            ("spot", table.spot),
            ("reserved", table.reserved),
            ("block", table.block),
        )
        for itype, price in prices.items()
        if price < 0
    ]
    if negative:
        raise PriceTableError(f"price table: {negative[0]}: a price must be 0 or more")
    return table


# -- the report -------------------------------------------------------------------------------


@dataclass(frozen=True)
class UsageRow:
    """One line of `capacity-launcher usage`: a requester's hours in a pool, of one capacity kind
    and instance type (and reservation), over the report's days."""

    requester: str | None
    node_pool: str | None
    capacity_kind: str
    instance_type: str
    reservation_id: str | None
    instance_hours: float
    idle_share_hours: float = 0.0
    estimated_cost: Decimal | None = None


@dataclass(frozen=True)
class ReservationRow:
    reservation_id: str
    reservation_type: str
    instance_type: str
    paid_hours: float
    used_hours: float
    ours_hours: float
    idle_hours: float
    unattributed_idle_hours: float


@dataclass(frozen=True)
class UsageReport:
    since: datetime
    until: datetime
    rows: list[UsageRow] = field(default_factory=list)
    reservations: list[ReservationRow] = field(default_factory=list)
    priced: bool = False

    @property
    def estimated_cost(self) -> Decimal | None:
        costs = [r.estimated_cost for r in self.rows if r.estimated_cost is not None]
        return sum(costs, Decimal(0)) if self.priced else None


def _idle_shares(
    usage: Mapping[UsageBucket, float], reservations: Sequence[ReservationHours]
) -> tuple[dict[UsageBucket, float], dict[str, float]]:
    """Each bucket's share of its reservation's idle hours, day by day, and what no one used."""
    shares: dict[UsageBucket, float] = defaultdict(float)
    unattributed: dict[str, float] = defaultdict(float)
    for reservation in reservations:
        for day, paid in reservation.paid.items():
            idle = max(paid - reservation.used.get(day, 0.0), 0.0)
            ours = {
                k: h
                for k, h in usage.items()
                if k.day == day and k.reservation_id == reservation.reservation_id and h > 0
            }
            total = sum(ours.values())
            if not total:
                unattributed[reservation.reservation_id] += idle
                continue
            for key, hours in ours.items():
                shares[key] += idle * hours / total
    return dict(shares), dict(unattributed)


def usage_report(
    since: datetime,
    until: datetime,
    usage: Mapping[UsageBucket, float],
    reservations: Sequence[ReservationHours],
    prices: PriceTable | None = None,
) -> UsageReport:
    """The report over the stored days: rows by requester, pool, kind, type and reservation;
    reservations' paid, used and idle hours; idle shares by the rule above; costs if priced."""
    shares, unattributed = _idle_shares(usage, reservations)
    grouped: dict[tuple[str | None, str | None, str, str, str | None], list[float]] = {}
    for key, hours in usage.items():
        row_key = (
            key.requester,
            key.node_pool,
            key.capacity_kind,
            key.instance_type,
            key.reservation_id,
        )
        totals = grouped.setdefault(row_key, [0.0, 0.0])
        totals[0] += hours
        totals[1] += shares.get(key, 0.0)
    rows = [
        UsageRow(*k, instance_hours=h, idle_share_hours=s, estimated_cost=_cost(prices, k, h, s))
        for k, (h, s) in grouped.items()
    ]
    ours: dict[str, float] = defaultdict(float)
    for key, hours in usage.items():
        if key.reservation_id:
            ours[key.reservation_id] += hours
    reservation_rows = []
    for r in reservations:
        paid, used = sum(r.paid.values()), sum(r.used.values())
        reservation_rows.append(
            ReservationRow(
                r.reservation_id,
                r.reservation_type,
                r.instance_type,
                paid,
                used,
                ours.get(r.reservation_id, 0.0),
                max(paid - used, 0.0),
                unattributed.get(r.reservation_id, 0.0),
            )
        )
    rows.sort(key=lambda r: tuple((v is None, v or "") for v in _row_order(r)))
    reservation_rows.sort(key=lambda r: r.reservation_id)
    return UsageReport(since, until, rows, reservation_rows, priced=prices is not None)


def _row_order(row: UsageRow) -> tuple[str | None, ...]:
    return (row.requester, row.node_pool, row.capacity_kind, row.instance_type, row.reservation_id)


def _cost(
    prices: PriceTable | None,
    key: tuple[str | None, str | None, str, str, str | None],
    hours: float,
    idle_share: float,
) -> Decimal | None:
    """Priced hours: a reservation's price covers the hours used and the idle share."""
    if prices is None:
        return None
    price = prices.price(key[2], key[3])
    if price is None:
        return None
    billed = Decimal(str(round(hours + idle_share, 6)))
    return (price * billed).quantize(Decimal("0.01"))
