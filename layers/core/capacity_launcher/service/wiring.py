"""The composition root: adapters built from Settings, once per container, for the handlers."""

from __future__ import annotations

from functools import cache

from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer, IdempotencyConfig

from capacity_launcher.adapters.aws import client
from capacity_launcher.adapters.capacity_reservations import CapacityReservations
from capacity_launcher.adapters.config_store import ConfigStore
from capacity_launcher.adapters.fleet import Fleet
from capacity_launcher.adapters.instance_types import InstanceTypeCatalog
from capacity_launcher.adapters.launch_queue import LaunchQueue
from capacity_launcher.adapters.launch_records import LaunchRecords
from capacity_launcher.adapters.launch_templates import LaunchTemplates
from capacity_launcher.adapters.pool_limits import PoolLimitsStore
from capacity_launcher.adapters.publisher import Publisher
from capacity_launcher.adapters.reservation_snapshots import ReservationSnapshots
from capacity_launcher.adapters.subnets import Subnets
from capacity_launcher.adapters.unavailable_offerings import UnavailableOfferings
from capacity_launcher.service.launch_batch import LaunchBatch
from capacity_launcher.service.launcher import Launcher
from capacity_launcher.service.ports import LaunchPorts
from capacity_launcher.service.telemetry import LaunchTelemetry
from capacity_launcher.settings import Settings, get_settings, retention_seconds


def idempotency_config(settings: Settings) -> IdempotencyConfig:
    return IdempotencyConfig(
        event_key_jmespath="requestId",
        expires_after_seconds=settings.idempotency_ttl_seconds,
    )


def launch_ports(settings: Settings) -> LaunchPorts:
    dynamodb = client("dynamodb")
    ec2 = client("ec2")
    return LaunchPorts(
        config=ConfigStore(
            settings.state_table_name, dynamodb, cache_seconds=settings.config_cache_seconds
        ),
        records=LaunchRecords(
            settings.state_table_name, dynamodb, retention_seconds=retention_seconds(settings)
        ),
        unavailable=UnavailableOfferings(
            settings.unavailable_offerings_table_name,
            settings.ice_ttl_seconds,
            local_copy_seconds=settings.ice_local_copy_seconds,
            dynamodb=dynamodb,
            claim_seconds=settings.ice_claim_seconds,
        ),
        limits=PoolLimitsStore(settings.state_table_name, settings.limit_lease_seconds, dynamodb),
        fleet=Fleet(ec2),
        templates=LaunchTemplates(ec2),
        catalog=InstanceTypeCatalog(ec2),
        subnets=Subnets(ec2),
        reservations=ReservationSnapshots(
            settings.state_table_name, dynamodb, CapacityReservations(ec2)
        ),
    )


@cache
def launch_batch(config: IdempotencyConfig) -> LaunchBatch:
    """The container's one launch batch processor."""
    return build_launch_batch(config)


def build_launch_batch(config: IdempotencyConfig, ports: LaunchPorts | None = None) -> LaunchBatch:
    """A launch batch processor; `ports` replaces the adapters (benchmarks swap the ICE cache)."""
    settings = get_settings()
    ports = ports or launch_ports(settings)
    persistence = DynamoDBPersistenceLayer(
        table_name=settings.idempotency_table_name, boto3_client=client("dynamodb")
    )
    persistence.configure(config, function_name="launch")
    return LaunchBatch(
        Launcher(ports, max_attempts=settings.max_launch_attempts),
        Publisher(settings.event_bus_name).publish,
        ports.records,  # type: ignore[arg-type]
        persistence,
        LaunchTelemetry(),
        queue=LaunchQueue(),
    )
