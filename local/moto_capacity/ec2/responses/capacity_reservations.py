"""EC2 wire format: Capacity Reservation actions, and RunInstances/CreateFleet with capacity.

Behaviour lives in the models; these methods only read parameters and shape answers.
`ec2.hooks` copies them onto moto's `EC2Response`.
"""

from typing import Any

from moto.core.responses import ActionResult
from moto.ec2.responses.fleets import Fleets
from moto.ec2.responses.instances import InstanceResponse
from moto.ec2.utils import convert_tag_spec

from moto_capacity.ec2.exceptions import InvalidParameterValue
from moto_capacity.ec2.models import future_dated
from moto_capacity.ec2.models.allocation import CapacityLedger
from moto_capacity.ec2.models.backend import CAPACITY_LOCK, InstanceCapacity, capacity_backend
from moto_capacity.ec2.models.fleets import RESERVED_TARGET_TYPES
from moto_capacity.ec2.models.instant_fleets import create_instant_fleet
from moto_capacity.ec2.models.launches import (
    InstanceAttributes,
    ReservationPreference,
    architecture_mismatch,
    image_platform,
    launch_template_data,
    launch_zone,
    set_lifecycle,
    stamp_launch,
    subnet_from_template,
    unknown_image,
)
from moto_capacity.ec2.responses.paging import page
from moto_capacity.resourcegroups import models as groups

PLATFORMS = (
    "Linux/UNIX",
    "Red Hat Enterprise Linux",
    "SUSE Linux",
    "Windows",
    "Windows with SQL Server",
    "Windows with SQL Server Enterprise",
    "Windows with SQL Server Standard",
    "Windows with SQL Server Web",
    "Linux with SQL Server Standard",
    "Linux with SQL Server Web",
    "Linux with SQL Server Enterprise",
    "RHEL with SQL Server Standard",
    "RHEL with SQL Server Enterprise",
    "RHEL with SQL Server Web",
    "RHEL with HA",
    "RHEL with HA and SQL Server Standard",
    "RHEL with HA and SQL Server Enterprise",
    "Ubuntu Pro",
)


def _one_of(name: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise InvalidParameterValue(f"Value ({value}) for parameter {name} is invalid.")
    return value


def _reservation_zone(response: Any) -> tuple[str, str]:
    """The zone a CreateCapacityReservation names (by name or id), and its zone id."""
    zone = response._get_param("AvailabilityZone")
    zone_id = response._get_param("AvailabilityZoneId")
    zones = {z.name: z.zone_id for z in response.ec2_backend.describe_availability_zones()}
    if zone_id and not zone:
        zone = next((name for name, zid in zones.items() if zid == zone_id), None)
    if zone not in zones:
        raise InvalidParameterValue(
            f"Invalid availability zone: [{zone or zone_id}] for region {response.region}."
        )
    return zone, zones[zone]


def _placement_group_arn(response: Any) -> str | None:
    """CreateCapacityReservation's PlacementGroupArn: the cluster placement group the capacity
    is reserved in (API_CreateCapacityReservation). Placement groups themselves are not modelled
    (moto has none): any well-formed ARN of this Region and account is taken as a cluster group."""
    arn = response._get_param("PlacementGroupArn")
    if arn is None:
        return None
    prefix = f"arn:aws:ec2:{response.region}:{response.current_account}:placement-group/"
    if not arn.startswith(prefix) or not arn[len(prefix) :]:
        raise InvalidParameterValue(f"Value ({arn}) for parameter PlacementGroupArn is invalid.")
    return str(arn)


def _launch_request(response: Any) -> tuple[InstanceAttributes, ReservationPreference, str]:
    """What a RunInstances asks for, with its launch template's data filled in; moto's own
    parameters get the template's subnet and zone. Refuses an image EC2 would refuse."""
    template = launch_template_data(response.ec2_backend, response._get_param("LaunchTemplate"))
    placement = {**(template.get("Placement") or {}), **(response._get_param("Placement") or {})}
    subnet_id = _subnet_from_templates(response, template)
    _zone_from_template(response, placement)
    instance_type = (
        response._get_param("InstanceType") or template.get("InstanceType") or "m1.small"
    )
    image_id = response._get_param("ImageId") or template.get("ImageId")
    if image_id:
        _refuse_image(response.ec2_backend, image_id, instance_type)
    attributes = InstanceAttributes(
        instance_type=instance_type,
        platform=image_platform(response.ec2_backend, image_id),
        availability_zone=launch_zone(
            response.ec2_backend, subnet_id, placement.get("AvailabilityZone")
        ),
        tenancy=placement.get("Tenancy") or "default",
        placement_group=placement.get("GroupName") or None,
    )
    preference = ReservationPreference.from_specification(
        response._get_param("CapacityReservationSpecification")
        or template.get("CapacityReservationSpecification")
    )
    market = (
        response._get_param("InstanceMarketOptions.MarketType")
        or (template.get("InstanceMarketOptions") or {}).get("MarketType")
        or "on-demand"
    )
    return attributes, preference, market


def _subnet_from_templates(response: Any, template: dict[str, Any]) -> str | None:
    """The request's subnet, else its network interfaces', else (with no interfaces) the launch
    template's, which moto's own parameters then get."""
    interfaces = response._get_param("NetworkInterfaces") or []
    subnet_id = response._get_param("SubnetId") or subnet_from_template(
        {"NetworkInterfaces": interfaces}
    )
    if not subnet_id and not interfaces:
        subnet_id = subnet_from_template(template)
        if subnet_id:
            response.params["SubnetId"] = subnet_id
    return subnet_id


def _zone_from_template(response: Any, placement: dict[str, Any]) -> None:
    """moto's own parameters get the launch template's zone when the request names none."""
    if placement.get("AvailabilityZone") and not response._get_param("Placement.AvailabilityZone"):
        response.params.setdefault("Placement", {})["AvailabilityZone"] = placement[
            "AvailabilityZone"
        ]


def _refuse_image(ec2_backend: Any, image_id: str, instance_type: str) -> None:
    refused = unknown_image(ec2_backend, image_id)
    if refused:
        # RunInstances, errors-overview: InvalidAMIID.Malformed, or .NotFound (no such AMI).
        raise refused
    mismatch = architecture_mismatch(ec2_backend, image_id, instance_type)
    if mismatch:
        # RunInstances, errors-overview: InvalidParameterValue, the architectures differ.
        raise mismatch


class CapacityReservationResponse(InstanceResponse, Fleets):
    """Methods `ec2.hooks` adds to moto's EC2Response; RunInstances and CreateFleet wrap moto's."""

    @property
    def capacity_backend(self) -> Any:
        return capacity_backend(self.ec2_backend)

    def create_capacity_reservation(self) -> ActionResult:
        zone, zone_id = _reservation_zone(self)
        count = int(self._get_param("InstanceCount", 0))
        if count < 1:
            raise InvalidParameterValue("InstanceCount must be at least 1.")
        end_date_type = _one_of(
            "EndDateType", self._get_param("EndDateType", "unlimited"), ("unlimited", "limited")
        )
        end_date = self._get_param("EndDate")
        if (end_date_type == "limited") != (end_date is not None):
            raise InvalidParameterValue("EndDate is required exactly when EndDateType is limited.")
        criteria = self._get_param("InstanceMatchCriteria")
        start_date = self._get_param("StartDate")
        commitment = self._get_param("CommitmentDuration")
        delivery = self._get_param("DeliveryPreference")
        if future_dated.is_future_dated(self.params):
            future_dated.check_request(
                self._get_param("InstanceType"),
                count,
                criteria,
                start_date,
                None if commitment is None else int(commitment),
                delivery,
                end_date,
            )
        self.error_on_dryrun()
        reservation = self.capacity_backend.create_reservation(
            schedule=(
                None
                if start_date is None
                else lambda created: future_dated.schedule(
                    created, start_date, int(commitment), delivery
                )
            ),
            instance_type=self._get_param("InstanceType"),
            instance_platform=_one_of(
                "InstancePlatform", self._get_param("InstancePlatform"), PLATFORMS
            ),
            availability_zone=zone,
            availability_zone_id=zone_id,
            instance_count=count,
            tenancy=_one_of(
                "Tenancy", self._get_param("Tenancy", "default"), ("default", "dedicated")
            ),
            instance_match_criteria=_one_of(
                "InstanceMatchCriteria", criteria or "open", ("open", "targeted")
            ),
            end_date_type=end_date_type,
            end_date=end_date,
            ebs_optimized=bool(self._get_param("EbsOptimized", False)),
            ephemeral_storage=bool(self._get_param("EphemeralStorage", False)),
            placement_group_arn=_placement_group_arn(self),
        )
        tags = convert_tag_spec(self._get_param("TagSpecifications", []))
        reservation.add_tags(tags.get("capacity-reservation", {}))
        return ActionResult({"CapacityReservation": reservation})

    def describe_capacity_reservations(self) -> ActionResult:
        self.error_on_dryrun()
        found = self.capacity_backend.describe_reservations(
            self._get_param("CapacityReservationIds", []), self._filters_from_querystring()
        )
        listed, next_token = page(
            found, self._get_param("MaxResults"), self._get_param("NextToken")
        )
        return ActionResult({"CapacityReservations": listed, "NextToken": next_token})

    def modify_capacity_reservation(self) -> ActionResult:
        self.error_on_dryrun()
        count = self._get_param("InstanceCount")
        self.capacity_backend.modify_reservation(
            self._get_param("CapacityReservationId"),
            instance_count=None if count is None else int(count),
            end_date_type=self._get_param("EndDateType"),
            end_date=self._get_param("EndDate"),
            instance_match_criteria=self._get_param("InstanceMatchCriteria"),
        )
        return ActionResult({"Return": True})

    def cancel_capacity_reservation(self) -> ActionResult:
        self.error_on_dryrun()
        self.capacity_backend.cancel_reservation(self._get_param("CapacityReservationId"))
        return ActionResult({"Return": True})

    def get_groups_for_capacity_reservation(self) -> ActionResult:
        self.error_on_dryrun()
        reservation = self.capacity_backend.get_reservation(
            self._get_param("CapacityReservationId")
        )
        found = [
            {"GroupArn": group.arn, "OwnerId": self.current_account}
            for group in groups.groups_containing(
                self.current_account, self.region, reservation.capacity_reservation_arn
            )
        ]
        listed, next_token = page(
            found, self._get_param("MaxResults"), self._get_param("NextToken")
        )
        return ActionResult({"CapacityReservationGroups": listed, "NextToken": next_token})

    def run_instances(self) -> ActionResult:
        """RunInstances placed by the capacity model, then launched by moto for what was placed."""
        self.error_on_dryrun()
        attributes, preference, market = _launch_request(self)
        min_count = int(self._get_param("MinCount", 1))
        max_count = max(min_count, int(self._get_param("MaxCount", min_count)))
        backend = self.capacity_backend
        with CAPACITY_LOCK:
            ledger = CapacityLedger(backend)
            placed = ledger.place(attributes, preference, max_count, market)
            if len(placed.slots) < min_count:
                raise placed.failure  # type: ignore[misc]
            ledger.commit()
        # moto launches MinCount instances; EC2 launches as many as fit between Min and Max.
        self.params["MinCount"] = len(placed.slots)
        try:
            result = InstanceResponse.run_instances(self)
        except Exception:
            backend.release_slots(placed.slots)
            raise
        reservation: Any = result.result
        for instance, slot in zip(reservation.instances, placed.slots, strict=True):
            backend.attach(instance, slot, InstanceCapacity(slot, attributes, preference, market))
            set_lifecycle(instance, market)
            stamp_launch(instance)
        return result

    def create_fleet(self) -> ActionResult:
        if self._get_param("Type") != "instant":
            default = self._get_param("TargetCapacitySpecification.DefaultTargetCapacityType")
            if default in RESERVED_TARGET_TYPES:
                # Capacity Blocks and interruptible reservations: instant fleets only.
                raise InvalidParameterValue(
                    f"DefaultTargetCapacityType {default} is supported only for instant fleets."
                )
            return Fleets.create_fleet(self)
        self.error_on_dryrun()
        return ActionResult(create_instant_fleet(self.ec2_backend, self.params))
