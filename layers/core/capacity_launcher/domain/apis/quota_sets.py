"""Rules and lookups across the stored CapacityQuotas: the set as of one configuration generation
(`QuotaSet`), the quota that governs a requester in a NodePool (`quota_for`), the conflicts
between quotas (a requester in two quotas of one flavor, two bindings of one requester, prefixes
that overlap), who may associate with a reservation, and the requester as a metric dimension.
One CapacityQuota document: domain/apis/quotas.py."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from capacity_launcher.domain.accounting.quota_prefixes import prefix_conflicts
from capacity_launcher.domain.apis.ome.associations import (
    DEFAULT_ASSOCIATION,
    counted_association,
)
from capacity_launcher.domain.apis.quotas import CapacityQuota
from capacity_launcher.domain.field_errors import FieldError, field_path
from capacity_launcher.domain.requester_origins import RequesterOrigins

if TYPE_CHECKING:  # a type only: the Kueue document's module stays out of a handler's init
    from capacity_launcher.domain.apis.kueue.cohorts import Cohort as CohortDocument


@dataclass(frozen=True)
class QuotaSet:
    """The stored quotas as of one configuration generation.

    Every apply that changes a CapacityQuota and every delete of one bumps the generation, and
    that of each NodePool its stored and its new document name, in the same transaction as the
    document's write. A decision in a pool depends only on the quotas naming the pool, so a
    lease conditioned on its pool's generation (`generation_in`) holds only if none of those
    changed since (docs/quotas.md, "An apply governs what follows it")."""

    generation: int | None  # None: not read from a store (nothing to condition on)
    quotas: tuple[CapacityQuota, ...] = ()
    # Each NodePool's quota generation, read with `generation` (absent: 0, never bumped).
    pool_generations: Mapping[str, int] = field(default_factory=dict)
    # Quota name -> the PriorityClass it names that was not stored when it was written (an OME
    # reservation applied before its class: docs/ome.md, "Applied in any order").
    unresolved: Mapping[str, str] = field(default_factory=dict)
    # The applied Kueue Cohorts by name, read with the generations (a Cohort's apply bumps the
    # generation of every pool its tree's admissions decide in): none, every cohort is flat.
    cohorts: Mapping[str, CohortDocument] = field(default_factory=dict)
    # Each NodePool's quota generation at which its members were last all made to hold the
    # quota usage that governs them (absent: 0). Behind `pool_generations` after an apply or
    # delete naming the pool, until the first admission there holds them (docs/quotas.md).
    pool_holds: Mapping[str, int] = field(default_factory=dict)

    def generation_in(self, pool: str) -> int | None:
        """The quota generation of `pool` the quotas were read at (None: not from a store)."""
        return None if self.generation is None else self.pool_generations.get(pool, 0)

    def members_held(self, pool: str, generation: int) -> QuotaSet:
        """This set, noting `pool`'s members held at `generation` when that is its generation
        here (a note for another generation says nothing of this copy)."""
        if self.generation_in(pool) != generation:
            return self
        return replace(self, pool_holds={**self.pool_holds, pool: generation})

    def holds_current(self, pool: str) -> bool:
        """Whether `pool`'s members hold the quota usage these quotas say governs them: an
        apply or delete naming the pool may have moved that (a quota applied again covers an
        instance its deletion left counted for its pool only) since they were last held."""
        if self.generation is None:
            return True
        return self.pool_holds.get(pool, 0) >= self.pool_generations.get(pool, 0)


# The metrics' requester dimension: a bounded set of ASCII values (CloudWatch bills every new
# value as a new metric and takes ASCII only), whatever free text producers send.
OTHER_REQUESTER = "other"


NO_REQUESTER = "none"


def requester_dimension(quotas: Iterable[CapacityQuota], requester: str | None) -> str:
    """The requester as a metric dimension: itself when a quota declares it, the prefix and `*`
    when a quota's prefix covers it, else `other` (`none` when the request names nobody)."""
    if not requester:
        return NO_REQUESTER
    prefixes: list[str] = []
    for quota in quotas:
        if requester in quota.spec.requesters:
            return requester if requester.isascii() else OTHER_REQUESTER
        prefixes.extend(p for p in quota.spec.requester_prefixes if requester.startswith(p))
    longest = max(prefixes, key=len, default=None)
    if longest is not None and longest.isascii():
        return f"{longest}*"
    return OTHER_REQUESTER


def conflicts(quotas: Iterable[CapacityQuota]) -> list[FieldError]:
    """Rules across quotas: a requester in two quotas of one flavor is ambiguous, so refused.

    The later quota (by name) is blamed, so applying the same set twice reports the same thing.
    """
    quotas = list(quotas)
    owner: dict[tuple[str, str], str] = {}
    found: list[FieldError] = []
    for quota in sorted(quotas, key=lambda q: q.name):
        for flavor in quota.flavors():
            for index, requester in enumerate(quota.spec.requesters):
                first = owner.setdefault((requester, flavor.name), quota.name)
                if first != quota.name:
                    found.append(
                        FieldError(
                            f"CapacityQuota {quota.name}: spec.requesters[{index}]",
                            f"requester {requester!r} is already covered in flavor "
                            f"{flavor.name} by CapacityQuota {first}; a requester has at most "
                            "one quota per flavor",
                        )
                    )
    return found + prefix_conflicts(quotas) + _binding_conflicts(quotas)


def _binding_conflicts(quotas: Iterable[CapacityQuota]) -> list[FieldError]:
    """A requester has one binding: every quota that binds it must bind it the same way."""
    first: dict[str, tuple[str, RequesterOrigins]] = {}
    found: list[FieldError] = []
    for quota in sorted(quotas, key=lambda q: q.name):
        for requester, origins in quota.spec.requester_origins.items():
            owner, bound = first.setdefault(requester, (quota.name, origins))
            if owner != quota.name and bound != origins:
                found.append(
                    FieldError(
                        f"CapacityQuota {quota.name}: "
                        + field_path(("spec", "requesterOrigins", requester)),
                        f"differs from CapacityQuota {owner}'s; a requester has one binding, "
                        "the same in every quota that gives one",
                    )
                )
    return found


def quota_for(
    quotas: Iterable[CapacityQuota], requester: str | None, node_pool: str
) -> tuple[CapacityQuota | None, list[CapacityQuota]]:
    """The quota that governs ``requester`` in ``node_pool``, and every quota naming the pool.

    (None, []) : no quota names the pool: only the pool's limits apply.
    (None, [..]): quotas name the pool but none covers the requester: the request is refused.
    """
    naming = [q for q in quotas if q.flavor(node_pool) is not None]
    mine = [q for q in naming if q.covers(requester)]
    return (min(mine, key=lambda q: q.name) if mine else None), naming


def association_refusal(quotas: Iterable[CapacityQuota], requester: str | None) -> str | None:
    """Why a request counted as ``requester`` may not associate with its reservation (docs/ome.md
    "Who may associate"), or None: every quota holding the reservation's prefix that lists
    ``associationRequesters`` must list the association. Not an association: None."""
    counted = counted_association(requester)
    if counted is None:
        return None
    reservation, association = counted
    for quota in sorted(quotas, key=lambda q: q.name):
        listed = quota.spec.association_requesters
        if listed and reservation in quota.spec.reservations() and association not in listed:
            return (
                f"requester: {association!r} may not associate with capacityReservation "
                f"{reservation!r}: CapacityQuota {quota.name} spec.associationRequesters lists "
                f"only {', '.join(listed)} (a request without a requester associates as "
                f"{DEFAULT_ASSOCIATION!r})"
            )
    return None


def unresolved_refusal(quota_set: QuotaSet, requester: str | None) -> str | None:
    """Why a request counted as ``requester`` is refused while its reservation waits for the
    PriorityClass it names (its priority is that class's value, not known yet), or None."""
    counted = counted_association(requester)
    if counted is None:
        return None
    reservation = counted[0]
    for quota in sorted(quota_set.quotas, key=lambda q: q.name):
        missing = quota_set.unresolved.get(quota.name)
        if missing is not None and reservation in quota.spec.reservations():
            return (
                f"capacityReservation: {reservation!r} is not ready: CapacityQuota {quota.name} "
                f"names PriorityClass {missing!r} (spec.priorityClassName), which is not applied; "
                "requests associated with it are rejected until it is"
            )
    return None


def quotas_by_name(quotas: Iterable[CapacityQuota]) -> Mapping[str, CapacityQuota]:
    return {quota.name: quota for quota in quotas}
