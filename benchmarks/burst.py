"""Burst: every offering dry, 20 workers that start in the same instant (a barrier), each its own
container. How many failed EC2 calls does each dry offering take within one ICE TTL window?

Two phases on the same cloud: the pool runs dry while nothing says so (the first discovery),
then, the offerings still dry, the ICE entries expire and the same workers burst again (the
re-probe, where single flight's claims buy something: issue 38).

Contenders, each on an identical fresh cloud, at each EC2 latency: the launcher (shared cache
with single flight), the same shared cache without single flight (the launcher before it), a
per-process cache (Karpenter's model) and a naive loop (RunInstances per offering, no cache)."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.exceptions import ClientError

import moto_capacity
from benchmarks.call_counts import LaunchCalls, is_insufficient_capacity, watch_create_fleet
from benchmarks.per_process_cache import per_process_launch_batch
from benchmarks.scene import REGION, TYPES, ZONES, apply_pool, bench_cloud, request
from capacity_launcher.adapters import aws
from capacity_launcher.adapters.aws import error_code
from capacity_launcher.adapters.unavailable_offerings import UnavailableOfferings
from capacity_launcher.domain.capacity.offerings import Turn
from capacity_launcher.service import wiring
from capacity_launcher.service.launch import LaunchBatch
from capacity_launcher.settings import get_settings
from tests.support.cloud import Cloud, an_image

WORKERS = 20
REQUESTS_PER_WORKER = 2
# Warm containers forget what they saw while warming (their 5 s copy of the cache) before the burst.
FORGET_SECONDS = 5.5
TTL_SECONDS = 180
LATENCIES = (0.0, 0.25)
DRY = [(t, z) for t in TYPES for z in ZONES]
LAUNCHER = "launcher (single flight)"
SHARED = "shared cache, no single flight"
PER_PROCESS = "per-process cache"
NAIVE = "naive loop"
CONTENDERS = (LAUNCHER, SHARED, PER_PROCESS, NAIVE)
FIRST = "first discovery"
EXPIRY = "at the entries' expiry"


@dataclass(frozen=True)
class BurstResult:
    contender: str
    latency: float
    seconds: float
    requests: int
    calls: int
    failed_calls: int
    refusals_by_offering: dict[str, int]
    # DynamoDB calls on the ICE table, by operation (single flight's own cost shows here).
    ice_table_calls: dict[str, int]
    phase: str = FIRST

    @property
    def worst_per_offering(self) -> int:
        """Failed calls of the worst dry offering; the run is shorter than one TTL window."""
        return max(self.refusals_by_offering.values(), default=0)

    @property
    def ice_calls_per_request(self) -> float:
        return sum(self.ice_table_calls.values()) / max(self.requests, 1)


class _NoSingleFlight(UnavailableOfferings):
    """The shared cache as it was before single flight: every worker asks EC2 itself."""

    def take_turn(self, keys: Sequence[str], token: str | None = None) -> Turn:
        return Turn(token or "", free=frozenset(keys))

    def end_turn(self, turn: Turn, launched: Iterable[str] = (), dry: Iterable[str] = ()) -> None:
        return None


def _adapters(cloud: Cloud) -> wiring.Adapters:
    """A container's composition on the emulator's clock (so the entries' expiry can be
    reached by moving it), waiting in real time as Lambda does."""
    return wiring.Adapters(get_settings(), aws.client, clock=cloud.host.clock, pause=time.sleep)


def _shared_without_single_flight(cloud: Cloud) -> LaunchBatch:
    settings = get_settings()
    adapters = _adapters(cloud)
    ports = adapters.launch_ports()
    cache = _NoSingleFlight(
        settings.unavailable_offerings_table_name,
        settings.ice_ttl_seconds,
        local_copy_seconds=settings.ice_local_copy_seconds,
        dynamodb=aws.client("dynamodb"),
        clock=adapters.seconds,
    )
    return adapters.launch_batch(
        adapters.idempotency_config(), dataclasses.replace(ports, unavailable=cache)
    )


def _fresh_launch_batch(cloud: Cloud) -> LaunchBatch:
    adapters = _adapters(cloud)
    return adapters.launch_batch(adapters.idempotency_config())


def _watch_ice_table(table: str) -> Counter[str]:
    calls: Counter[str] = Counter()
    lock = threading.Lock()

    def count(params: dict[str, Any], model: Any, **_: Any) -> None:
        tables = {params.get("TableName"), *params.get("RequestItems", {})}
        for item in params.get("TransactItems", []):
            tables |= {op.get("TableName") for op in item.values() if isinstance(op, dict)}
        if table in tables:
            with lock:
                calls[model.name] += 1

    aws.client("dynamodb").meta.events.register(
        "provide-client-params.dynamodb.*", lambda params, model, **kw: count(params, model)
    )
    return calls


def _together(work: Callable[[int, int], None]) -> float:
    """WORKERS threads wait at one barrier, then each serves its requests one at a time."""
    barrier = threading.Barrier(WORKERS)
    started: list[float] = []

    def worker(w: int) -> None:
        if barrier.wait() == 0:
            started.append(time.perf_counter())
        for i in range(REQUESTS_PER_WORKER):
            work(w, w * REQUESTS_PER_WORKER + i)

    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        list(pool.map(worker, range(WORKERS)))
    return time.perf_counter() - started[0]


def _dry_everything(latency: float) -> None:
    moto_capacity.reset()
    for itype, zone in DRY:
        moto_capacity.set_capacity(REGION, itype, zone, "on-demand", 0)
    for operation in ("ec2:CreateFleet", "ec2:RunInstances"):
        moto_capacity.set_latency(operation, latency)


def _launcher_burst(contender: str, latency: float) -> list[BurstResult]:
    """The first discovery, then (the launcher and the shared cache without single flight: a
    per-process cache keeps its own time) the burst again once the entries expired."""
    make: dict[str, Callable[[Cloud], LaunchBatch]] = {
        LAUNCHER: _fresh_launch_batch,
        SHARED: _shared_without_single_flight,
        PER_PROCESS: lambda _: per_process_launch_batch(TTL_SECONDS),
    }
    with bench_cloud(ICE_TTL_SECONDS=str(TTL_SECONDS)) as cloud:
        apply_pool(cloud)
        workers = [make[contender](cloud) for _ in range(WORKERS)]
        # Warm containers (catalog, subnets, pools cached), as in a burst on a busy service.
        with ThreadPoolExecutor(max_workers=WORKERS) as pool:
            list(
                pool.map(
                    lambda w: cloud.send(request(f"warm-{w}"), batch=workers[w]), range(WORKERS)
                )
            )
        time.sleep(FORGET_SECONDS)
        _dry_everything(latency)
        calls = LaunchCalls()
        watch_create_fleet(aws.client("ec2"), calls)
        ice_calls = _watch_ice_table(cloud.names.unavailable_offerings_table)
        slug = contender.split()[0]
        phase = [FIRST]

        def work(worker: int, n: int) -> None:
            again = "-again" if phase[0] == EXPIRY else ""
            cloud.send(request(f"{slug}{again}-{n}"), batch=workers[worker])

        def result(seconds: float) -> BurstResult:
            return BurstResult(
                contender,
                latency,
                seconds,
                WORKERS * REQUESTS_PER_WORKER,
                calls.calls,
                calls.failed_calls,
                dict(calls.refusals),
                dict(ice_calls),
                phase[0],
            )

        results = [result(_together(work))]
        if contender == PER_PROCESS:
            return results
        # Every entry expires (still dry); the workers' copies are read again at once.
        moto_capacity.advance_clock(TTL_SECONDS + 1)
        calls.calls = calls.failed_calls = calls.launched = 0
        calls.refusals.clear()
        ice_calls.clear()
        phase[0] = EXPIRY
        results.append(result(_together(work)))
        return results


def _naive_burst(latency: float) -> BurstResult:
    with bench_cloud() as cloud:
        subnets = apply_pool(cloud)
        image = an_image(cloud.ec2)
        clients = [boto3.client("ec2", region_name=REGION) for _ in range(WORKERS)]
        _dry_everything(latency)
        calls = LaunchCalls()
        offerings = [(f"on-demand:{t}:{z}", t, subnets[z]) for t, z in DRY]

        def work(worker: int, _n: int) -> None:
            for key, itype, subnet in offerings:
                try:
                    clients[worker].run_instances(
                        ImageId=image,
                        MinCount=1,
                        MaxCount=1,
                        InstanceType=itype,  # type: ignore[arg-type]
                        SubnetId=subnet,
                    )
                except ClientError as error:
                    ice = is_insufficient_capacity(error_code(error))
                    calls.note(0, [key] if ice else [], failed=True)
                    continue
                calls.note(1, [], failed=False)
                return

        seconds = _together(work)
        return BurstResult(
            NAIVE,
            latency,
            seconds,
            WORKERS * REQUESTS_PER_WORKER,
            calls.calls,
            calls.failed_calls,
            dict(calls.refusals),
            {},
        )


# Single flight's own cost where nothing is dry: requests per contender, in warm containers.
HEALTHY_REQUESTS = 12
HEALTHY_WORKERS = 4


@dataclass(frozen=True)
class HealthyCost:
    """DynamoDB calls per request in a healthy pool: every table, and the ICE table by operation."""

    contender: str
    requests: int
    launched: int
    dynamodb_calls: int
    ice_table_calls: dict[str, int]

    @property
    def calls_per_request(self) -> float:
        return self.dynamodb_calls / max(self.requests, 1)

    @property
    def ice_calls_per_request(self) -> float:
        return sum(self.ice_table_calls.values()) / max(self.requests, 1)


def _healthy(contender: str) -> HealthyCost:
    """HEALTHY_REQUESTS over HEALTHY_WORKERS warm containers, every offering healthy."""
    make: dict[str, Callable[[Cloud], LaunchBatch]] = {
        LAUNCHER: _fresh_launch_batch,
        SHARED: _shared_without_single_flight,
    }
    with bench_cloud(ICE_TTL_SECONDS=str(TTL_SECONDS)) as cloud:
        apply_pool(cloud)
        workers = [make[contender](cloud) for _ in range(HEALTHY_WORKERS)]
        for w, batch in enumerate(workers):
            cloud.send(request(f"warm-{w}"), batch=batch)
        all_calls: Counter[str] = Counter()
        lock = threading.Lock()

        def count(**_: Any) -> None:
            with lock:
                all_calls["dynamodb"] += 1

        aws.client("dynamodb").meta.events.register("provide-client-params.dynamodb.*", count)
        ice_calls = _watch_ice_table(cloud.names.unavailable_offerings_table)
        calls = LaunchCalls()
        watch_create_fleet(aws.client("ec2"), calls)
        slug = contender.split()[0]
        per_worker = HEALTHY_REQUESTS // HEALTHY_WORKERS

        def worker(w: int) -> None:
            for i in range(per_worker):
                cloud.send(request(f"{slug}-ok-{w}-{i}"), batch=workers[w])

        with ThreadPoolExecutor(max_workers=HEALTHY_WORKERS) as pool:
            list(pool.map(worker, range(HEALTHY_WORKERS)))
        return HealthyCost(
            contender,
            per_worker * HEALTHY_WORKERS,
            calls.launched,
            all_calls["dynamodb"],
            dict(ice_calls),
        )


def healthy() -> list[HealthyCost]:
    """Single flight's own DynamoDB cost where no offering is dry: with it, and without it."""
    return [_healthy(LAUNCHER), _healthy(SHARED)]


def run() -> list[BurstResult]:
    results = []
    for latency in LATENCIES:
        for contender in CONTENDERS:
            if contender == NAIVE:
                results.append(_naive_burst(latency))
            else:
                results += _launcher_burst(contender, latency)
    return results
