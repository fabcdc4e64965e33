"""What the many producers, operators and the outside world do to the system, drawn at random
from one seeded generator: configuration, launch requests, reservations, capacity, instances,
faults and crashes. A Profile weighs them; a weight of 0 leaves an operation out."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from tests.simulation.cohort_operations import COHORT_WEIGHTS
from tests.simulation.emulator import Fault
from tests.simulation.fair_share import CONTEND_WEIGHTS, ROOMS
from tests.simulation.priority_operations import PRIORITY_OPERATIONS, PRIORITY_WEIGHTS
from tests.simulation.queue_operations import QUEUE_WEIGHTS
from tests.simulation.static_operations import STATIC_OPERATIONS, STATIC_WEIGHTS

if TYPE_CHECKING:
    from tests.simulation.scheduler import Simulation

TYPES = ("m5.large", "m5.xlarge", "c5.large")
ZONES = ("us-east-1a", "us-east-1b")
CAPACITY_TYPES = ("reserved", "on-demand")
POOLS = ("pool-0", "pool-1", "pool-2", "pool-3")
CLASSES = ("class-open", "class-selector", "class-none")
RESERVATION_TAG = {"simulation": "yes"}
# Capacity Blocks: a GPU type EC2 sells blocks of, a NodeClass selecting the blocks by tag and a
# pool of reserved capacity only, applied at the start and never replaced.
GPU_TYPE = "p4d.24xlarge"
GPU_CLASS, GPU_POOL = "class-gpu", "pool-gpu"
BLOCK_TAG = {"simulation-block": "yes"}
# Team quotas (docs/quotas.md): three teams in one cohort over two of the pools; requesters are
# drawn from those teams, from none, and from a team no quota covers.
COHORT = "sim"
QUOTA_POOLS = ("pool-1", "pool-3")
REQUESTERS = ("team-a", "team-b", "ci", "team-x")
# name → (requesters, priority, borrowing, {resource: (nominal, borrowingLimit, lendingLimit)})
QUOTAS: dict[str, tuple[list[str], int, bool, dict[str, tuple[str, str | None, str | None]]]] = {
    "quota-a": (
        ["team-a"],
        100,
        True,
        {"instances": ("3", "2", None), "cpu": ("8", "4", None)},
    ),
    "quota-b": (
        ["team-b"],
        50,
        True,
        {"instances": ("2", "3", None), "cpu": ("6", None, None)},
    ),
    "quota-ci": (
        ["ci"],
        10,
        False,
        {"instances": ("2", None, "1"), "cpu": ("6", None, None)},
    ),
}

# limits.unready on some pools (the hub field): a count, or a percentage of the pool's instances.
UNREADY_SHARE = 0.5
UNREADY_LIMITS: tuple[int | str, ...] = (0, 1, 2, "50%", "25%")

# Every AWS operation the service calls, with the faults real AWS raises on it.
THROTTLING = {"ec2": "RequestLimitExceeded", "dynamodb": "ThrottlingException"}
FAULT_CATALOG: tuple[tuple[str, str], ...] = (
    ("ec2:CreateFleet", "RequestLimitExceeded"),
    ("ec2:CreateFleet", "InternalError"),
    ("ec2:CreateFleet", "ServiceUnavailable"),
    ("ec2:CreateFleet", "Unavailable"),
    ("ec2:DescribeInstances", "RequestLimitExceeded"),
    ("ec2:DescribeInstances", "InvalidInstanceID.NotFound"),
    ("ec2:CreateTags", "InvalidInstanceID.NotFound"),
    ("ec2:TerminateInstances", "RequestLimitExceeded"),
    ("ec2:CreateLaunchTemplate", "RequestLimitExceeded"),
    ("ec2:DescribeLaunchTemplates", "InternalError"),
    ("ec2:DescribeInstanceTypes", "RequestLimitExceeded"),
    ("ec2:DescribeInstanceTypeOfferings", "InternalError"),
    ("ec2:DescribeSubnets", "RequestLimitExceeded"),
    ("ec2:DescribeCapacityReservations", "RequestLimitExceeded"),
    ("dynamodb:GetItem", "ProvisionedThroughputExceededException"),
    ("dynamodb:PutItem", "ConditionalCheckFailedException"),
    ("dynamodb:PutItem", "InternalServerError"),
    ("dynamodb:UpdateItem", "ConditionalCheckFailedException"),
    ("dynamodb:UpdateItem", "ProvisionedThroughputExceededException"),
    ("dynamodb:Query", "ThrottlingException"),
    ("dynamodb:BatchGetItem", "ProvisionedThroughputExceededException"),
    ("dynamodb:BatchWriteItem", "ProvisionedThroughputExceededException"),
    ("dynamodb:TransactWriteItems", "TransactionConflictException"),
    ("dynamodb:TransactWriteItems", "TransactionCanceledException"),
    ("dynamodb:TransactWriteItems", "ThrottlingException"),
    ("dynamodb:DeleteItem", "ThrottlingException"),
    ("dynamodb:Scan", "ThrottlingException"),
    ("events:PutEvents", "InternalException"),
    ("events:PutEvents", "ThrottlingException"),
)


@dataclass(frozen=True)
class Profile:
    name: str
    steps: int
    weights: dict[str, float]
    quiesce_every: int = 200
    concurrent_poll: float = 0.05  # chance a step's poll is two containers at once
    # Two containers at once share one receive's messages (as the mapping's pollers do), so the
    # bodies of one producer's batch race each other; otherwise only two full receives do.
    split_batches: bool = False
    tick: tuple[float, float] = (0.5, 4.0)  # simulated seconds between steps
    event_delay: tuple[float, float] = (0.0, 240.0)  # EC2 events arrive this late
    duplicate_events: float = 0.2
    submit_batch: tuple[int, int] = (1, 4)  # bodies per producer submission
    wall_minutes: float | None = None  # soak: keep going until this much wall time passed


# Room in the selected reservations changing under the service (reservation_operations.py): a
# reservation grown or shrunk, someone else's instances run in one or ended, the sync stopped
# for minutes, and requests for more than a selected reservation's room (judged by "a launch
# uses a free selected reservation first", reserved_first.py).
ROOM_WEIGHTS: dict[str, float] = {
    "modify_reservation": 1.5,
    "foreign_instances": 2,
    "pause_sync": 0.5,
    "reservation_burst": 2,
    "stale_room": 0.3,
}

# An expired lease against the pool's limits (lease_operations.py, issue 34): a worker killed
# between its lease and its intent, the clock past its lease with the sync stopped, and a
# redelivery in that window under whose launch the late sync and another request come.
LEASE_WEIGHTS: dict[str, float] = {
    "kill_after_lease": 3,
    "expire_unswept": 3,
    "redeliver_in_window": 3,
}

# Issue 34's other draws: the hub-fields annotation, hostile and legitimate (hub_fields.py), and
# CapacityQuotas re-applied unchanged by a GitOps loop or changed over a pool nobody launches in,
# between launches and under them (quota_generations.py).
HUB_FIELD_WEIGHTS: dict[str, float] = {"hostile_hub_fields": 1, "reapply_as_read": 1}
QUOTA_GENERATION_WEIGHTS: dict[str, float] = {"gitops_reapply": 2, "change_other_quota": 1}
# What the short and long runs draw of issue 34 (the expired lease at a low weight in `short`:
# its clock moves and killed workers cost a short seed seconds).
ISSUE34_WEIGHTS: dict[str, float] = {**HUB_FIELD_WEIGHTS, **QUOTA_GENERATION_WEIGHTS}
SHORT_LEASE_WEIGHTS: dict[str, float] = dict.fromkeys(LEASE_WEIGHTS, 0.3)
SOAK_LEASE_WEIGHTS: dict[str, float] = dict.fromkeys(LEASE_WEIGHTS, 1.0)

BASE_WEIGHTS: dict[str, float] = {
    "submit": 30,
    "duplicate": 4,
    "shared_request_id": 3,
    "invalid_request": 3,
    "apply_node_class": 2,
    "apply_node_pool": 4,
    "delete_node_pool": 1,
    "delete_node_class": 1,
    "invalid_document": 1,
    "create_reservation": 2,
    "cancel_reservation": 1,
    "dry_offering": 2,
    "wet_offering": 2,
    "stop_instance": 3,
    "start_instance": 2,
    "terminate_instance": 10,
    "transient_fault": 4,
    "crash": 3,
    "permanent_outage": 0.2,
    "wait": 5,
    "buy_capacity_block": 1,
    "create_future_reservation": 0.5,
    "advance_clock": 4,
    **ROOM_WEIGHTS,
    **PRIORITY_WEIGHTS,
    **STATIC_WEIGHTS,
}

# Issue 24's cases (adversary.py): each with its weight and the defect it exposed. A case whose
# defect is named here is drawn only by `adversarial` and its focused profile, not by the short
# profile or the soak: the place to park a case whose fix has not landed. Every fix has landed.
AWAITING_FIXES: frozenset[str] = frozenset()
ADVERSARY_WEIGHTS: dict[str, tuple[float, str | None]] = {
    "quota_group_limits": (2, "group-limits"),
    "quota_policy_change": (3, "reclaim-redecision"),
    "quota_apply_race": (2, "group-limits"),  # judged by the group limit it sets
    "reclaim_during_grace": (2, "reclaim-redecision"),
    "quota_delete_race": (1, "quota-freshness"),
    "pool_apply_race": (2, None),
    "huge_ice_cache": (0.5, "record-size"),
    "ice_burst": (2, None),
    "conflict_storm": (1, None),
    "edge_fault": (2, None),
    "nested_body": (1, "nested-bodies"),
    "huge_body": (1, None),
    "interruptible_reservation": (1, None),
    "interrupt": (1, None),
    "block_end_request": (1, None),  # issue 27: a request in a block's last hour
}


def adversary_weights(*, everything: bool = False) -> dict[str, float]:
    """Issue 24's cases a profile draws: all, or those no pending fix holds back."""
    return {
        name: weight
        for name, (weight, defect) in ADVERSARY_WEIGHTS.items()
        if everything or defect not in AWAITING_FIXES
    }


def _focused(name: str, defect: str) -> Profile:
    """20 steps of what exposes one defect, with a few requests and waits between: its finding
    on main in a minute, and its replay command."""
    weights = {n: 3.0 for n, (_, d) in ADVERSARY_WEIGHTS.items() if d == defect}
    return Profile(
        name,
        steps=20,
        weights={"submit": 2, "wait": 2, **weights},
        quiesce_every=10,
        split_batches=True,
    )


PROFILES = {
    "short": Profile(
        "short",
        steps=60,
        weights={**BASE_WEIGHTS, **adversary_weights(), **ISSUE34_WEIGHTS, **SHORT_LEASE_WEIGHTS},
        quiesce_every=30,
    ),
    # Every case issue 24 asks for, whether or not its fix has merged: finds the defects on main.
    "adversarial": Profile(
        "adversarial",
        steps=60,
        weights={
            **BASE_WEIGHTS,
            **adversary_weights(everything=True),
            **ISSUE34_WEIGHTS,
            **SHORT_LEASE_WEIGHTS,
        },
        quiesce_every=30,
        split_batches=True,
    ),
    **{
        f"issue24-{defect}": _focused(f"issue24-{defect}", defect)
        for defect in sorted({d for _, d in ADVERSARY_WEIGHTS.values() if d is not None})
    },
    "soak": Profile(
        "soak",
        steps=10**9,
        weights={
            **BASE_WEIGHTS,
            **adversary_weights(),
            **ISSUE34_WEIGHTS,
            **SOAK_LEASE_WEIGHTS,
            **QUEUE_WEIGHTS,
            "submit": 45,
        },
        quiesce_every=400,
        submit_batch=(2, 8),
        wall_minutes=20.0,
    ),
    # Issue 37: requests that wait for room in their pools' admission queues, beside the others,
    # with instances ending and pools applied (queue_invariants.py), and the team quotas' cohort
    # given parents, in a tree of three or four levels drawn and changed (cohort_operations.py).
    "queue": Profile(
        "queue",
        steps=60,
        weights={
            **QUEUE_WEIGHTS,
            **COHORT_WEIGHTS,
            "submit": 6,
            "terminate_instance": 4,
            "stop_instance": 1,
            "apply_node_pool": 1,
            "wait": 4,
            "advance_clock": 1,
            **PRIORITY_WEIGHTS,
        },
        quiesce_every=30,
    ),
    # Issue 37's preemption on the full fit (preemption_invariants.py): waiting requests of the
    # highest class preempting under drawn policies, in pools whose limit is lowered below what
    # runs there, with the clock moved past the grace periods for the sync to decide again.
    "preemption": Profile(
        "preemption",
        steps=40,
        weights={
            "preempting_waiter": 3,
            "preempting_waiter_at_limits": 3,
            "preemption_policy": 1,
            "apply_priority_class": 2,
            "submit": 2,
            "terminate_instance": 1,
            "wait": 3,
            "advance_clock": 2,
        },
        quiesce_every=20,
    ),
    # Issue 37's fair share bound under sustained contention (fair_share.py): one room a step
    # in a pool of its own, three teams of drawn weights keeping requests waiting for it; the
    # events come within the step, so each room is taken by the wake it sends.
    "fair-share": Profile(
        "fair-share",
        steps=ROOMS + 2,
        weights=CONTEND_WEIGHTS,
        quiesce_every=10**9,
        concurrent_poll=0.0,
        tick=(1.0, 3.0),
        event_delay=(0.0, 0.5),
    ),
    # Static NodePools (static_operations.py): applied with other replicas and limits, their
    # instances stopped, started and terminated, requests naming them; judged at each
    # quiescence (static_invariants.py).
    "static": Profile(
        "static",
        steps=60,
        weights={
            "apply_static_pool": 3,
            "forge_static_launch": 1,
            "submit": 5,
            "stop_instance": 3,
            "start_instance": 2,
            "terminate_instance": 5,
            "transient_fault": 1,
            "crash": 1,
            "wait": 2,
            "advance_clock": 1,
        },
        quiesce_every=10,
    ),
    # Before a Capacity Block ends (issue 39; static_operations.py, block_end_invariants.py):
    # blocks bought, activated and expired by the clock, the block pool applied with a drawn
    # capacityBlockEnd, requests that opt in (their pool's bound drawn), the clock moved into
    # the lead (now and then a minute into a lead that holds instances, then a quiescence that
    # judges the evacuation), instances terminated, workers crashed mid-delivery (redeliveries).
    "block-end": Profile(
        "block-end",
        steps=40,
        weights={
            "buy_capacity_block": 2,
            "apply_block_end_pool": 2,
            "opted_in_request": 2,
            "advance_clock": 2,
            "jump_into_block_lead": 3,
            "evacuation_at_quiescence": 2,
            "terminate_instance": 1,
            "crash": 1,
            "wait": 2,
        },
        quiesce_every=5,
    ),
    # Room in selected reservations changing under requests for more than it (reserved_first.py):
    # the sync stopped for minutes, reservations grown and shrunk, someone else's instances run
    # and ended, the service's own ended, with waits between.
    "reserved-first": Profile(
        "reserved-first",
        steps=60,
        weights={
            **ROOM_WEIGHTS,
            "reservation_burst": 5,
            "stale_room": 2,
            "foreign_instances": 3,
            "modify_reservation": 2,
            "pause_sync": 1,
            "submit": 2,
            "wait": 6,
            "terminate_instance": 2,
            "stop_instance": 1,
            "start_instance": 1,
            "create_reservation": 1,
            "cancel_reservation": 0.5,
        },
        quiesce_every=30,
    ),
    # ODCR groups (group_operations.py, group_invariants.py): a resource group of targeted
    # reservations made, grown (members with an end date among them), members resized and
    # cancelled; requests into a reserved-only pool and a reserved-then-on-demand pool on a
    # NodeClass targeting it, served by two containers at once; workers killed just after
    # CreateFleet or DescribeInstances (replays), EC2's faults, instances stopped, started and
    # ended, the sync paused, the clock jumped to the members' ends.
    "groups": Profile(
        "groups",
        steps=40,
        weights={
            "make_group": 2,
            "change_member": 2,
            "group_requests": 6,
            "group_crash": 2,
            "transient_fault": 2,
            "crash": 1,
            "stop_instance": 1,
            "start_instance": 1,
            "terminate_instance": 3,
            "pause_sync": 0.5,
            "advance_clock": 0.5,
            "wait": 3,
        },
        quiesce_every=20,
        concurrent_poll=0.3,
        split_batches=True,
    ),
    # An expired lease taken up, reclaimed under its launch, its room leased again
    # (lease_operations.py): judged by "live <= limit (every step)".
    "expired-lease": Profile(
        "expired-lease",
        steps=30,
        weights={**LEASE_WEIGHTS, "submit": 2, "terminate_instance": 1},
        quiesce_every=15,
        concurrent_poll=0.0,
    ),
    # The hub-fields annotation: hostile applies and `get | apply` in every served version,
    # among pool changes and requests (hub_fields.py).
    "hub-fields": Profile(
        "hub-fields",
        steps=20,
        weights={
            **HUB_FIELD_WEIGHTS,
            "hostile_hub_fields": 4,
            "submit": 3,
            "apply_node_pool": 1,
            "apply_node_class": 1,
            "wait": 1,
        },
        quiesce_every=10,
        concurrent_poll=0.0,
    ),
    # A GitOps loop re-applying unchanged quotas and a quota over another pool changed, between
    # launches and under them, among requests into the quota pools (quota_generations.py).
    "quota-generations": Profile(
        "quota-generations",
        steps=20,
        weights={**QUOTA_GENERATION_WEIGHTS, "submit": 3, "wait": 1, "terminate_instance": 1},
        quiesce_every=10,
        concurrent_poll=0.0,
    ),
    # The determinism test's: short, and two containers at once on half the steps.
    "replay": Profile(
        "replay",
        steps=20,
        weights={
            **BASE_WEIGHTS,
            **adversary_weights(everything=True),
            **ISSUE34_WEIGHTS,
            **SHORT_LEASE_WEIGHTS,
        },
        quiesce_every=10,
        concurrent_poll=0.5,
        submit_batch=(2, 6),
        split_batches=True,
    ),
    # limits.unready and PriorityClasses (unready_invariants.py, priority_invariants.py): pools
    # replaced, requests, instances ended and the clock moved, among the classes' operations.
    "features": Profile(
        "features",
        steps=40,
        weights={
            "submit": 10,
            "wait": 3,
            "apply_node_pool": 2,
            "terminate_instance": 2,
            "advance_clock": 1,
            **PRIORITY_WEIGHTS,
        },
        quiesce_every=20,
    ),
    # Faults, crashes and outages off: what must hold on a calm day.
    "calm": Profile(
        "calm",
        steps=60,
        weights={
            **BASE_WEIGHTS,
            "transient_fault": 0,
            "crash": 0,
            "permanent_outage": 0,
        },
        quiesce_every=30,
        concurrent_poll=0.0,
    ),
}


@dataclass
class Catalog:
    """What the operator has applied, as the simulation believes it to be."""

    classes: dict[str, dict[str, Any]] = field(default_factory=dict)
    pools: dict[str, dict[str, Any]] = field(default_factory=dict)
    reservations: list[str] = field(default_factory=list)
    submitted: list[str] = field(default_factory=list)  # bodies, for duplicates
    sequence: int = 0
    quotas: dict[str, dict[str, Any]] = field(default_factory=dict)
    changed_at: list[float] = field(default_factory=list)  # NodePool/NodeClass changes
    last_changed: dict[str, float] = field(default_factory=dict)  # "Kind/name" → when
    interruptible_sources: list[str] = field(default_factory=list)  # ODCRs lending some
    foreign: list[str] = field(default_factory=list)  # someone else's instances, not terminated
    forged: list[str] = field(default_factory=list)  # ids shaped as the sync's static launches
    opted_in: list[str] = field(default_factory=list)  # requests with capacityBlockEnd
    group_arn: str | None = None  # the ODCR group (group_operations.py), once made
    group_members: list[str] = field(default_factory=list)  # every reservation grouped in it


# spec.fairSharing.weight drawn for each quota (issue 37's fair sharing; None: the default 1,
# the field left out): the wake's order among waiting requests of one priority depends on it.
FAIR_WEIGHTS: tuple[int | str | None, ...] = (None, 0, "0.5", 1, 2, 3)


def quota_document(name: str, weight: int | str | None = None) -> dict[str, Any]:
    requesters, priority, borrowing, amounts = QUOTAS[name]
    resources = []
    for resource, (nominal, borrowing_limit, lending_limit) in amounts.items():
        entry = {"name": resource, "nominalQuota": nominal}
        if borrowing_limit is not None:
            entry["borrowingLimit"] = borrowing_limit
        if lending_limit is not None:
            entry["lendingLimit"] = lending_limit
        resources.append(entry)
    spec: dict[str, Any] = {
        "requesters": requesters,
        "cohort": COHORT,
        "priority": priority,
        "allowBorrowing": borrowing,
        "resourceGroups": [
            {
                "coveredResources": list(amounts),
                "flavors": [{"name": pool, "resources": resources} for pool in QUOTA_POOLS],
            }
        ],
    }
    if weight is not None:
        spec["fairSharing"] = {"weight": weight}
    return _document("CapacityQuota", name, spec)


def gpu_documents(sim: Simulation, rng: random.Random) -> list[dict[str, Any]]:
    """A NodeClass selecting the purchased blocks, and a pool of reserved GPU capacity only."""
    node_class = node_class_document(sim, GPU_CLASS, rng)
    node_class["spec"]["subnetIds"] = [sim.world.subnets[z] for z in ZONES]
    node_class["spec"]["capacityReservationSelectorTerms"] = [{"tags": BLOCK_TAG}]
    pool = _document(
        "NodePool",
        GPU_POOL,
        {
            "nodeClassRef": GPU_CLASS,
            "weight": rng.randint(1, 50),
            "requirements": [
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [GPU_TYPE]},
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved"]},
            ],
            "limits": {"instances": "4"},
        },
    )
    return [node_class, pool]


def node_class_document(sim: Simulation, name: str, rng: random.Random) -> dict[str, Any]:
    zones = rng.sample(ZONES, rng.randint(1, 2))
    spec: dict[str, Any] = {
        "imageId": sim.world.image_id,
        "subnetIds": [sim.world.subnets[z] for z in zones],
        "securityGroupIds": [sim.world.security_group],
        "tags": {"team": "ml"},
    }
    if name == "class-selector":
        spec["capacityReservationSelectorTerms"] = [{"tags": RESERVATION_TAG}]
    elif name == "class-none":
        spec["capacityReservationSpec"] = {"capacityReservationPreference": "none"}
    return _document("NodeClass", name, spec)


def node_pool_document(
    sim: Simulation, name: str, rng: random.Random, *, unready: bool = False
) -> dict[str, Any]:
    """A pool drawn from the seed; `unready`: with an instances limit and `limits.unready`."""
    types = rng.sample(TYPES, rng.randint(1, len(TYPES)))
    # Mostly pools that can launch on-demand; some reserved-only ones, dry until a reservation.
    capacity = rng.choices((list(CAPACITY_TYPES), ["on-demand"], ["reserved"]), (5, 3, 2))[0]
    spec: dict[str, Any] = {
        "nodeClassRef": rng.choice(list(sim.catalog.classes) or list(CLASSES)),
        "weight": rng.randint(1, 50),
        "requirements": [
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": types},
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": capacity},
        ],
    }
    if unready or rng.random() < 0.95:
        spec["limits"] = {"instances": str(rng.randint(1, 8))}
        if unready or rng.random() < UNREADY_SHARE:  # docs/provisioner.md, "limits.unready"
            spec["limits"]["unready"] = rng.choice(UNREADY_LIMITS)
    return _document("NodePool", name, spec)


def _document(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "capacity-launcher/v1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": spec,
    }


def _limit(document: dict[str, Any]) -> int | None:
    limits = document["spec"].get("limits") or {}
    return int(limits["instances"]) if "instances" in limits else None


def request_body(
    sim: Simulation, rng: random.Random, request_id: str | None = None
) -> dict[str, Any]:
    """A valid launch request, each optional field present or absent at random."""
    sim.catalog.sequence += 1
    count = rng.choice((1, 1, 1, 2, 2, 3, 4))
    body: dict[str, Any] = {
        "requestId": request_id or f"req-{sim.seed}-{sim.catalog.sequence}",
        "count": count,
    }
    if rng.random() < 0.75:
        known = list(sim.catalog.pools)
        body["nodePool"] = rng.choice(known) if known and rng.random() < 0.9 else rng.choice(POOLS)
    if rng.random() < 0.6:
        body["requester"] = rng.choice(REQUESTERS)
    if rng.random() < 0.35:  # a gang: mostly of two or more
        body["minCount"] = rng.randint(min(2, count), count)
    if rng.random() < 0.2:
        body["singleZone"] = rng.random() < 0.7
    if rng.random() < 0.3:
        body["tags"] = rng.choice(
            ({"project": "llm"}, {"team": "finance"}, {"cost": "x", "run": "7"})
        )
    if rng.random() < 0.3:
        body["requirements"] = [
            rng.choice(
                (
                    {
                        "key": "node.kubernetes.io/instance-type",
                        "operator": "In",
                        "values": [rng.choice(TYPES)],
                    },
                    {
                        "key": "topology.kubernetes.io/zone",
                        "operator": "In",
                        "values": [rng.choice(ZONES)],
                    },
                    {
                        "key": "karpenter.sh/capacity-type",
                        "operator": "In",
                        "values": ["on-demand"],
                    },
                    {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Lt", "values": ["3"]},
                )
            )
        ]
    return body


INVALID_BODIES = (
    lambda rid: {"requestId": rid, "count": 0},
    lambda rid: {"requestId": rid, "count": 3, "minCount": 4},
    lambda rid: {"requestId": rid, "count": 501},
    lambda rid: {"requestId": rid, "count": 1, "tags": {"capacity-launcher:managed": "false"}},
    lambda rid: {"requestId": rid, "count": 1, "imageId": "ami-evil"},
    lambda rid: {"requestId": rid},
    lambda rid: {"requestId": "bad id!", "count": 1},
    lambda rid: "not json at all {",
)


# -- operations ---------------------------------------------------------------------------------


def submit(sim: Simulation, rng: random.Random) -> str:
    bodies = [request_body(sim, rng) for _ in range(rng.randint(*sim.profile.submit_batch))]
    via_bus = rng.random() < 0.3
    sim.send(bodies, via_bus=via_bus)
    return "bus" if via_bus else "sqs"


def duplicate(sim: Simulation, rng: random.Random) -> str:
    if not sim.catalog.submitted:
        return "nothing yet"
    sim.send_raw([rng.choice(sim.catalog.submitted)])
    return "sent"


def shared_request_id(sim: Simulation, rng: random.Random) -> str:
    """Different bodies with one requestId in one batch: a valid one and an invalid or other one."""
    first = request_body(sim, rng)
    if rng.random() < 0.5:
        second: Any = INVALID_BODIES[rng.randrange(4)](first["requestId"])
        outcome = "valid+invalid"
    else:
        second = {**request_body(sim, rng, first["requestId"]), "count": first["count"] % 4 + 1}
        outcome = "two valid"
    pair = [first, second] if rng.random() < 0.5 else [second, first]
    sim.send(pair, via_bus=False)
    return outcome


def invalid_request(sim: Simulation, rng: random.Random) -> str:
    sim.catalog.sequence += 1
    index = rng.randrange(len(INVALID_BODIES))
    sim.send([INVALID_BODIES[index](f"bad-{sim.seed}-{sim.catalog.sequence}")], via_bus=False)
    return f"kind {index}"


def apply_node_class(sim: Simulation, rng: random.Random) -> str:
    name = rng.choice(CLASSES)
    return sim.apply(node_class_document(sim, name, rng))


def apply_node_pool(sim: Simulation, rng: random.Random) -> str:
    name = rng.choice(POOLS)
    return sim.apply(node_pool_document(sim, name, rng))


def delete_node_pool(sim: Simulation, rng: random.Random) -> str:
    return sim.delete("NodePool", rng.choice(POOLS))


def delete_node_class(sim: Simulation, rng: random.Random) -> str:
    return sim.delete("NodeClass", rng.choice(CLASSES))


def invalid_document(sim: Simulation, rng: random.Random) -> str:
    choice = rng.randrange(4)
    if choice == 0:
        document = node_class_document(sim, "class-open", rng)
        document["spec"]["capacityReservationSpec"] = {
            "capacityReservationPreference": "open",
            "capacityReservationTarget": {"capacityReservationId": "cr-0123456789abcdef0"},
        }
    elif choice == 1:
        # A pool naming a class not yet applied is accepted (order-free apply waits on it);
        # a reference that cannot be a name at all is refused.
        document = node_pool_document(sim, "pool-0", rng)
        document["spec"]["nodeClassRef"] = "Class Missing"
    elif choice == 2:
        document = node_pool_document(sim, "pool-1", rng)
        document["spec"]["requirements"][0]["operator"] = "Around"
    else:
        document = node_pool_document(sim, "pool-2", rng)
        document["spec"]["limits"] = {"instances": "-3"}
    outcome = sim.apply(document)
    if outcome == "applied":
        sim.invariants._violate(
            "invalid documents refused", f"accepted: {json.dumps(document)[:200]}"
        )
    return outcome


def create_reservation(sim: Simulation, rng: random.Random) -> str:
    criteria = rng.choice(("targeted", "open"))
    answer = sim.world.ec2.create_capacity_reservation(
        InstanceType=rng.choice(TYPES),
        InstancePlatform="Linux/UNIX",
        AvailabilityZone=rng.choice(ZONES),
        InstanceCount=rng.randint(1, 4),
        InstanceMatchCriteria=criteria,
        TagSpecifications=[
            {
                "ResourceType": "capacity-reservation",
                "Tags": [{"Key": k, "Value": v} for k, v in RESERVATION_TAG.items()],
            }
        ],
    )
    sim.catalog.reservations.append(answer["CapacityReservation"]["CapacityReservationId"])
    return criteria


def buy_capacity_block(sim: Simulation, rng: random.Random) -> str:
    """DescribeCapacityBlockOfferings, then PurchaseCapacityBlock of one in our zones."""
    offerings = sim.world.ec2.describe_capacity_block_offerings(
        InstanceType=GPU_TYPE, InstanceCount=rng.randint(1, 3), CapacityDurationHours=24
    )["CapacityBlockOfferings"]
    ours = [o for o in offerings if o["AvailabilityZone"] in ZONES]
    if not ours:
        return "no offering"
    chosen = ours[0] if rng.random() < 0.7 else rng.choice(ours)
    bought = sim.world.ec2.purchase_capacity_block(
        CapacityBlockOfferingId=chosen["CapacityBlockOfferingId"],
        InstancePlatform="Linux/UNIX",
        TagSpecifications=[
            {
                "ResourceType": "capacity-reservation",
                "Tags": [{"Key": k, "Value": v} for k, v in BLOCK_TAG.items()],
            }
        ],
    )
    del bought  # a block can be neither modified nor cancelled: kept out of catalog.reservations
    return f"{chosen['InstanceCount']} from {chosen['StartDate']:%d %H:%M}"


def create_future_reservation(sim: Simulation, rng: random.Random) -> str:
    """A future-dated ODCR (5 days ahead at least, 14 days' commitment, 32 vCPUs or more) the
    selector NodeClass will find once it is active."""
    start = datetime.fromtimestamp(sim.world.now, UTC) + timedelta(days=5, hours=rng.randint(1, 30))
    answer = sim.world.ec2.create_capacity_reservation(
        InstanceType="m5.xlarge",
        InstancePlatform="Linux/UNIX",
        AvailabilityZone=rng.choice(ZONES),
        InstanceCount=8,
        InstanceMatchCriteria="targeted",
        StartDate=start,
        CommitmentDuration=14 * 24 * 3600,
        DeliveryPreference="incremental",
        TagSpecifications=[
            {
                "ResourceType": "capacity-reservation",
                "Tags": [{"Key": k, "Value": v} for k, v in RESERVATION_TAG.items()],
            }
        ],
    )
    sim.catalog.reservations.append(answer["CapacityReservation"]["CapacityReservationId"])
    return f"starts {start:%d %H:%M}"


def advance_clock(sim: Simulation, rng: random.Random) -> str:
    return sim.jump()


def cancel_reservation(sim: Simulation, rng: random.Random) -> str:
    if not sim.catalog.reservations:
        return "none"
    reservation = sim.catalog.reservations.pop(rng.randrange(len(sim.catalog.reservations)))
    sim.world.ec2.cancel_capacity_reservation(CapacityReservationId=reservation)
    return "cancelled"


def dry_offering(sim: Simulation, rng: random.Random) -> str:
    sim.world.emulator.capacity.set(rng.choice(TYPES), rng.choice(ZONES), "on-demand", 0)
    return "dry"


def wet_offering(sim: Simulation, rng: random.Random) -> str:
    capacity = sim.world.emulator.capacity
    sim.world.emulator.capacity.set(rng.choice(TYPES), rng.choice(ZONES), "on-demand", capacity.WET)
    return "wet"


def _instances_in(sim: Simulation, states: set[str]) -> list[str]:
    return sorted(o.instance_id for o in sim.world.instances.values() if o.state in states)


def stop_instance(sim: Simulation, rng: random.Random) -> str:
    live = _instances_in(sim, {"running"})
    if not live:
        return "none running"
    sim.world.ec2.stop_instances(InstanceIds=[rng.choice(live)])
    return "stopped"


def start_instance(sim: Simulation, rng: random.Random) -> str:
    stopped = _instances_in(sim, {"stopped"})
    if not stopped:
        return "none stopped"
    sim.world.ec2.start_instances(InstanceIds=[rng.choice(stopped)])
    return "started"


def terminate_instance(sim: Simulation, rng: random.Random) -> str:
    candidates = _instances_in(sim, {"running", "stopped", "pending"})
    if not candidates:
        return "none"
    chosen = rng.sample(candidates, min(len(candidates), rng.randint(1, 3)))
    sim.world.ec2.terminate_instances(InstanceIds=chosen)
    return "terminated"


def transient_fault(sim: Simulation, rng: random.Random) -> str:
    operation, code = rng.choice(FAULT_CATALOG)
    if rng.random() < 0.5:
        fault = Fault(operation, code, times=rng.randint(1, 3))
    else:
        fault = Fault(operation, code, rate=rng.choice((0.2, 0.35, 0.5)), seed=rng.randrange(2**31))
    sim.add_fault(fault, duration=rng.uniform(5.0, 90.0), permanent=False)
    return f"{operation} {code}"


def crash(sim: Simulation, rng: random.Random) -> str:
    sim.pending_crash = (rng.randint(1, 40), rng.choice(("before", "after")))
    return f"armed at call {sim.pending_crash[0]} {sim.pending_crash[1]}"


def permanent_outage(sim: Simulation, rng: random.Random) -> str:
    """A fault that outlasts the queue's whole retry window: the only way into the DLQ."""
    operation, code = rng.choice(
        (
            ("ec2:CreateFleet", "RequestLimitExceeded"),
            ("dynamodb:TransactWriteItems", "ThrottlingException"),
        )
    )
    sim.outage(Fault(operation, code))
    return f"{operation} {code}"


def wait(sim: Simulation, rng: random.Random) -> str:
    sim.world.emulator.clock.advance(rng.uniform(5.0, 60.0))
    return "waited"


OPERATIONS = {
    "submit": submit,
    "duplicate": duplicate,
    "shared_request_id": shared_request_id,
    "invalid_request": invalid_request,
    "apply_node_class": apply_node_class,
    "apply_node_pool": apply_node_pool,
    "delete_node_pool": delete_node_pool,
    "delete_node_class": delete_node_class,
    "invalid_document": invalid_document,
    "create_reservation": create_reservation,
    "cancel_reservation": cancel_reservation,
    "dry_offering": dry_offering,
    "wet_offering": wet_offering,
    "stop_instance": stop_instance,
    "start_instance": start_instance,
    "terminate_instance": terminate_instance,
    "transient_fault": transient_fault,
    "crash": crash,
    "permanent_outage": permanent_outage,
    "wait": wait,
    "buy_capacity_block": buy_capacity_block,
    "create_future_reservation": create_future_reservation,
    "advance_clock": advance_clock,
    **PRIORITY_OPERATIONS,
    **STATIC_OPERATIONS,
}


__all__ = ["OPERATIONS", "PROFILES", "Profile"]
