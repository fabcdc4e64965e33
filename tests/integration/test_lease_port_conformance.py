"""The lease port's fake (tests/fakes/leases.py) answers as the DynamoDB adapter does
(adapters/pool_leases.py on moto): the same cases against each, through the service's loop
(service/admission.py) and the port's writes directly, the same observations. The cases: a
quota's refusal, the limits' refusal, `limits.unready`'s refusal, a conflict on each named item
of a lease's transaction (and of a take-up's), and a decision on a stale copy of the limits
that succeeds once the loop has read again what moved."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import pytest

from capacity_launcher.adapters import aws
from capacity_launcher.adapters.config_store import ConfigStore
from capacity_launcher.adapters.pool_leases import PoolLeaseStore
from capacity_launcher.adapters.pool_readiness import PoolReadiness
from capacity_launcher.domain.accounting.lease_reads import (
    ConfigReads,
    LeaseConflict,
    LeaseItem,
    LeaseReads,
)
from capacity_launcher.domain.accounting.pool_usage import Lease, LeaseFit
from capacity_launcher.domain.accounting.quota_leases import LeaseAsk, governing, usage_items
from capacity_launcher.domain.apis.documents import Revisions
from capacity_launcher.domain.errors import CapacityLauncherError
from capacity_launcher.domain.quantities import PoolLimits, Resources
from capacity_launcher.service.accounting_ports import PoolLeases
from capacity_launcher.service.admission import take_lease
from capacity_launcher.service.lease_settlement import settle
from capacity_launcher.settings import get_settings
from capacity_launcher.startup import system_clock
from local_cloud.documents import capacity_quota
from tests.fakes.leases import FakeLeases
from tests.integration.test_launch_into_reservations import setup_pool
from tests.support.cloud import Cloud

POOL = "general"
ONE = Resources(cpu=2, memory_mib=8192, instances=1)
NOW = 1_900_000_000.0


@dataclass(frozen=True)
class _Stored:
    """What the table holds after the setup, as the launcher read it (the fake starts there)."""

    limits: PoolLimits | None
    seen: Revisions


class _Counted:
    """A lease port whose writes are counted (a retry is a second write)."""

    def __init__(self, leases: PoolLeases) -> None:
        self.inner, self.writes = leases, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def write(self, ask: LeaseAsk, lease_id: str, fit: LeaseFit, reads: LeaseReads) -> Lease:
        self.writes += 1
        return self.inner.write(ask, lease_id, fit, reads)


def _shown(lease: Lease | None) -> Any:
    if lease is None:
        return None
    return (lease.count, lease.amount, lease.expires_at, lease.quota_usage, lease.requester)


def _outcome(step: Callable[[], Any]) -> Any:
    """What a step answered: its value, or the error it raised (type and words)."""
    try:
        return step()
    except LeaseConflict as conflict:
        return ("conflict", sorted(conflict.moved))
    except CapacityLauncherError as error:
        return (type(error).__name__, str(error))


class _Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


def _scenario(leases: PoolLeases, stored: _Stored, clock: _Clock) -> list[Any]:
    def ask(count: int, least: int) -> LeaseAsk:
        return LeaseAsk(POOL, "team-a", ONE, count, least)

    def take(lease_id: str, count: int, least: int, limits: PoolLimits | None) -> Any:
        return _outcome(
            lambda: _shown(take_lease(leases, ask(count, least), lease_id, limits, stored.seen))
        )

    counted = _Counted(leases)
    seen: list[Any] = [
        take("full", 4, 4, stored.limits),  # the limits (3) hold fewer than 4
        take("over", 3, 3, stored.limits),  # the quota (2) refuses 3
    ]
    # A copy of the limits older than the stored ones: the write fails on the limits, the loop
    # reads them, and its second write holds
    copy = PoolLimits.model_validate({"instances": "5", "unready": 0})
    lease = take_lease(counted, ask(1, 1), "retry", copy, stored.seen)  # type: ignore[arg-type]
    seen += [_shown(lease), counted.writes]
    # limits.unready 0: the open lease is an unready instance
    seen.append(take("unready", 1, 1, stored.limits))

    # The port's write, on reads that hold but for one named item each
    quota = governing(leases.quota_set().quotas, "team-a", POOL)
    assert quota is not None
    items = usage_items(quota, POOL)
    readings = leases.quota_usage(items)
    versions = tuple((key, readings[key][0]) for key, _ in items)
    seen.append([v for _, v in versions])
    generation = leases.quota_generation(POOL)
    readiness = leases.readiness(POOL)
    assert readiness is not None
    right = LeaseReads(
        ConfigReads(stored.limits, stored.seen),
        generation,
        versions,
        unready_gated=True,
        usage_version=readiness[1],
    )
    seen.append(readiness[0])
    one = LeaseFit(1, ONE)
    wrong = {
        LeaseItem.POOL_USAGE: replace(right, usage_version=(readiness[1] or 0) + 7),
        LeaseItem.LIMITS: replace(right, config=ConfigReads(copy, stored.seen)),
        LeaseItem.NODE_CLASS: replace(
            right, config=ConfigReads(stored.limits, replace(stored.seen, node_class="other"))
        ),
        LeaseItem.POOLS_GENERATION: replace(
            right,
            config=ConfigReads(stored.limits, replace(stored.seen, pools_generation=99)),
        ),
        LeaseItem.QUOTA_GENERATION: replace(right, quota_generation=generation + 1),
        LeaseItem.QUOTA_USAGE: replace(right, quota_usage=((versions[0][0], 99),)),
    }
    for item, reads in wrong.items():
        seen.append((item, _outcome(lambda r=reads: leases.write(ask(1, 1), "moved", one, r))))
    seen.append(_outcome(lambda: leases.write(ask(1, 1), "retry", one, right)))  # the lease
    seen.append(_outcome(lambda: leases.write(ask(3, 1), "wide", LeaseFit(3, ONE), right)))
    assert leases.lease(POOL, "moved") is None

    # A take-up: extended while open, its configuration checked; OPEN_LEASE once it is gone
    held = leases.lease(POOL, "retry")
    assert held is not None
    config = ConfigReads(stored.limits, stored.seen)
    seen.append(_outcome(lambda: _shown(leases.extend(held, config))))
    seen.append(_outcome(lambda: leases.extend(held, ConfigReads(copy, stored.seen))))
    # At its expiry to the second it is still open: taken up, and not reclaimed
    clock.now = NOW + 900
    extended = leases.extend(held, config)
    seen.append(_shown(extended))
    clock.now = extended.expires_at
    seen.append(leases.reclaim(extended))
    clock.now = NOW
    seen += [leases.cancel(POOL, "retry"), leases.usage(POOL)]
    seen.append(_outcome(lambda: leases.extend(held, config)))
    seen.append([v for _, v in leases.quota_usage(items)[versions[0][0]][1].items()])
    return seen + _settling(leases, take_lease(leases, ask(1, 1), "kept", copy, stored.seen))


def _settling(leases: PoolLeases, lease: Lease | None) -> list[Any]:
    """A lease settled through the service's loop, twice; a write on a lease as read before it
    moved; a settle of a lease that is gone, with an instance left to count."""
    assert lease is not None
    members = {"i-kept": ONE}
    settle(leases, POOL, "kept", members)
    settle(leases, POOL, "kept", members)  # a redelivery's: already settled
    seen: list[Any] = [_shown(leases.lease(POOL, "kept")), sorted(leases.counted(POOL))]
    seen.append(leases.write_settlement(POOL, "kept", lease, {"i-late": ONE}, 1))
    seen.append(_outcome(lambda: settle(leases, POOL, "gone", {"i-gone": ONE})))
    seen.append(leases.usage(POOL))
    return seen


@pytest.fixture
def stored(cloud: Cloud, subnets: dict[str, str], image: str) -> _Stored:
    limits: dict[str, Any] = {"instances": "3", "unready": 0}
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits=limits)
    cloud.apply(capacity_quota("team-a", POOL, {"instances": "2"}))
    config = ConfigStore(get_settings().state_table_name, clock=system_clock)
    pool = config.node_pool(POOL)
    node_class = config.node_class(pool.spec.node_class_ref)
    return _Stored(pool.spec.limits, Revisions.of(pool, node_class, config.pool_set().generation))


def test_the_fake_lease_port_answers_as_the_table_does(stored: _Stored) -> None:
    table, db = get_settings().state_table_name, aws.client("dynamodb")
    config = ConfigStore(table, clock=system_clock)
    clocks = _Clock(), _Clock()
    adapter = PoolLeaseStore(
        table,
        900,
        db,
        clock=clocks[0],
        quotas=config,
        unready_gate=PoolReadiness(table, db),
    )
    pool, seen = config.node_pool(POOL), stored.seen
    fake = FakeLeases(
        {POOL: stored.limits},
        clocks[1],
        revisions={POOL: seen.pool},
        node_classes={pool.spec.node_class_ref: seen.node_class},
        pools_generation=seen.pools_generation or 0,
        quotas=config.quota_set(),
    )
    expected = _scenario(adapter, stored, clocks[0])
    assert _scenario(fake, stored, clocks[1]) == expected
    # and the cases answered what they are about
    assert expected[0] is None
    assert expected[1][0] == "QuotaExceeded"
    assert expected[2:4] == [(1, ONE, int(NOW) + 900, expected[2][3], "team-a"), 2]
    assert expected[4][0] == "UnreadyLimitReached"
    moved = dict(x for x in expected if isinstance(x, tuple) and isinstance(x[0], LeaseItem))
    assert moved == {item: ("conflict", [item]) for item in moved} and len(moved) == 6
    assert expected[13:15] == [
        ("conflict", [LeaseItem.LEASE]),
        ("conflict", [LeaseItem.POOL_USAGE]),
    ]
    assert expected[16] == ("conflict", [LeaseItem.LIMITS])
    assert expected[17:19] == [(1, ONE, int(NOW) + 1800, expected[2][3], "team-a"), False]
    assert expected[21] == ("conflict", [LeaseItem.OPEN_LEASE])
    # settled once, to its member; a write on the open lease as read refused; a gone lease
    assert expected[23][0] == 1 and expected[24] == ["i-kept"] and expected[25] is False
    assert expected[26][0] == "LeaseReclaimed" and expected[27] == ONE
