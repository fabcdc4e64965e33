"""Image platforms: the billing fields an AMI carries, and the reservation platform it matches.

EC2 User Guide, "Understand AMI billing information" (PlatformDetails and UsageOperation), and
"Capacity Reservation" attributes (InstancePlatform): an instance runs in a reservation only if
the platform of its image is the reservation's platform.
"""

import threading
from typing import Any

from moto.ec2.models.amis import Ami
from moto.ec2.utils import random_ami_id

LINUX = "Linux/UNIX"
WINDOWS = "Windows"

# PlatformDetails -> (UsageOperation, the InstancePlatform of reservations it may use).
PLATFORMS: dict[str, tuple[str, str]] = {
    "Linux/UNIX": ("RunInstances", "Linux/UNIX"),
    "Red Hat Enterprise Linux": ("RunInstances:0010", "Red Hat Enterprise Linux"),
    "Red Hat Enterprise Linux with HA": ("RunInstances:1010", "RHEL with HA"),
    "Red Hat Enterprise Linux with SQL Server Standard": (
        "RunInstances:0014",
        "RHEL with SQL Server Standard",
    ),
    "Red Hat Enterprise Linux with SQL Server Enterprise": (
        "RunInstances:0110",
        "RHEL with SQL Server Enterprise",
    ),
    "Red Hat Enterprise Linux with SQL Server Web": (
        "RunInstances:0210",
        "RHEL with SQL Server Web",
    ),
    "Red Hat Enterprise Linux with SQL Server Standard and HA": (
        "RunInstances:1014",
        "RHEL with HA and SQL Server Standard",
    ),
    "Red Hat Enterprise Linux with SQL Server Enterprise and HA": (
        "RunInstances:1110",
        "RHEL with HA and SQL Server Enterprise",
    ),
    "SUSE Linux": ("RunInstances:000g", "SUSE Linux"),
    "Ubuntu Pro": ("RunInstances:0g00", "Ubuntu Pro"),
    "Linux with SQL Server Standard": ("RunInstances:0004", "Linux with SQL Server Standard"),
    "Linux with SQL Server Web": ("RunInstances:0200", "Linux with SQL Server Web"),
    "Linux with SQL Server Enterprise": ("RunInstances:0100", "Linux with SQL Server Enterprise"),
    "Windows": ("RunInstances:0002", "Windows"),
    "Windows with SQL Server Standard": ("RunInstances:0006", "Windows with SQL Server Standard"),
    "Windows with SQL Server Enterprise": (
        "RunInstances:0102",
        "Windows with SQL Server Enterprise",
    ),
    "Windows with SQL Server Web": ("RunInstances:0202", "Windows with SQL Server Web"),
}

_REGISTERED_LOCK = threading.Lock()
REGISTERED_IMAGES: list[dict[str, str]] = []


class ImageBillingFields:
    """PlatformDetails and UsageOperation on moto's Ami (moto has neither); `ec2.hooks` copies
    these onto `Ami`. Without an explicit platform, Windows AMIs are Windows, others Linux."""

    @property
    def platform_details(self) -> str:
        explicit = self.__dict__.get("_platform_details")
        if explicit:
            return str(explicit)
        return WINDOWS if (getattr(self, "platform", None) or "").lower() == "windows" else LINUX

    @property
    def usage_operation(self) -> str:
        return PLATFORMS[self.platform_details][0]


def reservation_platform(image: Any | None) -> str:
    """The InstancePlatform of reservations an image may use (Linux for images moto lacks)."""
    if image is None:
        return LINUX
    return PLATFORMS[image.platform_details][1]


def register_image(
    ec2_backend: Any,
    platform_details: str,
    name: str | None = None,
    architecture: str = "x86_64",
    image_id: str | None = None,
) -> Any:
    """A new AMI in this backend whose billing fields say `platform_details` (`image_id`, or a
    random id)."""
    if platform_details not in PLATFORMS:
        raise ValueError(
            f"platformDetails must be one of {sorted(PLATFORMS)}, got {platform_details!r}"
        )
    image_id = image_id or random_ami_id()
    image = Ami(
        ec2_backend,
        image_id,
        name=name or f"{platform_details} image {image_id}",
        architecture=architecture,
        platform="windows" if platform_details.startswith("Windows") else None,
        virtualization_type="hvm",
        root_device_type="ebs",
        region_name=ec2_backend.region_name,
    )
    image.__dict__["_platform_details"] = platform_details
    ec2_backend.amis[image_id] = image
    with _REGISTERED_LOCK:
        REGISTERED_IMAGES.append(
            {
                "accountId": str(ec2_backend.account_id),
                "region": str(ec2_backend.region_name),
                "imageId": image_id,
                "platformDetails": platform_details,
                "usageOperation": PLATFORMS[platform_details][0],
            }
        )
    return image


def registered_images() -> list[dict[str, str]]:
    with _REGISTERED_LOCK:
        return list(REGISTERED_IMAGES)


def forget_registered_images() -> None:
    with _REGISTERED_LOCK:
        REGISTERED_IMAGES.clear()
