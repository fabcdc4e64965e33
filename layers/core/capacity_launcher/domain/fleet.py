"""What a fleet launch returns, in the domain's terms: instances, per-override errors, landings."""

from __future__ import annotations

from dataclasses import dataclass

from capacity_launcher.domain.errors import ErrorKind, classify
from capacity_launcher.domain.offerings import CapacityType


@dataclass(frozen=True)
class FleetError:
    """One CreateFleet error; `instance_type` and `zone` are None for fleet-wide errors."""

    code: str
    message: str
    instance_type: str | None
    zone: str | None
    subnet_id: str | None

    @property
    def kind(self) -> ErrorKind:
        return classify(self.code)


@dataclass(frozen=True)
class FleetResult:
    fleet_id: str | None
    instance_ids: tuple[str, ...]
    errors: tuple[FleetError, ...]


@dataclass(frozen=True)
class InstanceLanding:
    """Where EC2 says an instance is, and which reservation (if any) it is billed to."""

    instance_id: str
    instance_type: str
    zone: str
    capacity_type: CapacityType
    capacity_reservation_id: str | None
    state: str
