"""The composition root's stores: every adapter of one container, built one way from its
Settings, client factory, clock and pause (service/wiring/__init__.py builds the use cases over
them). With the package's __init__, the only service modules that import adapters
(import-linter holds it)."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from capacity_launcher.adapters.aws import client, prime_clients
from capacity_launcher.adapters.capacity_reservations import CapacityReservations
from capacity_launcher.adapters.config_store import ConfigStore
from capacity_launcher.adapters.fleet import Fleet
from capacity_launcher.adapters.instance_records import InstanceRecords
from capacity_launcher.adapters.launch_records import LaunchRecords
from capacity_launcher.adapters.pool_leases import PoolLeaseStore
from capacity_launcher.adapters.pool_members import PoolMemberStore
from capacity_launcher.adapters.pool_readiness import PoolReadiness
from capacity_launcher.adapters.pool_usage_store import PoolUsageStore
from capacity_launcher.adapters.publisher import Publisher
from capacity_launcher.adapters.quota_reclaims import QuotaReclaims
from capacity_launcher.adapters.quota_usage_store import QuotaUsageStore
from capacity_launcher.adapters.reservation_snapshots import ReservationSnapshots
from capacity_launcher.adapters.unavailable_offerings import UnavailableOfferings
from capacity_launcher.domain.records.tags import Ownership
from capacity_launcher.service.reservations import ReservationProvider
from capacity_launcher.settings import Settings, retention_seconds
from capacity_launcher.startup import system_clock

if TYPE_CHECKING:  # each use case's modules are imported when it is built: a function's cold
    # start imports its own use case's, not the others'

    pass

# A boto3 client for a service name: `adapters.aws.client` in functions, a deployment's in the CLI.
Clients = Callable[[str], Any]
Clock = Callable[[], datetime]


class Stores:
    """The adapters of one container, on one clock (`Adapters` builds the use cases over them).

    `clock`: the time every store reads (AWS's in Lambda, the emulator's locally: a lease's
    expiry, a record's retention, an ICE entry's lifetime are stamped and judged on the same
    clock, so advancing the emulator's expires them); `pause`: how adapters wait out EC2's
    consistency and other workers' claims (a simulated clock's advance in the simulation). Each
    call builds afresh: a use case owns the adapters it is given.
    """

    def __init__(
        self,
        settings: Settings,
        clients: Clients = client,
        *,
        clock: Clock = system_clock,
        pause: Callable[[float], None] = time.sleep,
    ) -> None:
        self.settings = settings
        self.clients = clients
        self.clock = clock
        self.pause = pause

    @staticmethod
    def prime() -> int:
        """What a container's first invocation would build in its clients (each operation model
        the layer calls), built now: a SnapStart snapshot's priming (`startup.snapshot_hooks`)."""
        return prime_clients()

    def seconds(self) -> float:
        """`clock` in epoch seconds: what the stores stamp and compare expiries with."""
        return self.clock().timestamp()

    def ownership(self) -> Ownership:
        """Which of the service's resources in the account are this deployment's."""
        return Ownership(self.settings.stack_name, self.settings.claim_untagged_resources)

    # -- adapters ------------------------------------------------------------------------------

    def config_store(self, *, cached: bool = False, kept: bool = False) -> ConfigStore:
        """NodeClasses and NodePools; `cached`: the launcher trusts its copy for a few seconds;
        `kept`: the sync's parts list every pool again only when their generation moved."""
        seconds = self.settings.config_cache_seconds if cached else 0.0
        return ConfigStore(
            self.settings.state_table_name,
            self.clients("dynamodb"),
            cache_seconds=seconds,
            clock=self.clock,
            keep_pools=kept,
        )

    def launch_records(self) -> LaunchRecords:
        return LaunchRecords(
            self.settings.state_table_name,
            self.clients("dynamodb"),
            retention_seconds=retention_seconds(self.settings),
            clock=self.seconds,
        )

    def instance_records(self) -> InstanceRecords:
        return InstanceRecords(
            self.settings.state_table_name,
            self.clients("dynamodb"),
            retention_seconds=retention_seconds(self.settings),
            clock=self.seconds,
        )

    def pool_leases(self, config: ConfigStore | None = None) -> PoolLeaseStore:
        """Limit leases; a lease in a pool a CapacityQuota names is admitted by its quota (read
        through `config`, the container's cached store unless given); `limits.unready` gates
        each lease (adapters/pool_readiness.py)."""
        return PoolLeaseStore(
            self.settings.state_table_name,
            self.settings.limit_lease_seconds,
            self.clients("dynamodb"),
            clock=self.seconds,
            quotas=config or self.config_store(cached=True),
            unready_gate=self.pool_readiness(),
            record_puts=self.instance_records(),  # a settle writes its instances' records
            completion_updates=self.launch_records(),  # and marks its intents done
        )

    def pool_members(self, config: ConfigStore | None = None) -> PoolMemberStore:
        """Instances counted in their pool's usage; each also counts in the quota usage that
        governs its requester (read through `config`, the container's cached store unless
        given)."""
        return PoolMemberStore(
            self.settings.state_table_name,
            self.clients("dynamodb"),
            clock=self.seconds,
            quotas=config or self.config_store(cached=True),
        )

    def pool_usage(self) -> PoolUsageStore:
        """Each pool's usage as stored, and its recompute from its leases and members."""
        return PoolUsageStore(self.settings.state_table_name, self.clients("dynamodb"))

    def pool_readiness(self, *, marks: bool = True) -> PoolReadiness:
        """Which of a pool's instances are ready (limits.unready): the lease's gate, the sync's
        marks. `marks=False`: counting only, as the operators' views do: no EC2 client."""
        ec2 = self.clients("ec2") if marks else None
        return PoolReadiness(self.settings.state_table_name, self.clients("dynamodb"), ec2)

    def quota_usage(self) -> QuotaUsageStore:
        """Quota usage per cohort and flavor, as the sync and reclaims read and recount it."""
        return QuotaUsageStore(self.settings.state_table_name, self.clients("dynamodb"))

    def quota_reclaims(self) -> QuotaReclaims:
        """Open reclaims, one per lender quota and NodePool."""
        return QuotaReclaims(self.settings.state_table_name, self.clients("dynamodb"))

    def unavailable_offerings(self, *, local_copy: bool = False) -> UnavailableOfferings:
        """The shared ICE cache; `local_copy`: the launcher trusts its copy for a few seconds."""
        settings = self.settings
        return UnavailableOfferings(
            settings.unavailable_offerings_table_name,
            settings.ice_ttl_seconds,
            local_copy_seconds=settings.ice_local_copy_seconds if local_copy else 0.0,
            dynamodb=self.clients("dynamodb"),
            claim_seconds=settings.ice_claim_seconds,
            clock=self.seconds,
        )

    def reservation_snapshots(self) -> ReservationSnapshots:
        """The shared reservation snapshots (the sync writes them, instance events free slots)."""
        return ReservationSnapshots(self.settings.state_table_name, self.clients("dynamodb"))

    def reservations(self) -> ReservationProvider:
        """The launcher's `reservations` port: the shared snapshots, EC2 when the sync lacks
        them."""
        return ReservationProvider(
            self.reservation_snapshots(),
            CapacityReservations(clients=self.clients),
            # The same clock the sync stamps snapshots with, so "stale" means the same to both.
            clock=self.seconds,
        )

    def publisher(self) -> Publisher:
        return Publisher(self.settings.event_bus_name, self.clients("events"))

    def fleet(self) -> Fleet:
        return Fleet(self.clients("ec2"), self.pause)
