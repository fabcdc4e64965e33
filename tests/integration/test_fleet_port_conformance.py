"""The fleet port's fake (tests/fakes/ec2.py `FakeFleet`) answers as the EC2 adapter does
(adapters/fleet.py on moto and moto_capacity): one scenario against each, the same observations,
instance ids aside (each side numbers its own). The cases: overrides taken by priority; a
ClientToken sent again answered as the first time (with other input: IdempotentParameterMismatch);
a dry offering's InsufficientInstanceCapacity beside a launch elsewhere; a targeted reservation
filled, then ReservationCapacityExceeded; describe, tag, find by tag (only the launcher's
instances), terminate (and again: still listed, nothing gone; an id EC2 never knew: gone)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import moto_capacity
from capacity_launcher.domain.capacity.fleet import FleetResult, LaunchTemplate
from capacity_launcher.domain.capacity.reservations import (
    ONLY_RESERVATIONS,
    ReservationUse,
    ReservedTarget,
)
from capacity_launcher.domain.errors import LaunchFailed
from capacity_launcher.domain.records.tags import MANAGED
from capacity_launcher.service.ports import FleetLauncher
from tests.fakes.ec2 import FakeFleet, FakeSubnets, FakeTemplates
from tests.fakes.world import a_reservation
from tests.support.cloud import Cloud

REGION = "us-east-1"
DRY_ZONE, WET_ZONE = "us-east-1a", "us-east-1b"
TAG = "capacity-launcher/conformance"


def _request(
    token: str, template: str, overrides: Sequence[dict[str, Any]], count: int
) -> dict[str, Any]:
    """A CreateFleet input; every fleet but `t-2`'s tags its instances as the launcher's."""
    tags = [{"Key": TAG, "Value": token}]
    if token != "t-2":
        tags.append({"Key": MANAGED, "Value": "true"})
    return {
        "ClientToken": token,
        "Type": "instant",
        "TargetCapacitySpecification": {
            "TotalTargetCapacity": count,
            "DefaultTargetCapacityType": "on-demand",
        },
        "LaunchTemplateConfigs": [
            {
                "LaunchTemplateSpecification": {
                    "LaunchTemplateName": template,
                    "Version": "$Latest",
                },
                "Overrides": list(overrides),
            }
        ],
        "TagSpecifications": [{"ResourceType": "instance", "Tags": tags}],
    }


def _scenario(
    fleet: FleetLauncher, plain: str, reserved: str, subnets: dict[str, str]
) -> list[Any]:
    def override(instance_type: str, zone: str, priority: float) -> dict[str, Any]:
        # As the launcher writes them (domain/capacity/fleet.py): the subnet and its zone
        return {
            "InstanceType": instance_type,
            "SubnetId": subnets[zone],
            "AvailabilityZone": zone,
            "Priority": priority,
        }

    def shown(result: FleetResult) -> Any:
        landed = fleet.describe(result.instance_ids)
        return (
            sorted(
                (x.instance_type, x.zone, x.capacity_type, x.capacity_reservation_id)
                for x in landed
            ),
            sorted((e.code, e.instance_type, e.zone) for e in result.errors),
        )

    seen: list[Any] = []
    # By priority: the second override (priority 0) first
    asked = [override("m5.xlarge", WET_ZONE, 1), override("m5.large", WET_ZONE, 0)]
    first = fleet.create(_request("t-1", plain, asked, 2))
    seen.append(shown(first))
    # The token again: the first answer, no more instances; with other parameters: refused
    again = fleet.create(_request("t-1", plain, asked, 2))
    seen.append(again.instance_ids == first.instance_ids)
    seen.append(_refusal(lambda: fleet.create(_request("t-1", plain, asked[:1], 2))))
    # A dry offering first: its error, and the fleet launches in the next
    dry_first = [override("m5.large", DRY_ZONE, 0), override("m5.large", WET_ZONE, 1)]
    seen.append(shown(fleet.create(_request("t-2", plain, dry_first, 1))))
    # Into the reservation (1 slot): one launched, the rest refused
    into = fleet.create(_request("t-3", reserved, [override("m5.large", DRY_ZONE, 0)], 2))
    seen.append(shown(into))
    # Tagged, found by tag, terminated, terminated again
    ids = list(first.instance_ids)
    seen.append(fleet.tag(ids, {"team": "a"}))
    found = fleet.find_managed({TAG: "t-1", "team": "a"})
    seen.append(sorted((m.instance_type, m.zone, m.tags.get("team")) for m in found))
    managed = fleet.find_managed()  # t-2's instance is not the launcher's
    seen.append(sorted((m.tags[TAG], m.capacity_type) for m in managed))
    seen.append(fleet.terminate(ids))
    seen.append(fleet.terminate(ids))  # still listed: terminated again, nothing gone
    seen.append(fleet.terminate(["i-0123456789abcdef0"]))  # never known: gone
    return seen


def _refusal(step: Callable[[], Any]) -> Any:
    try:
        step()
    except LaunchFailed as refused:
        return ("LaunchFailed", refused.code)
    return None


def test_the_fake_fleet_answers_as_ec2_does(cloud: Cloud, subnets: dict[str, str], image: str):
    moto_capacity.set_capacity(REGION, "m5.large", DRY_ZONE, "on-demand", 0)
    reservation = cloud.ec2.create_capacity_reservation(
        InstanceType="m5.large",
        InstancePlatform="Linux/UNIX",
        AvailabilityZone=DRY_ZONE,
        InstanceCount=1,
        InstanceMatchCriteria="targeted",
    )["CapacityReservation"]["CapacityReservationId"]
    names = _templates(cloud.ec2, image, reservation)
    adapter = _scenario(cloud.adapters().fleet(), *names, subnets)

    zones = {subnet: zone for zone, subnet in subnets.items()}
    templates = FakeTemplates()
    target = ReservedTarget(reservation_id=reservation)
    templates.by_name[names[0]] = LaunchTemplate(names[0], ReservationUse("none"))
    templates.by_name[names[1]] = LaunchTemplate(
        names[1], ReservationUse(ONLY_RESERVATIONS, target)
    )
    fake_fleet = FakeFleet(
        templates, FakeSubnets(zones), [a_reservation(reservation, "m5.large", DRY_ZONE, 1)]
    )
    fake_fleet.dry.add(("on-demand", "m5.large", DRY_ZONE))
    fake = _scenario(fake_fleet, *names, subnets)

    assert fake == adapter
    # and the cases answered what they are about
    assert adapter[0] == ([("m5.large", WET_ZONE, "on-demand", None)] * 2, [])
    assert adapter[1] is True
    assert adapter[2] == ("LaunchFailed", "IdempotentParameterMismatch")
    assert adapter[3] == (
        [("m5.large", WET_ZONE, "on-demand", None)],
        [("InsufficientInstanceCapacity", "m5.large", DRY_ZONE)],
    )
    assert adapter[4] == (
        [("m5.large", DRY_ZONE, "reserved", reservation)],
        [("ReservationCapacityExceeded", "m5.large", DRY_ZONE)],
    )
    assert adapter[5] == [] and adapter[6] == [("m5.large", WET_ZONE, "a")] * 2
    assert adapter[7] == [("t-1", "on-demand")] * 2 + [("t-3", "reserved")]
    assert adapter[8] == adapter[9] == [] and adapter[10] == ["i-0123456789abcdef0"]


def _templates(ec2: Any, image: str, reservation: str) -> tuple[str, str]:
    """A plain template, and one whose instances go only into `reservation`."""
    ec2.create_launch_template(
        LaunchTemplateName="conformance-plain", LaunchTemplateData={"ImageId": image}
    )
    ec2.create_launch_template(
        LaunchTemplateName="conformance-reserved",
        LaunchTemplateData={
            "ImageId": image,
            "CapacityReservationSpecification": {
                "CapacityReservationPreference": ONLY_RESERVATIONS,
                "CapacityReservationTarget": {"CapacityReservationId": reservation},
            },
        },
    )
    return "conformance-plain", "conformance-reserved"
