"""Room in the selected reservations changing under the service, drawn from the seed like every
other operation: a reservation grown or shrunk (ModifyCapacityReservation), someone else in the
account running instances in one or ending them, the minute's sync stopped for minutes, and
requests for more instances than a selected reservation has room for. What they exercise is
the promise "reserved capacity first" (reserved_first.py) within the windows docs/operations.md
documents ("How launchers use them"): the sync's snapshots going stale, launchers looking at EC2
themselves, exhausted flags.

Their weights are in operations.py (`ROOM_WEIGHTS`, and the `reserved-first` profile)."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from tests.simulation.operations import (
    RESERVATION_TAG,
    TYPES,
    ZONES,
    _document,
    create_reservation,
    request_body,
)
from tests.simulation.world import LIVE

if TYPE_CHECKING:
    from tests.simulation.scheduler import Simulation

RESERVED_CLASS, RESERVED_POOL = "class-reserved", "pool-reserved"
RESERVED_POOL_LIMIT = 16
CAPACITY_TYPE = "karpenter.sh/capacity-type"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
ZONE = "topology.kubernetes.io/zone"
PAUSE_SECONDS = (180.0, 720.0)


def modify_reservation(sim: Simulation, rng: random.Random) -> str:
    """The team grows or shrinks one of its reservations (ModifyCapacityReservation): room made
    or taken since the last sync, which no instance event announces."""
    if not sim.catalog.reservations:
        return "none"
    count = rng.randint(1, 6)
    sim.world.ec2.modify_capacity_reservation(
        CapacityReservationId=rng.choice(sim.catalog.reservations), InstanceCount=count
    )
    return f"to {count}"


def foreign_instances(sim: Simulation, rng: random.Random) -> str:
    """Someone else in the account runs 1-2 instances in one of the team's active reservations
    with room (RunInstances naming it), or ends some it ran (terminated, or stopped: a stopped
    instance gives its slot back too). Slots the service neither took nor gave back, whose
    instances send it no event it acts on."""
    if sim.catalog.foreign and rng.random() < 0.5:
        chosen = rng.sample(sim.catalog.foreign, min(len(sim.catalog.foreign), rng.randint(1, 2)))
        if rng.random() < 0.3:
            sim.world.ec2.stop_instances(InstanceIds=chosen)
            return f"{len(chosen)} stopped"
        sim.world.ec2.terminate_instances(InstanceIds=chosen)
        sim.catalog.foreign = [i for i in sim.catalog.foreign if i not in chosen]
        return f"{len(chosen)} terminated"
    room = [r for r in _room(sim, set(TYPES), set(ZONES)) if r["AvailableInstanceCount"] > 0]
    if not room:
        return "no room in a reservation"
    reservation = rng.choice(room)
    count = min(rng.randint(1, 2), int(reservation["AvailableInstanceCount"]))
    answer = sim.world.ec2.run_instances(
        ImageId=sim.world.image_id,
        InstanceType=reservation["InstanceType"],
        MinCount=count,
        MaxCount=count,
        SubnetId=sim.world.subnets[reservation["AvailabilityZone"]],
        CapacityReservationSpecification={
            "CapacityReservationTarget": {
                "CapacityReservationId": reservation["CapacityReservationId"]
            }
        },
    )
    sim.catalog.foreign += [i["InstanceId"] for i in answer["Instances"]]
    return f"{count} run"


def pause_sync(sim: Simulation, rng: random.Random) -> str:
    """The minute's sync stops for 3-12 minutes (its rule disabled, its function throttled):
    launchers go on with snapshots that age, then with EC2 itself (docs/operations.md)."""
    return sim.pause_sync(rng.uniform(*PAUSE_SECONDS))


def reserved_documents(sim: Simulation) -> list[dict[str, Any]]:
    """A NodeClass in both zones selecting the team's reservations, and a pool of every type,
    reserved then on-demand, no other operation replaces or deletes (weight 1: the last a
    request naming no pool comes to)."""
    node_class = _document(
        "NodeClass",
        RESERVED_CLASS,
        {
            "imageId": sim.world.image_id,
            "subnetIds": [sim.world.subnets[z] for z in ZONES],
            "securityGroupIds": [sim.world.security_group],
            "capacityReservationSelectorTerms": [{"tags": RESERVATION_TAG}],
        },
    )
    pool = _document(
        "NodePool",
        RESERVED_POOL,
        {
            "nodeClassRef": RESERVED_CLASS,
            "weight": 1,
            "requirements": [
                {"key": INSTANCE_TYPE, "operator": "In", "values": list(TYPES)},
                {"key": CAPACITY_TYPE, "operator": "In", "values": ["reserved", "on-demand"]},
            ],
            "limits": {"instances": str(RESERVED_POOL_LIMIT)},
        },
    )
    return [node_class, pool]


def _room_in_the_pool(sim: Simulation, count: int) -> int:
    """The pool's oldest instances terminated by their users until `count` more fit its limit."""
    live = sorted(
        (o.launched_at, o.instance_id)
        for o in sim.world.instances.values()
        if o.pool == RESERVED_POOL and o.state in LIVE
    )
    excess = len(live) + count - RESERVED_POOL_LIMIT
    if excess <= 0:
        return 0
    sim.world.ec2.terminate_instances(InstanceIds=[i for _, i in live[:excess]])
    return excess


def _room(sim: Simulation, types: set[str], zones: set[str]) -> list[dict[str, Any]]:
    """The team's active ordinary reservations of those types in those zones, as EC2 says."""
    tag = next(iter(RESERVATION_TAG.items()))
    return [
        r
        for r in sim.world.ec2.describe_capacity_reservations()["CapacityReservations"]
        if r["State"] == "active"
        and not r.get("Interruptible")
        and {"Key": tag[0], "Value": tag[1]} in r.get("Tags", [])
        and r["InstanceType"] in types
        and r["AvailabilityZone"] in zones
    ]


def reservation_burst(sim: Simulation, rng: random.Random) -> str:
    """A request for 1-2 more instances than a selected reservation has room for (EC2's count
    now), pinned to its type and zone, into `pool-reserved`, whose NodeClass selects it: the
    reservation first, on-demand for the rest. The pool is applied first if need be, its oldest
    instances ended by their users when it is near its limit, and a reservation is created when
    none is active."""
    if RESERVED_POOL not in sim.catalog.pools or RESERVED_CLASS not in sim.catalog.classes:
        applied = [sim.apply(document) for document in reserved_documents(sim)]
        return f"{RESERVED_POOL} applied: {applied}"
    room = _room(sim, set(TYPES), set(ZONES))
    if not room:
        return f"no reservation active: created {create_reservation(sim, rng)}"
    return _burst(sim, rng, rng.choice(room))


def _burst(sim: Simulation, rng: random.Random, reservation: dict[str, Any]) -> str:
    """The request for 1-2 more than `reservation` has free, pinned to its type and zone."""
    count = int(reservation["AvailableInstanceCount"]) + rng.randint(1, 2)
    ended = _room_in_the_pool(sim, count)
    body = request_body(sim, rng)
    for optional in ("minCount", "singleZone", "tags", "requirements", "requester"):
        body.pop(optional, None)
    body.update(nodePool=RESERVED_POOL, count=count)
    body["requirements"] = [
        {"key": INSTANCE_TYPE, "operator": "In", "values": [reservation["InstanceType"]]},
        {"key": ZONE, "operator": "In", "values": [reservation["AvailabilityZone"]]},
    ]
    sim.send([body], via_bus=False)
    return f"{count} beside {reservation['AvailableInstanceCount']} free ({ended} ended first)"


def stale_room(sim: Simulation, rng: random.Random) -> str:
    """The sync stops; the team grows one of its active reservations by 1-2 (room no event
    announces); time passes beyond every window that may hide that room (`ReservedFirst.margin`,
    the sync still stopped: the snapshots go stale), then a request for 1-2 more instances than
    EC2 shows free there, pinned to its type and zone, comes to `pool-reserved`. The room must
    be used before on-demand (docs/operations.md: with the sync stopped, room EC2 shows beyond a
    snapshot goes into it, and an exhausted flag no longer holds)."""
    if RESERVED_POOL not in sim.catalog.pools or RESERVED_CLASS not in sim.catalog.classes:
        return reservation_burst(sim, rng)
    room = _room(sim, set(TYPES), set(ZONES))
    if not room:
        return f"no reservation active: created {create_reservation(sim, rng)}"
    reservation = rng.choice(room)
    margin = sim.invariants.reserved.margin
    waited = rng.uniform(margin + 10.0, margin + 120.0)
    sim.pause_sync(waited + rng.uniform(60.0, 240.0))
    grown = int(reservation["TotalInstanceCount"]) + rng.randint(1, 2)
    sim.world.ec2.modify_capacity_reservation(
        CapacityReservationId=reservation["CapacityReservationId"], InstanceCount=grown
    )
    sim.pass_time(waited)
    now = sim.world.ec2.describe_capacity_reservations(
        CapacityReservationIds=[reservation["CapacityReservationId"]]
    )["CapacityReservations"][0]
    if now["State"] != "active":
        return f"grown to {grown}, then {now['State']}"
    return f"grown to {grown}, {waited:.0f}s later: {_burst(sim, rng, now)}"


ROOM_OPERATIONS = {
    "modify_reservation": modify_reservation,
    "foreign_instances": foreign_instances,
    "pause_sync": pause_sync,
    "reservation_burst": reservation_burst,
    "stale_room": stale_room,
}
