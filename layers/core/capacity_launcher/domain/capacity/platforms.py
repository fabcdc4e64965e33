"""Which reservations an image may use: EC2 matches the image's platform to the reservation's.

EC2 User Guide, "Understand AMI billing information": every AMI reports PlatformDetails and
UsageOperation. "Launch instances into an existing Capacity Reservation": an instance uses a
reservation only if its platform is the reservation's InstancePlatform.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from capacity_launcher.domain.apis.config import NodeClass
from capacity_launcher.domain.capacity.reservations import ReservationSnapshot

LINUX = "Linux/UNIX"
# The error code a request record shows when its NodeClass names a reservation of another platform.
PLATFORM_MISMATCH = "ImagePlatformMismatch"

# UsageOperation -> InstancePlatform. The billing code is exact; PlatformDetails is the fallback.
_BY_USAGE_OPERATION: dict[str, str] = {
    "RunInstances": LINUX,
    "RunInstances:0010": "Red Hat Enterprise Linux",
    "RunInstances:1010": "RHEL with HA",
    "RunInstances:0014": "RHEL with SQL Server Standard",
    "RunInstances:0110": "RHEL with SQL Server Enterprise",
    "RunInstances:0210": "RHEL with SQL Server Web",
    "RunInstances:1014": "RHEL with HA and SQL Server Standard",
    "RunInstances:1110": "RHEL with HA and SQL Server Enterprise",
    "RunInstances:000g": "SUSE Linux",
    "RunInstances:0g00": "Ubuntu Pro",
    "RunInstances:0004": "Linux with SQL Server Standard",
    "RunInstances:0200": "Linux with SQL Server Web",
    "RunInstances:0100": "Linux with SQL Server Enterprise",
    "RunInstances:0002": "Windows",
    "RunInstances:0006": "Windows with SQL Server Standard",
    "RunInstances:0102": "Windows with SQL Server Enterprise",
    "RunInstances:0202": "Windows with SQL Server Web",
}
_BY_PLATFORM_DETAILS: dict[str, str] = {
    LINUX: LINUX,
    "Red Hat Enterprise Linux": "Red Hat Enterprise Linux",
    "Red Hat Enterprise Linux with HA": "RHEL with HA",
    "Red Hat Enterprise Linux with SQL Server Standard": "RHEL with SQL Server Standard",
    "Red Hat Enterprise Linux with SQL Server Enterprise": "RHEL with SQL Server Enterprise",
    "Red Hat Enterprise Linux with SQL Server Web": "RHEL with SQL Server Web",
    "Red Hat Enterprise Linux with SQL Server Standard and HA": (
        "RHEL with HA and SQL Server Standard"
    ),
    "Red Hat Enterprise Linux with SQL Server Enterprise and HA": (
        "RHEL with HA and SQL Server Enterprise"
    ),
    "SUSE Linux": "SUSE Linux",
    "Ubuntu Pro": "Ubuntu Pro",
    "Linux with SQL Server Standard": "Linux with SQL Server Standard",
    "Linux with SQL Server Web": "Linux with SQL Server Web",
    "Linux with SQL Server Enterprise": "Linux with SQL Server Enterprise",
    "Windows": "Windows",
    "Windows with SQL Server Standard": "Windows with SQL Server Standard",
    "Windows with SQL Server Enterprise": "Windows with SQL Server Enterprise",
    "Windows with SQL Server Web": "Windows with SQL Server Web",
}


def reservation_platform(platform_details: str | None, usage_operation: str | None) -> str | None:
    """The InstancePlatform of the reservations an image may use; None when not known."""
    if usage_operation in _BY_USAGE_OPERATION:
        return _BY_USAGE_OPERATION[usage_operation]
    return _BY_PLATFORM_DETAILS.get(platform_details or "")


@dataclass(frozen=True)
class PlatformMismatch:
    """A reservation the NodeClass names by id that its image can never launch into."""

    reservation_id: str
    reservation_platform: str
    image_platform: str

    def message(self, node_class: NodeClass) -> str:
        spec = node_class.spec
        image = (
            f"spec.imageId {spec.image_id}"
            if spec.image_id
            else f"the image of spec.imageSsmParameter {spec.image_ssm_parameter}"
            if spec.image_ssm_parameter
            else "the image spec.imageSelectorTerms select"
        )
        return (
            f"NodeClass {node_class.metadata.name}: {image} runs {self.image_platform}, but "
            f"capacity reservation {self.reservation_id} is for {self.reservation_platform} "
            "instances; EC2 launches into a reservation only when the platforms match"
        )


def platform_mismatches(
    reservations: Iterable[ReservationSnapshot], image_platform: str, named: Collection[str]
) -> list[PlatformMismatch]:
    """Named reservations of another platform (others, found by tags or groups, are skipped)."""
    found: dict[str, PlatformMismatch] = {}
    for reservation in reservations:
        if reservation.reservation_id in named and reservation.platform != image_platform:
            found[reservation.reservation_id] = PlatformMismatch(
                reservation.reservation_id, reservation.platform, image_platform
            )
    return [found[k] for k in sorted(found)]
