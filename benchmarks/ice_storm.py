"""ICE storm: 100 requests over 20 workers, half of the on-demand offerings dry and two small
reservations that run out midway. Three contenders, each on an identical fresh cloud:
the launcher (shared DynamoDB ICE cache), a per-process cache (Karpenter's model), and a naive
boto3 loop that tries offerings in order until one works."""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.exceptions import ClientError

import moto_capacity
from benchmarks.call_counts import (
    LaunchCalls,
    TableTrips,
    is_insufficient_capacity,
    watch_create_fleet,
    watch_dynamodb,
)
from benchmarks.per_process_cache import per_process_launch_batch
from benchmarks.scene import REGION, TYPES, ZONES, apply_pool, bench_cloud, request
from capacity_launcher.adapters import aws
from capacity_launcher.adapters.aws import error_code
from capacity_launcher.service import wiring
from capacity_launcher.settings import get_settings
from tests.support.cloud import Cloud, an_image

# 100, not 200: in-process moto serialises every call, and the storm must leave `make bench`
# within its 15 minutes (the state table, copied by every transaction, grows with each request).
REQUESTS = 100
WORKERS = 20
RESERVED_EACH = 20  # two reservations of 20: both are full after ~40 of the 100 requests
TTL_SECONDS = 180
TAG = {"bench": "storm"}
# Half of the eight on-demand offerings: every type is dry in exactly one zone.
DRY = [(t, ZONES[i % 2]) for i, t in enumerate(TYPES)]


@dataclass(frozen=True)
class StormResult:
    contender: str
    seconds: float
    calls: int
    failed_calls: int
    launched: int
    refusals_by_offering: dict[str, int]
    dynamodb_trips: int
    ice_table_trips: int

    @property
    def calls_per_instance(self) -> float:
        return self.calls / max(self.launched, 1)

    @property
    def ttl_windows(self) -> int:
        return max(1, math.ceil(self.seconds / TTL_SECONDS))

    @property
    def worst_refusals_per_offering_window(self) -> float:
        worst = max(self.refusals_by_offering.values(), default=0)
        return worst / self.ttl_windows

    @property
    def refusals(self) -> int:
        return sum(self.refusals_by_offering.values())


def _stage(cloud: Cloud) -> tuple[list[str], dict[str, str]]:
    """The pool, the two reservations, the dry offerings; returns reservation ids and subnets."""
    tags = [{"ResourceType": "capacity-reservation", "Tags": [{"Key": "bench", "Value": "storm"}]}]
    reservations = [
        cloud.ec2.create_capacity_reservation(
            InstanceType="m5.large",
            InstancePlatform="Linux/UNIX",
            AvailabilityZone=zone,
            InstanceCount=RESERVED_EACH,
            InstanceMatchCriteria="targeted",
            TagSpecifications=tags,
        )["CapacityReservation"]["CapacityReservationId"]
        for zone in ZONES
    ]
    subnets = apply_pool(cloud, capacity_types=("reserved", "on-demand"), selector_tags=TAG)
    # As in production, the minute's reservation sync has run: workers share its snapshots.
    wiring.Adapters(get_settings()).reservation_sync().run()
    moto_capacity.reset()  # count from here on
    for itype, zone in DRY:
        moto_capacity.set_capacity(REGION, itype, zone, "on-demand", 0)
    return reservations, subnets


def _dynamodb_calls() -> int:
    operations: dict[str, dict[str, int]] = moto_capacity.state()["operations"]  # type: ignore[assignment]
    return sum(v["calls"] for k, v in operations.items() if k.startswith("dynamodb:"))


def _storm(work: Callable[[int, int], None]) -> float:
    """Each of WORKERS threads serves its share of REQUESTS, one request at a time."""
    per_worker = REQUESTS // WORKERS
    started = time.perf_counter()

    def worker(w: int) -> None:
        for i in range(per_worker):
            work(w, w * per_worker + i)

    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        list(pool.map(worker, range(WORKERS)))
    return time.perf_counter() - started


def _templates_to_reservations(cloud: Cloud) -> dict[str, str]:
    found = {}
    for template in cloud.ec2.describe_launch_templates()["LaunchTemplates"]:
        versions = cloud.ec2.describe_launch_template_versions(
            LaunchTemplateId=template["LaunchTemplateId"]
        )["LaunchTemplateVersions"]
        spec = versions[0]["LaunchTemplateData"].get("CapacityReservationSpecification", {})
        target = spec.get("CapacityReservationTarget", {}).get("CapacityReservationId")
        if target:
            found[template["LaunchTemplateName"]] = target
    return found


def _by_reservation(refusals: Counter[str], reservation_of: dict[str, str]) -> Counter[str]:
    resolved: Counter[str] = Counter()
    for key, count in refusals.items():
        if key.startswith("template:"):
            template = key.removeprefix("template:")
            key = f"reserved:{reservation_of.get(template, template)}"
        resolved[key] += count
    return resolved


def _launcher_storm(name: str, make_batch: Callable[[Cloud], Any]) -> StormResult:
    with bench_cloud(ICE_TTL_SECONDS=str(TTL_SECONDS)) as cloud:
        _stage(cloud)
        calls = LaunchCalls()
        watch_create_fleet(aws.client("ec2"), calls)
        trips: TableTrips = watch_dynamodb(aws.client("dynamodb"))
        workers = [make_batch(cloud) for _ in range(WORKERS)]

        def work(worker: int, n: int) -> None:
            cloud.send(request(f"{name}-{n}"), batch=workers[worker])

        seconds = _storm(work)
        # Template names are hashes: refusals are keyed by template until resolved here.
        calls.refusals = _by_reservation(calls.refusals, _templates_to_reservations(cloud))
        return StormResult(
            name,
            seconds,
            calls.calls,
            calls.failed_calls,
            calls.launched,
            dict(calls.refusals),
            _dynamodb_calls(),
            trips.by_table[cloud.names.unavailable_offerings_table],
        )


def launcher() -> StormResult:
    return _launcher_storm("launcher", lambda cloud: cloud.fresh_batch())


def per_process_cache() -> StormResult:
    return _launcher_storm("per-process", lambda cloud: per_process_launch_batch(TTL_SECONDS))


def naive() -> StormResult:
    """A hand-written loop: reservations, then on-demand offerings, RunInstances until one works."""
    with bench_cloud() as cloud:
        reservations, subnets = _stage(cloud)
        image = an_image(cloud.ec2)
        calls = LaunchCalls()
        clients = [boto3.client("ec2", region_name=REGION) for _ in range(WORKERS)]
        offerings: list[tuple[str, dict[str, Any]]] = [
            (
                f"reserved:{r}",
                {
                    "InstanceType": "m5.large",
                    "SubnetId": subnets[zone],
                    "CapacityReservationSpecification": {
                        "CapacityReservationTarget": {"CapacityReservationId": r}
                    },
                },
            )
            for r, zone in zip(reservations, ZONES, strict=True)
        ]
        offerings += [
            (f"on-demand:{t}:{z}", {"InstanceType": t, "SubnetId": subnets[z]})
            for t in TYPES
            for z in ZONES
        ]

        def work(worker: int, n: int) -> None:
            for key, where in offerings:
                try:
                    clients[worker].run_instances(ImageId=image, MinCount=1, MaxCount=1, **where)
                except ClientError as error:
                    ice = is_insufficient_capacity(error_code(error))
                    calls.note(0, [key] if ice else [], failed=True)
                    continue
                calls.note(1, [], failed=False)
                return

        seconds = _storm(work)
        return StormResult(
            "naive",
            seconds,
            calls.calls,
            calls.failed_calls,
            calls.launched,
            dict(calls.refusals),
            _dynamodb_calls(),
            0,
        )


def run() -> list[StormResult]:
    return [launcher(), per_process_cache(), naive()]
