"""Which pool and class serve a request, and what it may launch: resolution before any launch.

A request names its NodePool or gets the highest-weight compatible one; its requirements may only
narrow the pool's. Anything else is Rejected here, before a lease or an EC2 call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from capacity_launcher.domain.accounting.admission_queue import priority_of
from capacity_launcher.domain.apis.config import NodeClass, NodePool, PoolSet
from capacity_launcher.domain.apis.ome.associations import counted_association
from capacity_launcher.domain.apis.quota_sets import (
    association_refusal,
    quota_for,
    unresolved_refusal,
)
from capacity_launcher.domain.capacity.block_end_policy import request_refusal
from capacity_launcher.domain.capacity.constraints import Requirements, narrow
from capacity_launcher.domain.capacity.requirements import CAPACITY_TYPE, RESERVED
from capacity_launcher.domain.capacity.static_pools import is_static_launch
from capacity_launcher.domain.errors import (
    NotFound,
    RequesterNotAllowed,
    RequestRejected,
    RequirementsConflict,
    StoredDocumentInvalid,
)
from capacity_launcher.domain.launch_request import LaunchRequest
from capacity_launcher.domain.records.tags import check_instance_tag_count, conflicting_tags
from capacity_launcher.domain.requester_origins import Origin, RequesterBindings
from capacity_launcher.service.pool_listing import Later, Memo, by_weight
from capacity_launcher.service.ports import Configuration, StaticPoolStates


@dataclass(frozen=True)
class Prepared:
    """A request resolved against its pool: what may be launched, and by whose rules."""

    request: LaunchRequest
    received_at: datetime
    pool: NodePool
    node_class: NodeClass
    requirements: Requirements
    # Lower-weight pools compatible with a request that named none, in the order they are tried
    # (read from the store only as far as they are looked at: `pool_listing.Later`).
    alternatives: Sequence[NodePool] = ()
    # The NodePools' generation those pools were chosen from (None: the request named its pool).
    pools_generation: int | None = None
    # Its place in its pool's admission queue, should it wait (issue 37): higher first.
    priority: int = 0

    @property
    def coalescing_key(self) -> tuple[Any, ...]:
        """Requests with equal keys may share one CreateFleet."""
        return (
            self.pool.metadata.name,
            tuple(r.model_dump_json() for r in self.requirements.to_list()),
            self.request.single_zone,
        )


# The code of a request naming a PriorityClass that is not applied (`priorityClassName`), or
# associated with a reservation that waits for the PriorityClass it names.
UNKNOWN_PRIORITY_CLASS = "UnknownPriorityClass"
# The code of a request whose waitForCapacityUntil breaks the arrival rules.
INVALID_CAPACITY_WAIT = "InvalidWaitForCapacityUntil"


def resolve(
    config: Configuration,
    request: LaunchRequest,
    received_at: datetime,
    origin: Origin | None = None,
    static_pools: StaticPoolStates | None = None,
) -> Prepared:
    """`origin`: where the request came from; its `requester` is checked against it first.
    `static_pools`: what the sync sent static pools (a launch naming one must be one of them)."""
    if origin is not None:
        request = claimed_by(config, request, origin)
    request = request.associated()
    if counted_association(request.requester) is not None:  # quotas read only for those
        refusal = association_refusal(config.capacity_quotas(), request.requester)
        if refusal is not None:
            raise RequesterNotAllowed(refusal)
        _check_reservation_ready(config, request.requester)
    problem = request.capacity_wait_problem(received_at)
    if problem is not None:
        raise RequestRejected(f"waitForCapacityUntil: {problem}", INVALID_CAPACITY_WAIT)
    pools, generation = _pools_for(config, request, static_pools)
    return _prepare(config, request, received_at, pools[0], pools[1:], generation)


def _check_reservation_ready(config: Configuration, requester: str | None) -> None:
    """Rejected, naming the class, while the request's reservation waits for the PriorityClass
    it names (its priority is not known); a container's copy is read again before that is said
    (it may predate the class's apply)."""
    associated = requester is not None and counted_association(requester) is not None
    # A copy older than the reservation knows nothing of it: an associated request reads fresh.
    if not associated and unresolved_refusal(config.quota_set(), requester) is None:
        return
    refusal = unresolved_refusal(config.quota_set(fresh=True), requester)
    if refusal is not None:
        raise RequestRejected(refusal, UNKNOWN_PRIORITY_CLASS)


def claimed_by(config: Configuration, request: LaunchRequest, origin: Origin) -> LaunchRequest:
    """The request as the requester its origin may claim (docs/quotas.md "Who is the
    requester?"); RequesterNotAllowed when it claims one bound to other origins."""
    bindings = RequesterBindings.of(config.capacity_quotas())
    counted = counted_association(request.requester)
    if counted is not None:
        # Already spelled as a reservation's association: its association name is the claim.
        bindings.requester_for(counted[1], origin)
        return request
    requester = bindings.requester_for(request.requester, origin)
    if requester == request.requester:
        return request
    return request.model_copy(update={"requester": requester})


def resolve_next(config: Configuration, prepared: Prepared) -> tuple[Prepared | None, list[str]]:
    """The next compatible pool that can take a request its pool passed over, by weight; and why
    the pools skipped on the way could not (their class is missing, their tags conflict...)."""
    skipped: list[str] = []
    alternatives = prepared.alternatives
    while alternatives:
        pool, alternatives = alternatives[0], alternatives[1:]
        try:
            return (
                _prepare(
                    config,
                    prepared.request,
                    prepared.received_at,
                    pool,
                    alternatives,
                    prepared.pools_generation,
                ),
                skipped,
            )
        except RequestRejected as rejected:
            skipped.append(f"nodePool {pool.metadata.name}: {rejected.reason}")
    return None, skipped


def resolve_in(config: Configuration, prepared: Prepared, pool_name: str) -> Prepared | None:
    """The request in one of its alternatives (where an earlier delivery fell back to); None
    when that pool is no longer one of them (deleted, or no longer compatible)."""
    for at, pool in enumerate(prepared.alternatives):  # read only as far as that pool
        if pool.metadata.name == pool_name:
            return _prepare(
                config,
                prepared.request,
                prepared.received_at,
                pool,
                prepared.alternatives[at + 1 :],
                prepared.pools_generation,
            )
    return None


def _prepare(
    config: Configuration,
    request: LaunchRequest,
    received_at: datetime,
    pool: NodePool,
    alternatives: Sequence[NodePool],
    pools_generation: int | None,
) -> Prepared:
    try:
        node_class = config.node_class(pool.spec.node_class_ref)
    except NotFound as error:
        raise RequestRejected(
            f"nodePool: NodePool {pool.metadata.name} refers to NodeClass "
            f"{pool.spec.node_class_ref!r}, which does not exist",
            "UnknownNodeClass",
        ) from error
    except StoredDocumentInvalid as error:
        raise RequestRejected(
            f"nodePool: NodePool {pool.metadata.name} refers to NodeClass "
            f"{pool.spec.node_class_ref!r}, which is stored but no longer valid "
            f"({error.reason}); re-apply it",
            "InvalidNodeClass",
        ) from error
    conflicts = conflicting_tags(node_class, request)
    if conflicts:
        raise RequestRejected(
            "; ".join(
                f"tags.{k}: is set by NodeClass {node_class.metadata.name} "
                f"to {node_class.spec.tags[k]!r}; a request cannot override it"
                for k in conflicts
            ),
            "TagConflict",
        )
    check_instance_tag_count(node_class, request)
    requirements = narrow(
        pool.spec.requirements_set(), Requirements.of(request.requirements), strict=True
    )
    return Prepared(
        request,
        received_at,
        pool,
        node_class,
        requirements,
        alternatives,
        pools_generation,
        priority=_priority(config, request, pool.metadata.name),
    )


def _priority(config: Configuration, request: LaunchRequest, pool: str) -> int:
    """Its place in the pool's admission queue should it wait (issue 37): the value of the
    PriorityClass it names (Rejected naming the field when none of that name is applied), else
    its quota's priority in the pool, else 0. Its instances' records carry it too: a waiting
    request's preemption chooses among them by it."""
    name = request.priority_class_name
    value = config.priority_value(name) if name is not None else None
    if name is not None and value is None:
        raise RequestRejected(
            f"priorityClassName: no PriorityClass named {name!r} is applied", UNKNOWN_PRIORITY_CLASS
        )
    if value is not None:
        return value
    quota, _ = quota_for(config.capacity_quotas(), request.requester, pool)
    return priority_of(value, quota.spec.priority if quota is not None else None)


def _sent_by_the_sync(
    request: LaunchRequest, pool: str, static_pools: StaticPoolStates | None
) -> bool:
    """A launch into static pool `pool` is the sync's: shaped as its ids, and (read only for
    such an id) recorded in flight in the pool's state."""
    if not is_static_launch(request.request_id, pool):
        return False
    if static_pools is None:
        return True
    return is_static_launch(request.request_id, pool, static_pools.read(pool))


# The code of a request from a producer naming a static NodePool.
STATIC_NODE_POOL = "StaticNodePool"


def _pools_for(
    config: Configuration, request: LaunchRequest, static_pools: StaticPoolStates | None = None
) -> tuple[Sequence[NodePool], int | None]:
    """The pool a request names; or the compatible pools, highest weight first (the first is
    its pool), with the generation of the listing they were chosen from (the lease conditions
    on it). The pools after the first are read from the store only as far as they are looked
    at (a request that falls back reads on: issue 38)."""
    if request.node_pool:
        named = _named(config, request, static_pools)
        _block_end_allowed(named, request)
        return (named,), None
    wanted = Requirements.of(request.requirements)
    # A container's copy may pick a pool; only a fresh read may say that none fits.
    listing = config.pool_set()
    ordered = _in_order(listing, wanted, request)
    if not ordered:
        listing = config.pool_set(fresh=True)
        ordered = _in_order(listing, wanted, request)
    if not ordered:
        _refuse_block_end(listing, wanted, request)
        raise RequestRejected(
            "nodePool: no NodePool is compatible with the request's requirements",
            "NoCompatibleNodePool",
        )
    return ordered, listing.generation


def _named(
    config: Configuration, request: LaunchRequest, static_pools: StaticPoolStates | None
) -> NodePool:
    assert request.node_pool is not None
    try:
        named = config.node_pool(request.node_pool)
    except NotFound as error:
        raise RequestRejected(
            f"nodePool: no NodePool named {request.node_pool!r}", "UnknownNodePool"
        ) from error
    except StoredDocumentInvalid as error:
        raise RequestRejected(
            f"nodePool: NodePool {request.node_pool!r} is stored but no longer valid "
            f"({error.reason}); re-apply it",
            "InvalidNodePool",
        ) from error
    if named.spec.is_static and not _sent_by_the_sync(request, named.name, static_pools):
        raise RequestRejected(
            f"nodePool: NodePool {named.name!r} is static (spec.replicas): the service keeps "
            "its instances running; ask a dynamic NodePool for capacity",
            STATIC_NODE_POOL,
        )
    return named


def _in_order(listing: PoolSet, wanted: Requirements, request: LaunchRequest) -> Sequence[NodePool]:
    """The compatible pools of `listing` that allow the request's `capacityBlockEnd`, in the
    order they are tried (equal weights: the alphabetically first comes first,
    deterministically), pulled only as far as asked."""
    compatible = Later(
        Memo(
            p
            for p in by_weight(listing)
            if _fits(p, wanted) and _block_end_refusal(p, request) is None
        )
    )
    if request.wait_for_capacity_until is not None:
        # A request that may wait for scheduled reserved capacity goes first to the pools it
        # could wait in for it; when none allows reserved capacity, it waits for room in any
        # (issue 37: any request may wait). Whether any does is known at the first that does.
        reserved = Later(Memo(p for p in compatible if _allows_reserved(p, wanted)))
        if reserved:
            return reserved
    return compatible


# The code of a request whose capacityBlockEnd its NodePool's spec.capacityBlockEnd refuses.
BLOCK_END_NOT_ALLOWED = "CapacityBlockEndNotAllowed"


def _block_end_refusal(pool: NodePool, request: LaunchRequest) -> str | None:
    ask = request.capacity_block_end
    return None if ask is None else request_refusal(pool.spec.capacity_block_end, ask)


def _refuse_block_end(listing: PoolSet, wanted: Requirements, request: LaunchRequest) -> None:
    """Rejected naming the request's `capacityBlockEnd` when compatible pools exist but none
    allows it (the first of them named)."""
    if request.capacity_block_end is None:
        return
    first = next((p for p in by_weight(listing) if _fits(p, wanted)), None)
    if first is not None:
        _block_end_allowed(first, request)


def _block_end_allowed(pool: NodePool, request: LaunchRequest) -> None:
    """A request's `capacityBlockEnd` within what its pool allows, else Rejected naming it."""
    refusal = _block_end_refusal(pool, request)
    if refusal is not None:
        raise RequestRejected(f"{refusal} (NodePool {pool.name!r})", BLOCK_END_NOT_ALLOWED)


def _allows_reserved(pool: NodePool, wanted: Requirements) -> bool:
    merged = narrow(pool.spec.requirements_set(), wanted, strict=True)
    return merged.allows(CAPACITY_TYPE, RESERVED)


def _fits(pool: NodePool, wanted: Requirements) -> bool:
    """A dynamic pool whose requirements admit `wanted` (a static pool is never chosen)."""
    if pool.spec.is_static:
        return False
    try:
        narrow(pool.spec.requirements_set(), wanted, strict=True)
    except RequirementsConflict:
        return False
    return True
