"""What Karpenter users look at: an EC2NodeClass's status (what its selectors resolve to now) and a
read-only NodeClaim per launched instance, in Karpenter's v1 shapes (docs/karpenter.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from capacity_launcher.domain.apis.config import NodePool
from capacity_launcher.domain.capacity.image_architectures import ImageArchitecture
from capacity_launcher.domain.capacity.offerings import ON_DEMAND, RESERVED
from capacity_launcher.domain.capacity.requirements import (
    CAPACITY_RESERVATION_ID,
    CAPACITY_RESERVATION_INTERRUPTIBLE,
    CAPACITY_RESERVATION_TYPE,
    CAPACITY_TYPE,
    INSTANCE_TYPE,
    ZONE,
)
from capacity_launcher.domain.capacity.reservations import (
    BLOCK_TERMINATION_LEAD,
    EXPIRED_STATE,
    ORDINARY,
    ReservationSnapshot,
)
from capacity_launcher.domain.errors import SELECTS_NOTHING
from capacity_launcher.domain.quantities import format_cpu, format_memory
from capacity_launcher.domain.records.instance_records import INTERRUPTED, RUNNING, InstanceRecord

NODECLAIM_API_VERSION = "karpenter.sh/v1"
NODEPOOL_LABEL = "karpenter.sh/nodepool"
NODECLASS_LABEL = "karpenter.k8s.aws/ec2nodeclass"
REQUEST_ANNOTATION = "capacity-launcher/request-id"
# The states of a reservation that ended with instances in it (EC2 keeps an ODCR's running).
ENDED_STATES = frozenset({EXPIRED_STATE, "cancelled"})
# Karpenter starts draining a Capacity Block's instances 10 minutes before EC2 starts
# terminating them (its capacityreservation.expiration controller), as EC2's warning event does.
BLOCK_DRAIN_LEAD = BLOCK_TERMINATION_LEAD + timedelta(minutes=10)
# DisruptionReason's reasons here: EC2 reclaims an interruptible reservation, a block ends.
INTERRUPTED_REASON = "CapacityReservationInterrupted"
BLOCK_EXPIRING_REASON = "CapacityBlockExpiring"


@dataclass(frozen=True)
class Resolved[Found]:
    """What one selector resolved to now, or why it could not be resolved."""

    found: Sequence[Found] = ()
    error: str | None = None


@dataclass(frozen=True)
class ResolvedNodeClass:
    subnets: Resolved[tuple[str, str]] = field(default_factory=Resolved)  # (id, zone)
    security_groups: Resolved[tuple[str, str]] = field(default_factory=Resolved)  # (id, name)
    images: Resolved[tuple[ImageArchitecture, str]] = field(default_factory=Resolved)  # (.., name)
    reservations: Resolved[ReservationSnapshot] = field(default_factory=Resolved)
    reservations_asked: bool = False
    instance_profile: str | None = None
    # The class's `role`, checked (its profile's name, or why it cannot be given): None when it
    # names no role (an `instanceProfile` is used as given, and shown as such).
    role_profile: Resolved[str] | None = None


def _condition(kind: str, resolved: Resolved[Any], what: str, at: str) -> dict[str, Any]:
    ready = resolved.error is None and bool(resolved.found)
    # The words a request refused for it says too (NodeClassNotReady).
    nothing = SELECTS_NOTHING.get(kind, f"no {what} found")
    message = resolved.error or ("" if ready else nothing)
    return {
        "type": kind,
        "status": "True" if ready else "False",
        "reason": kind if ready else f"{kind.removesuffix('Ready')}NotFound",
        "message": message,
        "lastTransitionTime": at,
    }


def _reservation(snapshot: ReservationSnapshot) -> dict[str, Any]:
    found: dict[str, Any] = {
        "availabilityZone": snapshot.zone,
        "id": snapshot.reservation_id,
        "instanceMatchCriteria": snapshot.instance_match_criteria,
        "instanceType": snapshot.instance_type,
        "reservationType": snapshot.reservation_type,
        "state": snapshot.state,
    }
    if snapshot.end_date is not None:
        found["endTime"] = snapshot.end_date.isoformat()
    return found


def ec2nodeclass_status(resolved: ResolvedNodeClass, at: str) -> dict[str, Any]:
    """EC2NodeClass status as Karpenter shows it; a condition per selector, and Ready."""
    status: dict[str, Any] = {
        "subnets": [{"id": i, "zone": z} for i, z in resolved.subnets.found],
        "securityGroups": [
            {"id": i, **({"name": n} if n else {})} for i, n in resolved.security_groups.found
        ],
        "amis": [
            {
                "id": image.image_id,
                **({"name": name} if name else {}),
                "requirements": image.requirements(),
            }
            for image, name in resolved.images.found
        ],
        "conditions": _nodeclass_conditions(resolved, at),
    }
    if resolved.reservations.found:
        status["capacityReservations"] = [_reservation(r) for r in resolved.reservations.found]
    profile = resolved.instance_profile
    if resolved.role_profile is not None and resolved.role_profile.found:
        profile = resolved.role_profile.found[0]
    if profile:
        status["instanceProfile"] = profile
    return status


def _nodeclass_conditions(resolved: ResolvedNodeClass, at: str) -> list[dict[str, Any]]:
    """A condition per selector (reservations and the role's profile when asked), then Ready."""
    conditions = [
        _condition("SubnetsReady", resolved.subnets, "subnets", at),
        _condition("SecurityGroupsReady", resolved.security_groups, "security groups", at),
        _condition("AMIsReady", resolved.images, "images", at),
    ]
    if resolved.reservations_asked:
        conditions.append(
            _condition("CapacityReservationsReady", resolved.reservations, "reservations", at)
        )
    if resolved.role_profile is not None:
        conditions.append(_profile_condition(resolved.role_profile, at))
    ready = all(c["status"] == "True" for c in conditions)
    conditions.append(
        {
            "type": "Ready",
            "status": "True" if ready else "False",
            "reason": "Ready" if ready else "NotReady",
            "message": "" if ready else "a selector resolves to nothing (see the other conditions)",
            "lastTransitionTime": at,
        }
    )
    return conditions


def _profile_condition(resolved: Resolved[str], at: str) -> dict[str, Any]:
    """InstanceProfileReady, as Karpenter shows it: the role can be given to the class's
    instances (in the profile the service makes), or why not (the role does not exist, or the
    deployment may not pass it)."""
    ready = resolved.error is None and bool(resolved.found)
    return {
        "type": "InstanceProfileReady",
        "status": "True" if ready else "False",
        "reason": "InstanceProfileReady" if ready else "InstanceProfileNotReady",
        "message": "" if ready else resolved.error or "no instance profile",
        "lastTransitionTime": at,
    }


def _capacity(record: InstanceRecord) -> dict[str, str]:
    capacity = {"cpu": format_cpu(record.cpu), "memory": format_memory(record.memory_mib)}
    if record.gpu:
        capacity["nvidia.com/gpu"] = str(record.gpu)
    return capacity


def nodeclaim_name(record: InstanceRecord) -> str:
    """An instance's NodeClaim is named by its instance id (a valid Kubernetes name)."""
    return record.instance_id


def _labels(record: InstanceRecord, reservation: ReservationSnapshot | None) -> dict[str, str]:
    found = {
        INSTANCE_TYPE: record.instance_type,
        CAPACITY_TYPE: record.capacity_type,
        ZONE: record.zone,
        NODEPOOL_LABEL: record.node_pool,
        NODECLASS_LABEL: record.node_class,
        **_reservation_labels(record, reservation),
    }
    return {key: value for key, value in found.items() if value}


def _reservation_labels(
    record: InstanceRecord, reservation: ReservationSnapshot | None
) -> dict[str, str]:
    """What Karpenter labels reserved capacity with: the reservation's id, and (when its
    reservation is known) its type and whether its owner may reclaim it. An ordinary ODCR that
    ended leaves its instances running as On-Demand: Karpenter then relabels the NodeClaim
    `on-demand` and drops the reservation's labels, and so does this view."""
    if record.capacity_type != RESERVED or not record.capacity_reservation_id:
        return {}
    if reservation is None:
        return {CAPACITY_RESERVATION_ID: record.capacity_reservation_id}
    if reservation.state in ENDED_STATES and reservation.kind is ORDINARY:
        return {CAPACITY_TYPE: ON_DEMAND}
    return {
        CAPACITY_RESERVATION_ID: record.capacity_reservation_id,
        CAPACITY_RESERVATION_TYPE: reservation.reservation_type,
        CAPACITY_RESERVATION_INTERRUPTIBLE: str(reservation.interruptible).lower(),
    }


def _disruption(
    record: InstanceRecord, reservation: ReservationSnapshot | None, now: datetime | None
) -> list[dict[str, str]]:
    """The conditions Karpenter sets on a NodeClaim its reserved capacity is leaving:
    `DisruptionReason` (why it is being disrupted) and, once EC2 terminates the instance,
    `InstanceTerminating`. EC2's warning that it reclaims an interruptible reservation's
    capacity marks the instance interrupted; a Capacity Block's instances are disrupted from
    BLOCK_DRAIN_LEAD before its end, when Karpenter starts draining them (10 minutes before EC2
    starts terminating them)."""
    reservation_id = record.capacity_reservation_id
    if record.state == INTERRUPTED:
        why = f"EC2 is reclaiming capacity reservation {reservation_id}'s capacity"
        return [
            _true("DisruptionReason", INTERRUPTED_REASON, why),
            _true("InstanceTerminating", INTERRUPTED_REASON, f"{why}: it terminates the instance"),
        ]
    end = reservation.end_date if reservation is not None else None
    if (
        record.state != RUNNING
        or reservation is None
        or not reservation.kind.ends_early
        or end is None
        or now is None
        or now < end - BLOCK_DRAIN_LEAD
    ):
        return []
    terminating = (end - BLOCK_TERMINATION_LEAD).isoformat()
    why = (
        f"capacity block {reservation_id} ends at {end.isoformat()}; EC2 terminates its "
        f"instances from {terminating}"
    )
    return [_true("DisruptionReason", BLOCK_EXPIRING_REASON, why)]


def _true(kind: str, reason: str, message: str) -> dict[str, str]:
    return {"type": kind, "status": "True", "reason": reason, "message": message}


def _conditions(record: InstanceRecord) -> list[dict[str, str]]:
    launched_at = record.launched_at or ""
    running = record.state == RUNNING
    ready = {
        "type": "Ready",
        "status": "True" if running else "False",
        "reason": "Running" if running else record.state.capitalize(),
        "message": "the instance is running (capacity-launcher has no node to register)"
        if running
        else f"the instance is {record.state}",
        "lastTransitionTime": record.released_at or launched_at,
    }
    launched = {"type": "Launched", "status": "True", "reason": "Launched", "message": ""}
    return [{**launched, "lastTransitionTime": launched_at}, ready]


def nodeclaim(
    record: InstanceRecord,
    pool: NodePool | None,
    reservation: ReservationSnapshot | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """A read-only NodeClaim for a launched instance: the pool's requirements narrowed to what was
    launched, its providerID and capacity, the reservation labels of reserved capacity, and
    Launched / Ready (running) conditions, with DisruptionReason and InstanceTerminating while
    its reservation takes its capacity back (`reservation`: the one it runs in, as EC2 reports
    it now; `now`: the moment to judge a Capacity Block's end by)."""
    labels = _labels(record, reservation)
    narrowed = {k: v for k, v in labels.items() if k in (INSTANCE_TYPE, CAPACITY_TYPE, ZONE)}
    requirements = [
        r.model_dump(mode="json", by_alias=True)
        for r in (pool.spec.requirements if pool is not None else ())
        if r.key not in narrowed
    ]
    requirements += [{"key": k, "operator": "In", "values": [v]} for k, v in narrowed.items()]
    metadata: dict[str, Any] = {"name": nodeclaim_name(record), "labels": labels}
    if record.request_id:
        metadata["annotations"] = {REQUEST_ANNOTATION: record.request_id}
    if record.launched_at:
        metadata["creationTimestamp"] = record.launched_at
    node_class = record.node_class or ""
    return {
        "apiVersion": NODECLAIM_API_VERSION,
        "kind": "NodeClaim",
        "metadata": metadata,
        "spec": {
            "requirements": requirements,
            "nodeClassRef": {
                "group": "karpenter.k8s.aws",
                "kind": "EC2NodeClass",
                "name": node_class,
            },
        },
        "status": {
            "providerID": f"aws:///{record.zone or ''}/{record.instance_id}",
            "capacity": _capacity(record),
            "conditions": [*_conditions(record), *_disruption(record, reservation, now)],
        },
    }
