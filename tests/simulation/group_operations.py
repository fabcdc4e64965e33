"""ODCR groups (issue 38's launch path; docs/placement.md, "Reservation groups"), drawn by the
`groups` profile only: an operator makes a resource group of targeted reservations (the
`AWS::EC2::CapacityReservationPool` configuration, as the local cloud's examples do), a
NodeClass targets it (`capacityReservationTarget.capacityReservationResourceGroupArn`) and two
pools launch through it: `pool-group`, reserved only, and `pool-group-spill`, reserved then
on-demand. Members are added (some with an end date, which EC2 expires on time), grown, shrunk
and cancelled; producers submit into the pools while two containers serve batches at once;
workers are killed just after CreateFleet or DescribeInstances (their redelivery replays the
launch and its settle). What they must keep is judged by group_invariants.py."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from tests.simulation.emulator import AFTER_CALL
from tests.simulation.operations import TYPES, ZONES, _document, request_body
from tests.simulation.reservation_operations import CAPACITY_TYPE, INSTANCE_TYPE, ZONE

if TYPE_CHECKING:
    from tests.simulation.scheduler import Simulation

GROUP_NAME = "sim-reservations"
GROUP_CLASS = "class-group"
GROUP_POOL, SPILL_POOL = "pool-group", "pool-group-spill"
GROUP_POOLS = (GROUP_POOL, SPILL_POOL)
GROUP_TAG = {"simulation-group": "yes"}
POOL_LIMIT = 8
ACCOUNT = "123456789012"
# A member with an end date ends this many minutes after it is made (EC2 expires it then).
END_MINUTES = (5, 40)


def _arn(reservation_id: str) -> str:
    return f"arn:aws:ec2:us-east-1:{ACCOUNT}:capacity-reservation/{reservation_id}"


def group_documents(sim: Simulation, arn: str) -> list[dict[str, Any]]:
    """The NodeClass targeting the group (both zones) and its two pools, every type."""
    node_class = _document(
        "NodeClass",
        GROUP_CLASS,
        {
            "imageId": sim.world.image_id,
            "subnetIds": [sim.world.subnets[z] for z in ZONES],
            "securityGroupIds": [sim.world.security_group],
            "capacityReservationSpec": {
                "capacityReservationTarget": {"capacityReservationResourceGroupArn": arn}
            },
        },
    )
    pools = [
        _document(
            "NodePool",
            name,
            {
                "nodeClassRef": GROUP_CLASS,
                "weight": weight,
                "requirements": [
                    {"key": INSTANCE_TYPE, "operator": "In", "values": list(TYPES)},
                    {"key": CAPACITY_TYPE, "operator": "In", "values": capacity},
                ],
                "limits": {"instances": str(POOL_LIMIT)},
            },
        )
        for name, weight, capacity in (
            (GROUP_POOL, 2, ["reserved"]),
            (SPILL_POOL, 1, ["reserved", "on-demand"]),
        )
    ]
    return [node_class, *pools]


def _member(sim: Simulation, rng: random.Random) -> str:
    """A targeted reservation of 1-4 of a drawn type and zone, one in three with an end date."""
    ending = rng.random() < 1 / 3
    extra: dict[str, Any] = {}
    if ending:
        minutes = rng.randint(*END_MINUTES)
        end = datetime.fromtimestamp(sim.world.now, UTC) + timedelta(minutes=minutes)
        extra = {"EndDateType": "limited", "EndDate": end}
    answer = sim.world.ec2.create_capacity_reservation(
        InstanceType=rng.choice(TYPES),
        InstancePlatform="Linux/UNIX",
        AvailabilityZone=rng.choice(ZONES),
        InstanceCount=rng.randint(1, 4),
        InstanceMatchCriteria="targeted",
        TagSpecifications=[
            {
                "ResourceType": "capacity-reservation",
                "Tags": [{"Key": k, "Value": v} for k, v in GROUP_TAG.items()],
            }
        ],
        **extra,
    )
    return str(answer["CapacityReservation"]["CapacityReservationId"])


def _group_in(sim: Simulation, members: list[str]) -> None:
    """GroupResources of `members` into the group (made first if need be)."""
    groups = sim.world.client("resource-groups")
    if sim.catalog.group_arn is None:
        sim.catalog.group_arn = groups.create_group(
            Name=GROUP_NAME,
            Configuration=[
                {"Type": "AWS::EC2::CapacityReservationPool"},
                {
                    "Type": "AWS::ResourceGroups::Generic",
                    "Parameters": [
                        {
                            "Name": "allowed-resource-types",
                            "Values": ["AWS::EC2::CapacityReservation"],
                        }
                    ],
                },
            ],
        )["Group"]["GroupArn"]
    groups.group_resources(Group=sim.catalog.group_arn, ResourceArns=[_arn(m) for m in members])
    sim.catalog.group_members += members
    sim.invariants.reserved.groups[sim.catalog.group_arn] = frozenset(sim.catalog.group_members)


def make_group(sim: Simulation, rng: random.Random) -> str:
    """The group of 5-7 members (more than a launch's first page of snapshots,
    `reservation_pages.FIRST_PAGE`: EC2 may choose a member the page missed), with its NodeClass
    and pools; later a member added (and the documents applied again if one was refused)."""
    made = ""
    if sim.catalog.group_arn is None:
        members = [_member(sim, rng) for _ in range(rng.randint(5, 7))]
        _group_in(sim, members)
        made = f"group of {len(members)}, "
    elif GROUP_CLASS in sim.catalog.classes and set(GROUP_POOLS) <= set(sim.catalog.pools):
        _group_in(sim, [_member(sim, rng)])
        return f"member {len(sim.catalog.group_members)} added"
    assert sim.catalog.group_arn is not None
    applied = [sim.apply(d) for d in group_documents(sim, sim.catalog.group_arn)]
    return f"{made}applied: {applied}"


def _active_members(sim: Simulation) -> list[dict[str, Any]]:
    members = sim.catalog.group_members
    if not members:
        return []
    found = sim.world.ec2.describe_capacity_reservations(CapacityReservationIds=members)
    return [r for r in found["CapacityReservations"] if r["State"] == "active"]


def change_member(sim: Simulation, rng: random.Random) -> str:
    """A member grown or shrunk (ModifyCapacityReservation), or cancelled (one in four)."""
    active = _active_members(sim)
    if not active:
        return "no active member"
    chosen = rng.choice(active)["CapacityReservationId"]
    if rng.random() < 0.25:
        sim.world.ec2.cancel_capacity_reservation(CapacityReservationId=chosen)
        return "cancelled"
    count = rng.randint(1, 5)
    sim.world.ec2.modify_capacity_reservation(CapacityReservationId=chosen, InstanceCount=count)
    return f"to {count}"


def _group_body(
    sim: Simulation, rng: random.Random, active: list[dict[str, Any]]
) -> dict[str, Any]:
    """A request into one of the group's pools (the reserved-only one twice as often), now and
    then pinned to a member's type and zone or asking more than the pools hold."""
    body = request_body(sim, rng)
    for optional in ("minCount", "requirements", "requester", "tags"):
        body.pop(optional, None)
    body["nodePool"] = rng.choice((GROUP_POOL, GROUP_POOL, SPILL_POOL))
    if active and rng.random() < 0.5:
        member = rng.choice(active)
        body["requirements"] = [
            {"key": INSTANCE_TYPE, "operator": "In", "values": [member["InstanceType"]]},
            {"key": ZONE, "operator": "In", "values": [member["AvailabilityZone"]]},
        ]
        body["count"] = int(member["AvailableInstanceCount"]) + rng.randint(0, 2) or 1
    return body


def group_requests(sim: Simulation, rng: random.Random) -> str:
    """2-4 requests into the group's pools, served at once by two containers (each a part)."""
    if sim.catalog.group_arn is None or GROUP_CLASS not in sim.catalog.classes:
        return make_group(sim, rng)
    active = _active_members(sim)
    bodies = [_group_body(sim, rng, active) for _ in range(rng.randint(2, 4))]
    sim.send(bodies, via_bus=False)
    sim.poll_at_once()
    return f"{len(bodies)} at once, {len(active)} members active"


def group_crash(sim: Simulation, rng: random.Random) -> str:
    """A request into the group's pools served by a worker killed just after EC2 launched, or
    just after it read where the instances landed: the redelivery replays the launch."""
    if sim.catalog.group_arn is None or GROUP_CLASS not in sim.catalog.classes:
        return make_group(sim, rng)
    sim.send([_group_body(sim, rng, _active_members(sim))], via_bus=False)
    messages = sim.world.receive_batch()
    if not messages:
        return "nothing visible"
    at = rng.choice(sorted(AFTER_CALL))
    sim.pending_crash = at
    sim.poll_batch(messages)
    return f"armed {at[1]}"


GROUP_OPERATIONS = {
    "make_group": make_group,
    "change_member": change_member,
    "group_requests": group_requests,
    "group_crash": group_crash,
}
