"""Composition of the reservation sync and the instance-events use cases, once per container."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import cache

from capacity_launcher.adapters.aws import client
from capacity_launcher.adapters.capacity_reservations import CapacityReservations
from capacity_launcher.adapters.config_store import ConfigStore
from capacity_launcher.adapters.fleet import Fleet
from capacity_launcher.adapters.instance_records import InstanceRecords
from capacity_launcher.adapters.instance_types import InstanceTypeCatalog
from capacity_launcher.adapters.pool_limits import PoolLimitsStore
from capacity_launcher.adapters.publisher import Publisher
from capacity_launcher.adapters.reservation_snapshots import ReservationSnapshots
from capacity_launcher.adapters.unavailable_offerings import UnavailableOfferings
from capacity_launcher.service.instance_events import InstanceEvents
from capacity_launcher.service.reconciliation import Reconciliation
from capacity_launcher.service.reservation_sync import ReservationSync, Thresholds
from capacity_launcher.settings import Settings, get_settings, retention_seconds


def utcnow() -> datetime:
    return datetime.now(UTC)


def reservation_snapshots(settings: Settings) -> ReservationSnapshots:
    """The launcher's `reservations` port: shared snapshots, EC2 when the sync lacks them."""
    return ReservationSnapshots(
        settings.state_table_name, client("dynamodb"), CapacityReservations(client("ec2"))
    )


def _unavailable(settings: Settings) -> UnavailableOfferings:
    return UnavailableOfferings(
        settings.unavailable_offerings_table_name,
        settings.ice_ttl_seconds,
        dynamodb=client("dynamodb"),
    )


def build_reservation_sync(settings: Settings) -> ReservationSync:
    dynamodb = client("dynamodb")
    ec2 = client("ec2")
    config = ConfigStore(settings.state_table_name, dynamodb)
    reconciliation = Reconciliation(
        limits=PoolLimitsStore(settings.state_table_name, settings.limit_lease_seconds, dynamodb),
        instances=Fleet(ec2),
        items=InstanceRecords(
            settings.state_table_name, dynamodb, retention_seconds=retention_seconds(settings)
        ),
        facts=InstanceTypeCatalog(ec2),
        pools=config,
        now=utcnow,
    )
    return ReservationSync(
        config=config,
        ec2=CapacityReservations(ec2),
        snapshots=reservation_snapshots(settings),
        unavailable=_unavailable(settings),
        publish=Publisher(settings.event_bus_name).publish,
        thresholds=Thresholds(
            utilization_high=settings.utilization_high_threshold,
            expiring_horizon=timedelta(hours=settings.expiring_horizon_hours),
        ),
        now=utcnow,
        reconciliation=reconciliation,
    )


def build_instance_events(settings: Settings) -> InstanceEvents:
    dynamodb = client("dynamodb")
    return InstanceEvents(
        items=InstanceRecords(
            settings.state_table_name, dynamodb, retention_seconds=retention_seconds(settings)
        ),
        limits=PoolLimitsStore(settings.state_table_name, settings.limit_lease_seconds, dynamodb),
        reservations=ReservationSnapshots(settings.state_table_name, dynamodb),
        unavailable=_unavailable(settings),
        publish=Publisher(settings.event_bus_name).publish,
        now=utcnow,
        pools=ConfigStore(settings.state_table_name, dynamodb),
    )


@cache
def reservation_sync() -> ReservationSync:
    return build_reservation_sync(get_settings())


@cache
def instance_events() -> InstanceEvents:
    return build_instance_events(get_settings())
