"""The one composition root: every adapter and use case is built here, one way, from Settings.

Handlers take the container's use cases (`launch_batch`, `reservation_sync`, `instance_events`,
each built once); the CLI, benchmarks and tests call the factories with their own Settings and
client factory (`clients(service) -> boto3 client`; by default the container's shared clients).
This is the only service module that imports adapters (import-linter holds it: `make lint`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import TYPE_CHECKING, Any

from capacity_launcher.adapters.aws import client
from capacity_launcher.adapters.capacity_reservations import CapacityReservations
from capacity_launcher.adapters.config_store import ConfigStore
from capacity_launcher.adapters.fleet import Fleet
from capacity_launcher.adapters.instance_records import InstanceRecords
from capacity_launcher.adapters.instance_types import InstanceTypeCatalog
from capacity_launcher.adapters.launch_records import LaunchRecords
from capacity_launcher.adapters.pool_limits import PoolLimitsStore
from capacity_launcher.adapters.publisher import Publisher
from capacity_launcher.adapters.quota_reclaims import QuotaReclaims
from capacity_launcher.adapters.reservation_snapshots import ReservationSnapshots
from capacity_launcher.adapters.unavailable_offerings import UnavailableOfferings
from capacity_launcher.domain.reservations import Thresholds
from capacity_launcher.service.ports import LaunchPorts
from capacity_launcher.service.quota_reclaim import ReclaimRequests
from capacity_launcher.service.reservations import ReservationProvider
from capacity_launcher.service.wait_backstop import WaitBackstop
from capacity_launcher.settings import Settings, get_settings, retention_seconds

if TYPE_CHECKING:  # each use case's modules are imported when it is built: a function's cold
    # start imports its own use case's, not the others'
    from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig

    from capacity_launcher.service.instance_events import InstanceEvents
    from capacity_launcher.service.launch import LaunchBatch
    from capacity_launcher.service.quota_sync import QuotaSync
    from capacity_launcher.service.reconciliation import Reconciliation
    from capacity_launcher.service.reservation_sync import ReservationSync

# A boto3 client for a service name: `adapters.aws.client` in functions, a deployment's in the CLI.
Clients = Callable[[str], Any]


def utcnow() -> datetime:
    return datetime.now(UTC)


# -- adapters ----------------------------------------------------------------------------------


def config_store(
    settings: Settings, clients: Clients = client, *, cached: bool = False
) -> ConfigStore:
    """NodeClasses and NodePools; `cached`: the launcher trusts its copy for a few seconds."""
    seconds = settings.config_cache_seconds if cached else 0.0
    return ConfigStore(settings.state_table_name, clients("dynamodb"), cache_seconds=seconds)


def launch_records(settings: Settings, clients: Clients = client) -> LaunchRecords:
    return LaunchRecords(
        settings.state_table_name,
        clients("dynamodb"),
        retention_seconds=retention_seconds(settings),
    )


def instance_records(settings: Settings, clients: Clients = client) -> InstanceRecords:
    return InstanceRecords(
        settings.state_table_name,
        clients("dynamodb"),
        retention_seconds=retention_seconds(settings),
    )


def pool_limits(
    settings: Settings, clients: Clients = client, config: ConfigStore | None = None
) -> PoolLimitsStore:
    """Pool usage and leases; a lease in a pool a CapacityQuota names is admitted by its quota
    (read through `config`, the container's cached store unless given)."""
    return PoolLimitsStore(
        settings.state_table_name,
        settings.limit_lease_seconds,
        clients("dynamodb"),
        quotas=config or config_store(settings, clients, cached=True),
    )


def quota_reclaims(settings: Settings, clients: Clients = client) -> QuotaReclaims:
    """Open reclaims, one per lender quota and NodePool."""
    return QuotaReclaims(settings.state_table_name, clients("dynamodb"))


def reclaim_requests(
    settings: Settings, clients: Clients = client, config: ConfigStore | None = None
) -> ReclaimRequests:
    """The launcher's side of reclaim: ask for lent quota back, publish the request."""
    config = config or config_store(settings, clients, cached=True)
    return ReclaimRequests(
        quotas=config.capacity_quotas,
        limits=pool_limits(settings, clients, config),
        items=instance_records(settings, clients),
        reclaims=quota_reclaims(settings, clients),
        publish=publisher(settings, clients).publish,
        now=utcnow,
    )


def unavailable_offerings(
    settings: Settings, clients: Clients = client, *, local_copy: bool = False
) -> UnavailableOfferings:
    """The shared ICE cache; `local_copy`: the launcher trusts its copy for a few seconds."""
    return UnavailableOfferings(
        settings.unavailable_offerings_table_name,
        settings.ice_ttl_seconds,
        local_copy_seconds=settings.ice_local_copy_seconds if local_copy else 0.0,
        dynamodb=clients("dynamodb"),
        claim_seconds=settings.ice_claim_seconds,
    )


def reservation_snapshots(settings: Settings, clients: Clients = client) -> ReservationSnapshots:
    """The shared reservation snapshots (the sync writes them, instance events free slots)."""
    return ReservationSnapshots(settings.state_table_name, clients("dynamodb"))


def reservations(settings: Settings, clients: Clients = client) -> ReservationProvider:
    """The launcher's `reservations` port: the shared snapshots, EC2 when the sync lacks them."""
    return ReservationProvider(
        reservation_snapshots(settings, clients),
        CapacityReservations(clients("ec2")),
        # The same clock the sync stamps snapshots with, so "stale" means the same to both.
        clock=lambda: utcnow().timestamp(),
    )


def publisher(settings: Settings, clients: Clients = client) -> Publisher:
    return Publisher(settings.event_bus_name, clients("events"))


# -- the launcher ------------------------------------------------------------------------------


def idempotency_config(settings: Settings) -> IdempotencyConfig:
    from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig

    return IdempotencyConfig(
        event_key_jmespath="requestId",
        expires_after_seconds=settings.idempotency_ttl_seconds,
    )


def launch_ports(settings: Settings, clients: Clients = client) -> LaunchPorts:
    # Only the launcher builds these: the sync's and instance events' cold starts skip them.
    from capacity_launcher.adapters.launch_templates import LaunchTemplates
    from capacity_launcher.adapters.subnets import Subnets

    ec2 = clients("ec2")
    # One copy of the configuration: when a lease finds the quotas changed and reads them again,
    # resolution and reclaim see what it decided with.
    config = config_store(settings, clients, cached=True)
    return LaunchPorts(
        config=config,
        records=launch_records(settings, clients),
        instances=instance_records(settings, clients),
        unavailable=unavailable_offerings(settings, clients, local_copy=True),
        limits=pool_limits(settings, clients, config),
        fleet=Fleet(ec2),
        templates=LaunchTemplates(ec2),
        catalog=InstanceTypeCatalog(ec2),
        subnets=Subnets(ec2),
        reservations=reservations(settings, clients),
        reclaims=reclaim_requests(settings, clients, config),
    )


@cache
def launch_batch(config: IdempotencyConfig) -> LaunchBatch:
    """The container's one launch batch processor."""
    return build_launch_batch(config)


def build_launch_batch(config: IdempotencyConfig, ports: LaunchPorts | None = None) -> LaunchBatch:
    """A launch batch processor; `ports` replaces the adapters (benchmarks swap the ICE cache)."""
    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

    from capacity_launcher.adapters.launch_queue import LaunchQueue
    from capacity_launcher.adapters.request_claims import RequestClaims
    from capacity_launcher.service.launch import LaunchBatch, Launcher
    from capacity_launcher.service.telemetry import LaunchTelemetry

    settings = get_settings()
    ports = ports or launch_ports(settings)
    persistence = DynamoDBPersistenceLayer(
        table_name=settings.idempotency_table_name, boto3_client=client("dynamodb")
    )
    persistence.configure(config, function_name="launch")
    return LaunchBatch(
        Launcher(ports, max_attempts=settings.max_launch_attempts, clock=utcnow),
        publisher(settings).publish,
        ports.records,
        RequestClaims(persistence),
        LaunchTelemetry(),
        queue=LaunchQueue(),
        clock=utcnow,
    )


# -- the lifecycle: reservation sync (with reconciliation) and instance events ------------------


def reconciliation(settings: Settings, clients: Clients = client) -> Reconciliation:
    # The lifecycle's modules are imported when it is built: the launcher's cold start skips them.
    from capacity_launcher.service.reconciliation import Reconciliation

    ec2 = clients("ec2")
    return Reconciliation(
        limits=pool_limits(settings, clients),
        instances=Fleet(ec2),
        items=instance_records(settings, clients),
        facts=InstanceTypeCatalog(ec2),
        pools=config_store(settings, clients),
        now=utcnow,
    )


def build_reservation_sync(settings: Settings, clients: Clients = client) -> ReservationSync:
    from capacity_launcher.adapters.launch_templates import TemplateInventory
    from capacity_launcher.service.reservation_sync import ReservationSync
    from capacity_launcher.service.template_sweep import TemplateSweep

    return ReservationSync(
        config=config_store(settings, clients),
        ec2=CapacityReservations(clients("ec2")),
        snapshots=reservation_snapshots(settings, clients),
        unavailable=unavailable_offerings(settings, clients),
        publish=publisher(settings, clients).publish,
        thresholds=Thresholds(
            utilization_high=settings.utilization_high_threshold,
            expiring_horizon=timedelta(hours=settings.expiring_horizon_hours),
            block_expiring_horizon=timedelta(minutes=settings.block_expiring_minutes),
        ),
        now=utcnow,
        reconciliation=reconciliation(settings, clients),
        quotas=quota_sync(settings, clients),
        waits=WaitBackstop(
            launch_records(settings, clients), publisher(settings, clients).publish, utcnow
        ),
        templates=TemplateSweep(TemplateInventory(clients("ec2")), utcnow),
    )


def quota_sync(settings: Settings, clients: Clients = client) -> QuotaSync:
    """The sync's quota share: reclaims due, quota usage recount, the status `get quotas` reads.
    A reclaimed instance is released through the instance events' own gated path."""
    from capacity_launcher.adapters.quota_statuses import QuotaStatuses
    from capacity_launcher.service.quota_reclaim import ReclaimEnforcement
    from capacity_launcher.service.quota_sync import QuotaSync

    config = config_store(settings, clients)
    limits = pool_limits(settings, clients)
    return QuotaSync(
        quotas=config.capacity_quotas,
        pools=lambda: [p.metadata.name for p in config.node_pools()],
        limits=limits,
        statuses=QuotaStatuses(settings.state_table_name, clients("dynamodb")),
        enforcement=ReclaimEnforcement(
            # Read when a reclaim is enforced, strongly consistent: the policy of that moment.
            quotas=lambda: config.capacity_quotas(fresh=True),
            limits=limits,
            reclaims=quota_reclaims(settings, clients),
            fleet=Fleet(clients("ec2")),
            release=build_instance_events(settings, clients).state_changed,
            publish=publisher(settings, clients).publish,
            now=utcnow,
        ),
        now=utcnow,
    )


def build_instance_events(settings: Settings, clients: Clients = client) -> InstanceEvents:
    from capacity_launcher.service.instance_events import InstanceEvents

    return InstanceEvents(
        items=instance_records(settings, clients),
        limits=pool_limits(settings, clients),
        reservations=reservation_snapshots(settings, clients),
        unavailable=unavailable_offerings(settings, clients),
        publish=publisher(settings, clients).publish,
        now=utcnow,
        pools=config_store(settings, clients),
    )


@cache
def reservation_sync() -> ReservationSync:
    """The container's reservation sync."""
    return build_reservation_sync(get_settings())


@cache
def instance_events() -> InstanceEvents:
    """The container's instance-events use case."""
    return build_instance_events(get_settings())
