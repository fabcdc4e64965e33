"""The cases issue 24 found where the newest features meet the core, drawn from the seed like every
other operation: quotas with group `limits` over several pools, quota and pool applies and deletes
racing submits, priority and preemption changed during a reclaim's grace period, huge ICE caches,
hostile bodies, transaction conflicts everywhere, bursts on one offering's single-flight claim,
interruptible reservations and their interruptions.

Their weights, and the defect each exposes, are in operations.py (`ADVERSARY_WEIGHTS`,
`AWAITING_FIXES`)."""

from __future__ import annotations

import copy
import random
from typing import TYPE_CHECKING, Any

from capacity_launcher.adapters.unavailable_offerings import UnavailableOfferings
from capacity_launcher.domain.capacity.offerings import offering_key
from capacity_launcher.settings import get_settings
from tests.simulation.emulator import Fault
from tests.simulation.operations import (
    FAIR_WEIGHTS,
    GPU_POOL,
    POOLS,
    QUOTA_POOLS,
    QUOTAS,
    RESERVATION_TAG,
    TYPES,
    ZONES,
    _document,
    node_pool_document,
    quota_document,
    request_body,
)
from tests.simulation.world import CONSISTENCY_SECONDS

if TYPE_CHECKING:
    from tests.simulation.scheduler import Simulation

BROAD_POOL = "pool-broad"
# A group limit over both quota pools, below the sum of the nominal quotas there (3 + 3).
GROUP_LIMITS = {"quota-a": "4", "quota-b": "3"}
POLICIES = ("Never", "LowerPriority", "Any")
PRIORITIES = (10, 50, 100, 150)
GRACE_PERIODS = ("30s", "90s", "3m")
NESTING = 5000
HUGE_BODY_BYTES = 240 * 1024  # under SQS's 256 KiB, far over what a request needs
ICE_CACHE_SHARE = (0.6, 1.0)  # of every offering of the broad pool
ICE_MESSAGE = (
    "We currently do not have sufficient capacity in the Availability Zone you requested. Our"
    " system will be working on provisioning additional capacity."
)
BROAD_CLASS = "class-broad"
INTERRUPTIBLE_TYPE = "m5.large"


def quota_variant(name: str, rng: random.Random) -> dict[str, Any]:
    """The quota as at the start, with a drawn priority, fair-sharing weight, reclaim policy and
    grace period."""
    document = quota_document(name, rng.choice(FAIR_WEIGHTS))
    document["spec"]["priority"] = rng.choice(PRIORITIES)
    if document["spec"]["allowBorrowing"] or rng.random() < 0.7:
        document["spec"]["preemption"] = {
            "reclaimWithinCohort": rng.choice(POLICIES),
            "gracePeriod": rng.choice(GRACE_PERIODS),
        }
    return document


def _with_group_limit(sim: Simulation, name: str, on: bool) -> dict[str, Any]:
    """The quota as applied now, with its group limit over both pools set or taken away."""
    document = copy.deepcopy(sim.catalog.quotas.get(name) or quota_document(name))
    group = document["spec"]["resourceGroups"][0]
    group.pop("limits", None)
    if on:
        group["limits"] = {"instances": GROUP_LIMITS[name]}
    return document


def _apply_quota(sim: Simulation, document: dict[str, Any]) -> str:
    """Applied as an operator would: again after a transaction conflict."""
    outcome = sim.apply(document)
    return sim.apply(document) if outcome != "applied" else outcome


# -- quotas -------------------------------------------------------------------------------------


def quota_group_limits(sim: Simulation, rng: random.Random) -> str:
    """A group `limits` on instances summed over pool-1 and pool-3, set or taken away."""
    name = rng.choice(sorted(GROUP_LIMITS))
    on = rng.random() < 0.75
    applied = _apply_quota(sim, _with_group_limit(sim, name, on))
    return f"{name} {'limit' if on else 'no limit'}: {applied}"


def quota_policy_change(sim: Simulation, rng: random.Random) -> str:
    """Priority, fair-sharing weight, reclaimWithinCohort and gracePeriod changed, often while a
    reclaim is open."""
    name = rng.choice(sorted(QUOTAS))
    variant = quota_variant(name, rng)
    limits = (sim.catalog.quotas.get(name) or {}).get("spec", {}).get("resourceGroups", [{}])
    if "limits" in limits[0]:
        variant["spec"]["resourceGroups"][0]["limits"] = limits[0]["limits"]
    preemption = variant["spec"].get("preemption", {})
    weight = variant["spec"].get("fairSharing", {}).get("weight", 1)
    return (
        f"{name} priority {variant['spec']['priority']} weight {weight}"
        f" {preemption.get('reclaimWithinCohort', 'Never')}: {_apply_quota(sim, variant)}"
    )


def reclaim_during_grace(sim: Simulation, rng: random.Random) -> str:
    """team-b borrows all it may in a pool, team-a asks for its nominal quota there (refused: a
    reclaim, enforced under LowerPriority), and the policy changes before the grace period ends
    (quota-a's reclaimWithinCohort to Never, or quota-b's priority above quota-a's)."""
    pool = rng.choice(QUOTA_POOLS)
    lender = copy.deepcopy(sim.catalog.quotas.get("quota-a") or quota_document("quota-a"))
    lender["spec"]["priority"] = 100
    lender["spec"]["preemption"] = {"reclaimWithinCohort": "LowerPriority", "gracePeriod": "30s"}
    _apply_quota(sim, lender)
    borrower = copy.deepcopy(sim.catalog.quotas.get("quota-b") or quota_document("quota-b"))
    if borrower["spec"]["priority"] != 50:  # below the lender's: the reclaim is enforced
        borrower["spec"]["priority"] = 50
        _apply_quota(sim, borrower)
    sim.apply(_roomy_pool(sim, pool, rng))
    borrowers = [_body_for(sim, rng, "team-b", pool) for _ in range(2)]
    borrowers[0]["count"], borrowers[1]["count"] = 2, 3
    sim.send(borrowers, via_bus=False)
    sim.poll_once()
    sim.send([{**_body_for(sim, rng, "team-a", pool), "count": 3}], via_bus=False)
    sim.poll_once()
    change = rng.choice(("lender Never", "borrower first", "unchanged"))
    if change == "lender Never":
        lender["spec"]["preemption"]["reclaimWithinCohort"] = "Never"
        _apply_quota(sim, lender)
    elif change == "borrower first":
        borrower["spec"]["priority"] = 150
        _apply_quota(sim, borrower)
    return f"in {pool}, {change}"


def quota_apply_race(sim: Simulation, rng: random.Random) -> str:
    """A quota tightened (its group limit set), then at once a burst its requesters send."""
    name = rng.choice(sorted(GROUP_LIMITS))
    applied = _apply_quota(sim, _with_group_limit(sim, name, True))
    requester = QUOTAS[name][0][0]
    bodies = [_body_for(sim, rng, requester, rng.choice(QUOTA_POOLS)) for _ in range(4)]
    sim.send(bodies, via_bus=False)
    return f"{name} limit {applied}, 4 sent"


def quota_delete_race(sim: Simulation, rng: random.Random) -> str:
    """A quota deleted, its requester's burst served meanwhile (uncovered now: nothing may launch
    for it in the quota pools), the quota applied again."""
    name = rng.choice(sorted(QUOTAS))
    document = sim.catalog.quotas.get(name) or quota_document(name)
    deleted = sim.delete("CapacityQuota", name)
    sim.world.emulator.clock.advance(2.0)  # moto stamps launches to the second
    start = sim.world.now - 1.0
    requester = QUOTAS[name][0][0]
    bodies = [_body_for(sim, rng, requester, rng.choice(QUOTA_POOLS)) for _ in range(3)]
    sim.send(bodies, via_bus=False)
    sim.poll_once()
    sim.world.emulator.clock.advance(2.0)
    if deleted == "deleted":
        sim.invariants.edges.uncovered(requester, start, sim.world.now - 1.0)
    return f"{name} {deleted}, then {_apply_quota(sim, document)}"


def _roomy_pool(sim: Simulation, name: str, rng: random.Random) -> dict[str, Any]:
    """The pool with room for the whole cohort: 8 instances of m5.large (2 CPUs), on-demand."""
    document = node_pool_document(sim, name, rng)
    document["spec"]["requirements"] = [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
    ]
    document["spec"]["limits"] = {"instances": "8"}
    return document


def _body_for(sim: Simulation, rng: random.Random, requester: str, pool: str) -> dict[str, Any]:
    """A plain request of 1-3 instances: no gang, tags or requirements to refuse it for."""
    body = request_body(sim, rng)
    body.update(requester=requester, nodePool=pool, count=rng.randint(1, 3))
    for optional in ("minCount", "tags", "requirements", "singleZone"):
        body.pop(optional, None)
    return body


# -- pools --------------------------------------------------------------------------------------


def pool_apply_race(sim: Simulation, rng: random.Random) -> str:
    """A pool replaced (or deleted and applied again) and, at once, a burst naming it."""
    name = rng.choice(POOLS)
    outcome = "replaced"
    if rng.random() < 0.4:
        outcome = f"{sim.delete('NodePool', name)}, "
        sim.send([_body_for(sim, rng, rng.choice(("team-x", "ci")), name)], via_bus=False)
        sim.poll_once()
    outcome += sim.apply(node_pool_document(sim, name, rng))
    sim.send([_body_for(sim, rng, "team-x", name) for _ in range(3)], via_bus=rng.random() < 0.3)
    return outcome


# -- the ICE cache and single flight ------------------------------------------------------------


def broad_documents(sim: Simulation) -> list[dict[str, Any]]:
    """A NodeClass in both zones and a pool of every instance type there, on-demand and spot."""
    node_class = _document(
        "NodeClass",
        BROAD_CLASS,
        {
            "imageId": sim.world.image_id,
            "subnetIds": [sim.world.subnets[z] for z in ZONES],
            "securityGroupIds": [sim.world.security_group],
        },
    )
    pool = _document(
        "NodePool",
        BROAD_POOL,
        {
            "nodeClassRef": BROAD_CLASS,
            "weight": 1,
            "requirements": [
                {
                    "key": "karpenter.sh/capacity-type",
                    "operator": "In",
                    "values": ["on-demand", "spot"],
                }
            ],
            "limits": {"instances": "6"},
        },
    )
    return [node_class, pool]


def huge_ice_cache(sim: Simulation, rng: random.Random) -> str:
    """Thousands of dry offerings cached (as many workers' ICE answers would leave them) for the
    broad pool's types, then a request to it."""
    if BROAD_POOL not in sim.catalog.pools:
        for document in broad_documents(sim):
            sim.apply(document)
    settings = get_settings()
    store = UnavailableOfferings(
        settings.unavailable_offerings_table_name,
        settings.ice_ttl_seconds,
        dynamodb=sim.world.dynamodb,
        clock=sim.world.emulator.clock.now,
    )
    offerings = [
        offering_key(c, t, z)
        for t in sim.world.all_instance_types()
        for z in ZONES
        for c in ("on-demand", "spot")
    ]
    dry = offerings[: round(len(offerings) * rng.uniform(*ICE_CACHE_SHARE))]
    store.mark([(key, "InsufficientInstanceCapacity", ICE_MESSAGE) for key in dry])
    sim.catalog.sequence += 1
    body = {"requestId": f"broad-{sim.seed}-{sim.catalog.sequence}", "count": 1}
    sim.send([{**body, "nodePool": BROAD_POOL}], via_bus=False)
    return f"{len(dry)} of {len(offerings)} cached"


def ice_burst(sim: Simulation, rng: random.Random) -> str:
    """Many requests into one pool at once, served by two containers together, every on-demand
    offering's ICE entry expired a moment ago: the evidence on which single flight claims
    (issue 38), so the two containers claim, meet each other's claims and wait on them."""
    pool = rng.choice([p for p in POOLS if p in sim.catalog.pools] or list(POOLS))
    settings = get_settings()
    now = sim.world.emulator.clock.now()
    expired = UnavailableOfferings(
        settings.unavailable_offerings_table_name,
        settings.ice_ttl_seconds,
        dynamodb=sim.world.dynamodb,
        clock=lambda: now - settings.ice_ttl_seconds - 1,
    )
    expired.mark(
        [
            (offering_key("on-demand", t, z), "InsufficientInstanceCapacity", ICE_MESSAGE)
            for t in TYPES
            for z in ZONES
        ]
    )
    bodies = [_body_for(sim, rng, "team-x", pool) for _ in range(rng.randint(6, 12))]
    sim.send(bodies, via_bus=False)
    sim.poll_at_once()
    return f"{len(bodies)} to {pool}"


# What the base catalog (operations.FAULT_CATALOG) leaves out: the remaining calls the service
# makes, and DynamoDB's TransactionConflictException on single-item writes (an item a transaction
# is writing refuses a PutItem, UpdateItem or DeleteItem meanwhile).
EDGE_FAULTS: tuple[tuple[str, str], ...] = (
    ("sqs:SendMessage", "AWS.SimpleQueueService.ServiceUnavailable"),
    ("sqs:ChangeMessageVisibility", "AWS.SimpleQueueService.ServiceUnavailable"),
    ("ec2:DescribeImages", "RequestLimitExceeded"),
    ("dynamodb:GetItem", "InternalServerError"),
    ("dynamodb:Query", "ProvisionedThroughputExceededException"),
    ("dynamodb:PutItem", "TransactionConflictException"),
    ("dynamodb:UpdateItem", "TransactionConflictException"),
    ("dynamodb:DeleteItem", "TransactionConflictException"),
    ("dynamodb:BatchGetItem", "InternalServerError"),
    ("dynamodb:TransactWriteItems", "InternalServerError"),
)


def edge_fault(sim: Simulation, rng: random.Random) -> str:
    """A transient fault on a call, or of a kind, the base catalog does not inject."""
    operation, code = rng.choice(EDGE_FAULTS)
    if rng.random() < 0.5:
        fault = Fault(operation, code, times=rng.randint(1, 3))
    else:
        fault = Fault(operation, code, rate=rng.choice((0.2, 0.5)), seed=rng.randrange(2**31))
    sim.add_fault(fault, duration=rng.uniform(5.0, 90.0), permanent=False)
    return f"{operation} {code}"


def conflict_storm(sim: Simulation, rng: random.Random) -> str:
    """DynamoDB cancelling many transactions that touch an item another touched, for a while."""
    rate = rng.choice((0.3, 0.5, 0.8))
    sim.conflicts(rate, duration=rng.uniform(10.0, 90.0))
    return f"rate {rate}"


# -- hostile bodies -----------------------------------------------------------------------------


def nested_body(sim: Simulation, rng: random.Random) -> str:
    """A body nested thousands deep, with a valid requestId: it has a key, so a Rejected record."""
    sim.catalog.sequence += 1
    request_id = f"deep-{sim.seed}-{sim.catalog.sequence}"
    depth = rng.randint(NESTING // 2, NESTING)
    text = f'{{"requestId": "{request_id}", "count": 1, "tags": ' + '{"a": ' * depth + "1"
    text += "}" * depth + "}"
    sim.send_keyed(request_id, text)
    return f"depth {depth}"


def huge_body(sim: Simulation, rng: random.Random) -> str:
    """A body near SQS's limit with a valid requestId: a huge tag value, or a huge unknown field."""
    body = request_body(sim, rng)
    if rng.random() < 0.5:
        body["tags"] = {"notes": "x" * HUGE_BODY_BYTES}
    else:
        body["padding"] = ["y" * 1024] * (HUGE_BODY_BYTES // 1030)
    sim.send([body], via_bus=False)
    return "sent"


# -- interruptible reservations -----------------------------------------------------------------


def interruptible_reservation(sim: Simulation, rng: random.Random) -> str:
    """An ODCR lending part of itself as an interruptible reservation the selector class finds."""
    zone = rng.choice(ZONES)
    source = sim.world.ec2.create_capacity_reservation(
        InstanceType=INTERRUPTIBLE_TYPE,
        InstancePlatform="Linux/UNIX",
        AvailabilityZone=zone,
        InstanceCount=4,
        InstanceMatchCriteria="targeted",
    )["CapacityReservation"]["CapacityReservationId"]
    sim.world.emulator.clock.advance(CONSISTENCY_SECONDS + 1)  # the source must be active
    sim.world.emulator.settle()
    sim.world.ec2.create_interruptible_capacity_reservation_allocation(
        CapacityReservationId=source,
        InstanceCount=rng.randint(1, 3),
        TagSpecifications=[
            {
                "ResourceType": "capacity-reservation",
                "Tags": [{"Key": k, "Value": v} for k, v in RESERVATION_TAG.items()],
            }
        ],
    )
    sim.catalog.interruptible_sources.append(source)
    return f"from {source}"


def interrupt(sim: Simulation, rng: random.Random) -> str:
    """The owner takes its lent capacity back: a warning, then the instances beyond it end."""
    if not sim.catalog.interruptible_sources:
        return "none"
    source = rng.choice(sim.catalog.interruptible_sources)
    sim.world.ec2.update_interruptible_capacity_reservation_allocation(
        CapacityReservationId=source, TargetInstanceCount=rng.randint(0, 1)
    )
    return "interrupted"


# -- Capacity Blocks ------------------------------------------------------------------------------


def block_end_request(sim: Simulation, rng: random.Random) -> str:
    """Issue 27: the clock jumps to within an hour of a block's end (before EC2's 30-minute
    terminations) and a request for the GPU pool arrives. From 45 minutes before the end the
    service must not launch into the block (judged: "nothing launches into an ending block");
    before that it may."""
    now = sim.world.now
    ending = sorted(
        (view.end, view.reservation_id)
        for view in sim.world.reservations().values()
        if view.kind == "capacity-block" and view.end is not None and view.end - 31 * 60 > now
    )
    if not ending:
        return "no block ending ahead"
    end, reservation_id = ending[0]
    jumped = sim.jump_to(max(now + 1.0, end - rng.uniform(31 * 60, 60 * 60)))
    if not jumped.startswith("jumped"):
        return jumped
    body = request_body(sim, rng)
    body.update(nodePool=GPU_POOL, count=1)
    for optional in ("minCount", "requirements", "singleZone", "waitForCapacityUntil"):
        body.pop(optional, None)
    sim.send([body], via_bus=False)
    return f"{(end - sim.world.now) / 60:.0f} min before {reservation_id} ends"


ADVERSARY = {
    "quota_group_limits": quota_group_limits,
    "quota_policy_change": quota_policy_change,
    "quota_apply_race": quota_apply_race,
    "reclaim_during_grace": reclaim_during_grace,
    "quota_delete_race": quota_delete_race,
    "pool_apply_race": pool_apply_race,
    "huge_ice_cache": huge_ice_cache,
    "ice_burst": ice_burst,
    "conflict_storm": conflict_storm,
    "edge_fault": edge_fault,
    "nested_body": nested_body,
    "huge_body": huge_body,
    "interruptible_reservation": interruptible_reservation,
    "interrupt": interrupt,
    "block_end_request": block_end_request,
}
