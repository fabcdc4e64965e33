"""AWS calls per warm request into a reservation, against the reservations it could use (issue 38).

One pool of one instance type in one zone, `reserved` then `on-demand`, whose NodeClass uses N
reservations of that type and zone (each with room): a targeted ODCR selected by tag, an open one
selected by tag, or a group of them (a resource group the NodeClass targets). Real reservations
in the emulator, the minute's reservation sync run after each growth; a warm container (one
request served first) serves one request for one instance, and every call its shared clients
make is counted, by operation (as `benchmarks.offering_calls` counts).

The baseline (`BASELINE`, extracted with `git archive`, measured in a child process over its own
code) is the revision before issue 38's cuts of the idempotency completion and the location of
instances EC2 put in a known reservation, in the same run on the same emulator.

    PYTHONPATH=layers/core:local:. .venv/bin/python -m benchmarks.reservation_calls
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchmarks.revisions import REPO, extracted, measured_in

USABLE = (1, 10, 100, 1000)
KINDS = ("targeted", "open", "group")
# The revision before issue 38's cuts on this path: today's cost, measured beside this one.
BASELINE = "967d60f"
ZONE = "us-east-1a"
TYPE = "m5.large"
TAG = {"bench": "reservation-calls"}
GOAL_CALLS = 10  # issue 38's target for a warm request into a reservation or group
# A reserved attempt's launch template names its reservation: the first request a container
# sends into a reservation it has not launched into makes that template (once per reservation
# and container, not per request). The goal judges the steady request, without them.
FIRST_INTO_A_RESERVATION = ("CreateLaunchTemplate", "DescribeLaunchTemplates")
# What a warm request into a reservation makes beyond the on-demand one's (the section before
# this one says what those buy), and why.
BEYOND_ON_DEMAND: tuple[tuple[str, str], ...] = (
    (
        "BatchGetItem (coverage and snapshots), in place of none",
        "the pool's NodeClass's coverage item (which reservations it selects, each one's type, "
        "zone and the room the sync saw) and, in the same strongly consistent read, the "
        "snapshots the container's last coverage names first (a page of them, most room first; "
        "a group's members too, those its last launch into the group landed in first): the "
        "slots are decided on what the snapshots hold now. The snapshots read "
        "back are used only when the coverage read with them names exactly those; else they "
        "are read again (a second BatchGetItem: the coverage changed since the container last "
        "read it, at most 60 s before: service/reservations.py, `COVERAGE_KEPT_SECONDS`)",
    ),
    (
        "the slot claim, in the intent's TransactWriteItems (no call of its own)",
        "targeted and open: the snapshot's conditional decrement (room enough, not exhausted) is "
        "an item of the transaction that writes the intent and its pointers, and the intent "
        "records the slots it claimed: a replay of a pending intent claims none again; slots "
        "its instances did not take go back with its answer, once (service/launch/claim.py)",
    ),
    (
        "the slots noted as taken, in the settle's TransactWriteItems (no call of its own)",
        "the slots a fleet's instances took in reservations it did not claim (a group's member, "
        "an open reservation) are noted with the intent's answer in the lease settle, only "
        "while the intent is pending: once, whoever replays it",
    ),
    (
        "DescribeInstances (group only)",
        "which of the group's reservations each instance landed in: CreateFleet's answer does "
        "not say, and the record, the snapshot noted and every later event name the "
        "reservation. A targeted or open attempt's reservation is the one it named. A member "
        "EC2 chose that the page read did not reach has its snapshot read after (one more "
        "BatchGetItem, however many members), so the record names its type and dates; the "
        "emulator's EC2 fills a group's members in order, so here the counted request lands "
        "in the member the warm one did, which its container reads first",
    ),
    (
        "CreateLaunchTemplate and DescribeLaunchTemplates (the first request into a reservation)",
        "a reserved attempt's launch template names its reservation (as Karpenter's do): made "
        "once per reservation and container, then kept; in the table, from 10 usable "
        "reservations on, the counted request goes to another reservation than the warm-up's "
        "(the one with most room) and makes its template",
    ),
)


@dataclass(frozen=True)
class Point:
    kind: str
    usable: int
    calls: dict[str, int]  # by operation
    reserved: bool  # the counted request's instance landed in one of the reservations

    @property
    def total(self) -> int:
        return sum(self.calls.values())


def _reserve(cloud: Any, match: str, count: int) -> list[str]:
    made = []
    for _ in range(count):
        response = cloud.ec2.create_capacity_reservation(
            InstanceType=TYPE,
            InstancePlatform="Linux/UNIX",
            AvailabilityZone=ZONE,
            InstanceCount=4,
            InstanceMatchCriteria=match,
            TagSpecifications=[
                {
                    "ResourceType": "capacity-reservation",
                    "Tags": [{"Key": k, "Value": v} for k, v in TAG.items()],
                }
            ],
        )
        made.append(str(response["CapacityReservation"]["CapacityReservationId"]))
    return made


def _group(cloud: Any, arns: Any, reservation_ids: Sequence[str], group: str | None) -> str:
    """The group `group` holding `reservation_ids` too (a new one when None), 10 ARNs a call
    (GroupResources' limit)."""
    from capacity_launcher.adapters import aws
    from tests.integration.test_launch_into_reservations import group_of

    if group is None:
        group = group_of(cloud, *reservation_ids[:10], name="bench-group")
        reservation_ids = reservation_ids[10:]
    for start in range(0, len(reservation_ids), 10):
        aws.client("resource-groups").group_resources(
            Group=group, ResourceArns=[arns(r) for r in reservation_ids[start : start + 10]]
        )
    return group


def _apply(cloud: Any, kind: str, group: str | None) -> None:
    from benchmarks.scene import POOL
    from tests.support import cloud as support

    spec: dict[str, Any] = {"securityGroupIds": [support.default_security_group(cloud.ec2)]}
    if kind == "group":
        spec["capacityReservationSpec"] = {
            "capacityReservationTarget": {"capacityReservationResourceGroupArn": group}
        }
    else:
        spec["capacityReservationSelectorTerms"] = [{"tags": TAG}]
    subnet = support.default_subnets(cloud.ec2)[ZONE]
    cloud.apply(
        support.node_class("bench-class", [subnet], support.an_image(cloud.ec2), **spec),
        support.node_pool(
            POOL,
            "bench-class",
            requirements=[
                support.capacity_type("reserved", "on-demand"),
                support.instance_type(TYPE),
            ],
        ),
    )


def _curve(kind: str, sizes: Sequence[int]) -> list[Point]:
    import moto_capacity
    from benchmarks.offering_calls import _counting
    from benchmarks.scene import bench_cloud, request
    from capacity_launcher.service import wiring
    from capacity_launcher.settings import get_settings

    points = []
    with bench_cloud() as cloud:
        moto_capacity.set_consistency(0, 0)
        account = cloud.names.account_id

        def arn(reservation_id: str) -> str:
            return f"arn:aws:ec2:us-east-1:{account}:capacity-reservation/{reservation_id}"

        group: str | None = None
        batch = cloud.batch
        had = 0
        for size in sizes:
            made = _reserve(cloud, "open" if kind == "open" else "targeted", size - had)
            had = size
            moto_capacity.advance_clock(60)  # every new reservation active
            if kind == "group":
                fresh = group is None
                group = _group(cloud, arn, made, group)
                if fresh:
                    _apply(cloud, kind, group)
            elif size == sizes[0]:
                _apply(cloud, kind, None)
            wiring.Adapters(get_settings()).reservation_sync().run()
            cloud.send(request(f"warm-{size}"), batch=batch)  # the container is warm from here on
            counted = f"counted-{kind}-{size}-{uuid.uuid4().hex[:6]}"
            with _counting(cloud.names.unavailable_offerings_table) as calls:
                failed = cloud.send(request(counted), batch=batch)
            record = cloud.record(counted)
            assert not failed, failed
            assert record is not None, (kind, size)
            assert record.launched == 1, (kind, size, record)
            calls.pop("ice-writes", 0)
            reserved = bool(record.instances[0].capacity_reservation_id)
            points.append(Point(kind, size, dict(calls), reserved))
    return points


def measure(sizes: Sequence[int] = USABLE) -> list[Point]:
    return [p for kind in KINDS for p in _curve(kind, sizes)]


def _measure_in(root: Path) -> list[Point]:
    return [
        Point(p["kind"], p["usable"], p["calls"], p["reserved"])
        for p in measured_in(root, __file__)
    ]


@dataclass(frozen=True)
class Result:
    ours: list[Point]
    baseline: list[Point]
    baseline_label: str


def run(baseline: str = BASELINE) -> Result:
    with extracted(baseline) as folder:
        theirs = _measure_in(folder)
    return Result(_measure_in(REPO), theirs, baseline)


def steady(point: Point) -> int:
    """The point's calls but the first request's into a reservation (its launch template)."""
    return point.total - sum(point.calls.get(op, 0) for op in FIRST_INTO_A_RESERVATION)


def summary(points: Sequence[Point]) -> str:
    """The fewest and most calls of each kind of reservation, steady, over the sizes measured;
    and the most a first request into a reservation made."""
    parts = []
    for kind in KINDS:
        totals = [steady(p) for p in points if p.kind == kind]
        if totals:
            low, high = min(totals), max(totals)
            parts.append(f"{kind} {low}" if low == high else f"{kind} {low}-{high}")
    first = max((p.total - steady(p) for p in points), default=0)
    return f"steady: {', '.join(parts)}" + (
        f" (+{first} the first request a container sends into a reservation: its launch template)"
        if first
        else ""
    )


def met(points: Sequence[Point]) -> bool:
    """The steady request within the goal at every size, and flat: one count per kind."""
    flat = all(len({steady(p) for p in points if p.kind == kind}) <= 1 for kind in KINDS)
    return flat and all(steady(p) <= GOAL_CALLS for p in points)


def missed(points: Sequence[Point]) -> list[str]:
    """The report's line under *Why a goal was missed* (none when `met`): the steady calls of
    each kind, and what a group's launch reads (service/reservations.py)."""
    if met(points):
        return []
    return [
        f"- **Into a reservation in {GOAL_CALLS} AWS calls**: {summary(points)}. A launch reads "
        "the coverage and a page of the snapshots it names, the most room the sync saw first, "
        "in one BatchGetItem in steady state; into a group, EC2 chooses the member, and one it "
        "chose that the page did not reach is read after the launch (one more BatchGetItem), "
        "so the record names its type and dates: its container reads first, next time, the "
        "members its last launch into the group landed in (service/reservations.py)."
    ]


def render(result: Result) -> str:
    # Imported here, not above: `_measure_in` runs this file over a baseline's tree, which may
    # have no benchmarks/markdown.py.
    from benchmarks import markdown
    from benchmarks.offering_calls import by_operation

    columns = (
        "into",
        "usable reservations",
        "AWS calls, this revision",
        "before",
        "landed in a reservation",
        "by operation, this revision",
    )
    rows = [
        (
            mine.kind,
            f"{mine.usable:,}",
            mine.total,
            theirs.total,
            "yes" if mine.reserved else "no",
            by_operation(mine.calls),
        )
        for mine, theirs in zip(result.ours, result.baseline, strict=True)
    ]
    return "\n".join(markdown.table(columns, rows))


def section(result: Result) -> list[str]:
    """The report's section (docs/BENCHMARKS.md)."""
    from benchmarks import markdown

    return markdown.section(
        "AWS calls per warm request into a reservation, against the reservations it could use "
        "(issue 38)",
        "`benchmarks/reservation_calls.py` (`python -m benchmarks.reservation_calls` runs it "
        "alone): one pool of one type in one zone, `reserved` then `on-demand`, its NodeClass "
        "using N real reservations of that type and zone (a targeted ODCR selected by tag, an "
        "open one selected by tag, or a resource group it targets), the reservation sync run "
        "after each growth, a warm container, one request for one instance; every call of the "
        "service's shared clients, by operation. Baseline, in the same run: revision "
        f"`{result.baseline_label}` (extracted with `git archive`).",
        render(result).splitlines(),
        "What such a request makes beyond the on-demand one's calls (the previous section), "
        "and what each buys; the goal judges the steady request, without the launch template "
        "a first request into a reservation makes:",
        [f"- {call}: {buys}" for call, buys in BEYOND_ON_DEMAND],
    )


def main() -> int:
    if "--json" in sys.argv:
        print(json.dumps([asdict(p) for p in measure()]))
        return 0
    print(render(run()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
