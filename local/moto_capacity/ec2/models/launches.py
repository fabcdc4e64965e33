"""What an instance launch asks of capacity: its matching attributes and reservation preference."""

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from moto.ec2.exceptions import EC2ClientError, InvalidAMIIdError, MalformedAMIIdError
from moto.ec2.models.instance_types import INSTANCE_TYPES

from moto_capacity.core.clock import CLOCK
from moto_capacity.ec2.exceptions import InvalidParameterCombination, InvalidParameterValue

from .platforms import reservation_platform

_IMAGE_ID = re.compile(r"ami-(?:[0-9a-f]{8}|[0-9a-f]{17})")
_WILDCARD = re.compile(r"[*?[]")
PREFERENCES = ("open", "none", "capacity-reservations-only")
LINUX = "Linux/UNIX"
WINDOWS = "Windows"


@dataclass(frozen=True)
class InstanceAttributes:
    """The attributes a Capacity Reservation must match: type, platform, zone and tenancy, and
    the cluster placement group the launch names (Placement.GroupName), if any."""

    instance_type: str
    platform: str
    availability_zone: str
    tenancy: str = "default"
    placement_group: str | None = None


@dataclass(frozen=True)
class ReservationPreference:
    """A parsed CapacityReservationSpecification (from the request or the launch template)."""

    preference: str | None = None
    reservation_id: str | None = None
    group_arn: str | None = None

    @classmethod
    def from_specification(cls, spec: Mapping[str, Any] | None) -> "ReservationPreference":
        spec = spec or {}
        preference = spec.get("CapacityReservationPreference")
        target = spec.get("CapacityReservationTarget") or {}
        reservation_id = target.get("CapacityReservationId")
        group_arn = target.get("CapacityReservationResourceGroupArn")
        if preference is not None and preference not in PREFERENCES:
            raise InvalidParameterValue(
                f"Value ({preference}) for parameter CapacityReservationPreference is invalid."
            )
        if reservation_id and group_arn:
            raise InvalidParameterCombination(
                "CapacityReservationId and CapacityReservationResourceGroupArn cannot be "
                "specified together."
            )
        if (reservation_id or group_arn) and preference in ("open", "none"):
            raise InvalidParameterCombination(
                f"CapacityReservationPreference '{preference}' cannot be combined with a "
                "CapacityReservationTarget."
            )
        return cls(preference, reservation_id, group_arn)

    @property
    def reservations_only(self) -> bool:
        return self.preference == "capacity-reservations-only"

    @property
    def avoids_reservations(self) -> bool:
        return self.preference == "none"

    def as_instance_specification(self) -> dict[str, Any]:
        """What DescribeInstances reports as the instance's CapacityReservationSpecification."""
        spec: dict[str, Any] = {}
        if self.preference or not (self.reservation_id or self.group_arn):
            spec["CapacityReservationPreference"] = self.preference or "open"
        if self.reservation_id:
            spec["CapacityReservationTarget"] = {"CapacityReservationId": self.reservation_id}
        if self.group_arn:
            spec["CapacityReservationTarget"] = {
                "CapacityReservationResourceGroupArn": self.group_arn
            }
        return spec


def launch_template_data(ec2_backend: Any, spec: Mapping[str, Any] | None) -> dict[str, Any]:
    """The data of the launch template version a request names (empty without a template)."""
    if not spec or not (spec.get("LaunchTemplateId") or spec.get("LaunchTemplateName")):
        return {}
    return dict(ec2_backend._get_template_from_args(dict(spec)).data)


def resolved_template_spec(ec2_backend: Any, spec: Mapping[str, Any]) -> dict[str, Any]:
    """The LaunchTemplateSpecification as EC2 echoes it: the id, and the version resolved."""
    if spec.get("LaunchTemplateId"):
        template = ec2_backend.get_launch_template(spec["LaunchTemplateId"])
    else:
        template = ec2_backend.get_launch_template_by_name(spec["LaunchTemplateName"])
    version = template.get_version(spec.get("Version", template.default_version_number))
    resolved = {"LaunchTemplateId": template.id, "Version": str(version.number)}
    if spec.get("LaunchTemplateName"):
        resolved["LaunchTemplateName"] = spec["LaunchTemplateName"]
    return resolved


def images_with_id(ec2_backend: Any, image_id: str) -> list[Any]:
    """What `describe_images(filters={"image-id": image_id})` answers, without its scan: moto
    matches the filter against each of the region's images (1,301 in us-east-1) with `fnmatch`,
    and this is asked for every launch and fleet. An id without a wildcard matches only itself:
    it is looked up by key (moto keys its images by id), a pattern is left to moto."""
    if _WILDCARD.search(image_id):
        return list(ec2_backend.describe_images(filters={"image-id": image_id}))
    found = ec2_backend.amis.get(image_id)
    if found is not None and found.id == image_id:
        return [found]
    return [image for image in list(ec2_backend.amis.values()) if image.id == image_id]


def image_platform(ec2_backend: Any, image_id: str | None) -> str:
    """The reservation platform an image runs, from its PlatformDetails (see `platforms`)."""
    if not image_id:
        return LINUX
    images = images_with_id(ec2_backend, image_id)
    return reservation_platform(images[0] if images else None)


def malformed_image(image_id: str) -> bool:
    """Whether EC2 reads `image_id` as malformed rather than unknown. EC2 API Reference, "Error
    codes for the Amazon EC2 API"
    (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html):
    `InvalidAMIID.Malformed` is an id not in the form ami-xxxxxxxxxxxxxxxxx. An AMI id is `ami-`
    and 8 (older) or 17 hexadecimal digits, so `ami-foo` is malformed and only a well-formed id
    can be `InvalidAMIID.NotFound`."""
    return _IMAGE_ID.fullmatch(image_id) is None


def unknown_image(ec2_backend: Any, image_id: str) -> EC2ClientError | None:
    """Why EC2 refuses to launch `image_id`, if it does (errors-overview): a malformed id
    (InvalidAMIID.Malformed), or one this account and region do not have (InvalidAMIID.NotFound).
    moto alone launches any id."""
    if malformed_image(image_id):
        return MalformedAMIIdError([image_id])
    if not images_with_id(ec2_backend, image_id):
        return InvalidAMIIdError(image_id)
    return None


def architecture_mismatch(
    ec2_backend: Any, image_id: str, instance_type: str
) -> InvalidParameterValue | None:
    """EC2's refusal to run an image on a type whose ProcessorInfo.SupportedArchitectures lacks
    the image's Architecture (an arm64 AMI on c5.large); moto alone launches it. None when they
    match, or when the image or type is unknown (InvalidAMIID says why, or nothing can)."""
    images = images_with_id(ec2_backend, image_id)
    info = INSTANCE_TYPES.get(instance_type)
    image_architecture = getattr(images[0], "architecture", None) if images else None
    if not image_architecture or info is None:
        return None
    supported = (info.get("ProcessorInfo") or {}).get("SupportedArchitectures") or []
    if image_architecture in supported:
        return None
    # EC2 names the type's 64-bit architecture (t2.micro lists i386 first).
    type_architecture = next((a for a in supported if a != "i386"), "".join(supported[:1]))
    return InvalidParameterValue(
        f"The architecture '{type_architecture}' of the specified instance type does not match "
        f"the architecture '{image_architecture}' of the specified AMI. Specify an instance "
        "type and an AMI that have matching architectures, and try again. You can use "
        "'describe-instance-types' or 'describe-images' to discover the architecture of the "
        "instance type or AMI."
    )


def subnet_from_template(template_data: Mapping[str, Any]) -> str | None:
    for interface in template_data.get("NetworkInterfaces") or []:
        if interface.get("SubnetId"):
            return str(interface["SubnetId"])
    return None


def launch_zone(ec2_backend: Any, subnet_id: str | None, zone: str | None) -> str:
    """Where an instance lands: its subnet's zone, else the requested one, else `<region>a`."""
    if subnet_id:
        return str(ec2_backend.get_subnet(subnet_id).availability_zone)
    if zone:
        return zone
    return f"{ec2_backend.region_name}a"


def stamp_launch(instance: Any) -> None:
    """DescribeInstances' LaunchTime on the emulator's clock: the moment the instance launched as
    the emulator tells time (moto stamps the wall clock, which an advanced clock leaves behind).
    EC2 API Reference, Instance: https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_Instance.html"""
    instance.launch_time = CLOCK.now().replace(tzinfo=None)  # moto keeps naive UTC


def set_lifecycle(instance: Any, market: str) -> None:
    """DescribeInstances' InstanceLifecycle: the market for spot, block and interruptible
    instances, nothing for On-Demand (moto alone says `spot` for any market type)."""
    instance.lifecycle = None if market == "on-demand" else market
