"""OME's CapacityReservation and ClusterCapacityReservation (ome.io/v1beta1), served as written.

Each converts to the CapacityQuota hub (domain/apis/quotas.py), which follows the same Kueue shape
(docs/ome.md says how each field maps; preemptionRule's three policies are the hub's
spec.preemption). What has no meaning here (namespace, labels, compartmentID, a borrowWithinCohort
policy of Any beyond LowerPriority, covered resources no flavor lists) is kept in the document and
reported by path as not acted on; nothing is dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, StrictBool, StrictInt, field_validator

from capacity_launcher.domain.apis.api_versions import validated
from capacity_launcher.domain.apis.config_base import (
    BUILT_ON_FIRST_USE,
    Name,
    _Document,
    no_repeats,
)
from capacity_launcher.domain.apis.ome.associations import association_prefix
from capacity_launcher.domain.apis.quota_preemption import (
    MAX_PRIORITY,
    MIN_PRIORITY,
    Preemption,
    ReclaimPolicy,
)
from capacity_launcher.domain.apis.quotas import (
    MAX_FLAVORS,
    MAX_RESOURCE_GROUPS,
    CapacityQuota,
    parse_amount,
    parse_quota,
)
from capacity_launcher.domain.errors import ConfigValidationError
from capacity_launcher.domain.field_errors import FieldError

OME_API_VERSION = "ome.io/v1beta1"
CAPACITY_RESERVATION = "CapacityReservation"
CLUSTER_CAPACITY_RESERVATION = "ClusterCapacityReservation"
RESERVATION_KINDS = (CAPACITY_RESERVATION, CLUSTER_CAPACITY_RESERVATION)
MAX_LABELS = 64
Quantity = StrictInt | str


class ReservationMetadata(_Document):
    model_config = BUILT_ON_FIRST_USE

    name: Name
    namespace: Name | None = None
    labels: dict[str, str] | None = Field(default=None, max_length=MAX_LABELS)


class ReservationResource(_Document):
    model_config = BUILT_ON_FIRST_USE

    name: str
    nominal_quota: Quantity
    borrowing_limit: Quantity | None = None


class ReservationFlavor(_Document):
    model_config = BUILT_ON_FIRST_USE

    name: Name
    resources: list[ReservationResource] = Field(min_length=1, max_length=16)


class ReservationResourceGroup(_Document):
    model_config = BUILT_ON_FIRST_USE

    covered_resources: list[str] = Field(min_length=1, max_length=16)
    flavors: list[ReservationFlavor] = Field(min_length=1, max_length=MAX_FLAVORS)

    @field_validator("covered_resources")
    @classmethod
    def _distinct(cls, names: list[str]) -> list[str]:
        return no_repeats(names)


class BorrowWithinCohort(_Document):
    model_config = BUILT_ON_FIRST_USE

    policy: Literal["Never", "LowerPriority", "Any"] | None = None
    max_priority_threshold: StrictInt | None = Field(default=None, ge=MIN_PRIORITY, le=MAX_PRIORITY)


class PreemptionRule(_Document):
    model_config = BUILT_ON_FIRST_USE

    reclaim_within_cohort: ReclaimPolicy | None = None
    borrow_within_cohort: BorrowWithinCohort | None = None
    within_cluster_queue: Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"] | None = (
        None
    )


class ReservationSpec(_Document):
    model_config = BUILT_ON_FIRST_USE

    resource_groups: list[ReservationResourceGroup] = Field(
        min_length=1, max_length=MAX_RESOURCE_GROUPS
    )
    cohort: Name | None = None
    priority_class_name: Name | None = None
    allow_borrowing: StrictBool | None = None
    preemption_rule: PreemptionRule | None = None
    compartment_id: str | None = Field(default=None, alias="compartmentID", max_length=255)


class CapacityReservation(_Document):
    """An OME CapacityReservation (namespaced) or ClusterCapacityReservation, as written."""

    model_config = BUILT_ON_FIRST_USE

    api_version: Literal["ome.io/v1beta1"]
    kind: Literal["CapacityReservation", "ClusterCapacityReservation"]
    metadata: ReservationMetadata
    spec: ReservationSpec

    @property
    def name(self) -> str:
        return self.metadata.name


@dataclass(frozen=True)
class Converted:
    """A reservation's hub quota, and the fields kept but not acted on (by document path)."""

    quota: CapacityQuota
    not_acted_on: tuple[FieldError, ...]


def parse_reservation(data: Mapping[str, Any]) -> CapacityReservation:
    return validated(CapacityReservation, data)


def priority_of(
    reservation: CapacityReservation, priority_classes: Mapping[str, int], default: int = 0
) -> tuple[int, FieldError | None]:
    """priorityClassName's value (a PriorityClass's `value`); naming none, ``default`` (the
    global default class's value); 0 and a report when unknown (apply refuses that first:
    ome_versions)."""
    name = reservation.spec.priority_class_name
    if name is None:
        return default, None
    if name in priority_classes:
        return priority_classes[name], None
    return 0, FieldError(
        "spec.priorityClassName",
        f"no PriorityClass {name!r} is applied: priority 0 until one is and this is applied again",
    )


def to_hub(
    reservation: CapacityReservation,
    priority_classes: Mapping[str, int] | None = None,
    default_priority: int = 0,
) -> Converted:
    """The CapacityQuota this reservation enforces; hub errors are reported at this document's
    paths (``spec.preemption`` is ``spec.preemptionRule``)."""
    priority, unknown_priority = priority_of(reservation, priority_classes or {}, default_priority)
    spec = reservation.spec
    groups = []
    for group in spec.resource_groups:
        listed: list[str] = []
        for flavor in group.flavors:
            listed += [r.name for r in flavor.resources if r.name not in listed]
        groups.append(
            {
                "coveredResources": listed,
                "flavors": [
                    {
                        "name": flavor.name,
                        "resources": [
                            r.model_dump(by_alias=True, exclude_none=True) for r in flavor.resources
                        ],
                    }
                    for flavor in group.flavors
                ],
            }
        )
    rule = spec.preemption_rule
    hub: dict[str, Any] = {
        "apiVersion": "capacity-launcher/v1",
        "kind": "CapacityQuota",
        "metadata": {"name": reservation.name},
        "spec": {
            "requesterPrefixes": [association_prefix(reservation.name)],
            "priority": priority,
            "allowBorrowing": bool(spec.allow_borrowing),
            "resourceGroups": groups,
            "preemption": {
                "reclaimWithinCohort": (
                    rule.reclaim_within_cohort
                    if rule and rule.reclaim_within_cohort
                    else ReclaimPolicy.NEVER
                ).value,
                **_preempting(rule),
            },
        },
    }
    if spec.cohort is not None:
        hub["spec"]["cohort"] = spec.cohort
    try:
        quota = parse_quota(hub)
    except ConfigValidationError as error:
        raise ConfigValidationError([_at_reservation_path(e) for e in error.errors]) from None
    unacted = _not_acted_on(reservation)
    if unknown_priority is not None:
        unacted.insert(0, unknown_priority)
    return Converted(quota, tuple(unacted))


def _preempting(rule: PreemptionRule | None) -> dict[str, Any]:
    """withinClusterQueue and borrowWithinCohort in the hub's spelling (issue 37); OME's
    borrowWithinCohort ``Any`` acts as ``LowerPriority``: a borrower preempts only lower
    priority, as Kueue's does."""
    hub: dict[str, Any] = {}
    if rule is None:
        return hub
    if rule.within_cluster_queue is not None:
        hub["withinClusterQueue"] = rule.within_cluster_queue
    borrow = rule.borrow_within_cohort
    if borrow is not None:
        policy = "LowerPriority" if borrow.policy == "Any" else borrow.policy or "Never"
        hub["borrowWithinCohort"] = {"policy": policy}
        if borrow.max_priority_threshold is not None:
            hub["borrowWithinCohort"]["maxPriorityThreshold"] = borrow.max_priority_threshold
    return hub


def _at_reservation_path(error: FieldError) -> FieldError:
    if error.field.startswith("spec.preemption."):
        return FieldError(
            "spec.preemptionRule." + error.field[len("spec.preemption.") :], error.rule
        )
    return error


def _not_acted_on(reservation: CapacityReservation) -> list[FieldError]:
    """Fields kept as written that change nothing here, each with why."""
    found: list[FieldError] = []
    meta, spec = reservation.metadata, reservation.spec
    if meta.namespace is not None:
        found.append(
            FieldError(
                "metadata.namespace", "kept: one deployment is one namespace; names are global"
            )
        )
    if meta.labels:
        found.append(FieldError("metadata.labels", "kept: nothing selects reservations by label"))
    if spec.compartment_id is not None:
        found.append(FieldError("spec.compartmentID", "kept: an OCI compartment; none on AWS"))
    rule = spec.preemption_rule
    borrow = None if rule is None else rule.borrow_within_cohort
    if borrow is not None and borrow.policy == "Any":
        found.append(
            FieldError(
                "spec.preemptionRule.borrowWithinCohort.policy",
                "kept: Any acts as LowerPriority; a borrower preempts only lower priority",
            )
        )
    for g, group in enumerate(spec.resource_groups):
        listed = {r.name for flavor in group.flavors for r in flavor.resources}
        for i, name in enumerate(group.covered_resources):
            if name not in listed:
                found.append(
                    FieldError(
                        f"spec.resourceGroups[{g}].coveredResources[{i}]",
                        f"kept: no flavor lists {name}, so this reservation does not limit it",
                    )
                )
    return found


def from_hub(
    quota: CapacityQuota,
    kept: CapacityReservation,
    priority_classes: Mapping[str, int] | None = None,
) -> CapacityReservation:
    """The reservation that enforces ``quota``: the hub's amounts, cohort, borrowing and reclaim
    over what ``kept`` (the document as applied) says of everything the hub does not hold.

    Raises ConfigValidationError naming each hub field OME cannot spell (lendingLimit, group
    limits, listed requesters, requesterOrigins, associationRequesters, gracePeriod; given
    ``priority_classes``, a priority other than the named class's value). Without them the
    registry carries a priority the document does not give back in its hub-fields annotation
    (docs/api-versions.md)."""
    _spellable(quota, kept, priority_classes)
    spec = quota.spec
    kept_groups = kept.spec.resource_groups
    groups = [
        {
            "coveredResources": (
                kept_groups[g].covered_resources
                if g < len(kept_groups)
                else group.covered_resources
            ),
            "flavors": [
                {
                    "name": flavor.name,
                    "resources": [
                        _resource(term.model_dump(by_alias=True, exclude_none=True), kept, g, f, r)
                        for r, term in enumerate(flavor.resources)
                    ],
                }
                for f, flavor in enumerate(group.flavors)
            ],
        }
        for g, group in enumerate(spec.resource_groups)
    ]
    document = kept.model_dump(by_alias=True, exclude_none=True)
    written = document["spec"]
    written["resourceGroups"] = groups
    written.pop("cohort", None)
    if spec.cohort is not None:
        written["cohort"] = spec.cohort
    if spec.allow_borrowing or kept.spec.allow_borrowing is not None:
        written["allowBorrowing"] = spec.allow_borrowing
    rule = written.get("preemptionRule", {})
    rule.pop("reclaimWithinCohort", None)
    reclaim = spec.preemption.reclaim_within_cohort
    if reclaim is not ReclaimPolicy.NEVER or _kept_reclaim(kept) is ReclaimPolicy.NEVER:
        rule["reclaimWithinCohort"] = reclaim.value
    _spell_preempting(rule, quota, kept)
    if rule or kept.spec.preemption_rule is not None:
        written["preemptionRule"] = rule
    else:
        written.pop("preemptionRule", None)
    return parse_reservation(document)


def _spell_preempting(
    rule: dict[str, Any], quota: CapacityQuota, kept: CapacityReservation
) -> None:
    """The hub's withinClusterQueue and borrowWithinCohort in ``rule``: as written when the hub
    says the same (a written ``Any`` stays), absent when Never and not written."""
    within = _preempting(kept.spec.preemption_rule)
    hub = quota.spec.preemption.model_dump(by_alias=True, exclude_none=True, mode="json")
    rule.pop("withinClusterQueue", None)
    if hub["withinClusterQueue"] != "Never" or "withinClusterQueue" in within:
        rule["withinClusterQueue"] = hub["withinClusterQueue"]
    written = rule.pop("borrowWithinCohort", None)
    borrow = hub["borrowWithinCohort"]
    if within.get("borrowWithinCohort") == borrow and written is not None:
        rule["borrowWithinCohort"] = written
    elif borrow["policy"] != "Never" or written is not None:
        rule["borrowWithinCohort"] = borrow


def _kept_reclaim(kept: CapacityReservation) -> ReclaimPolicy | None:
    rule = kept.spec.preemption_rule
    return None if rule is None else rule.reclaim_within_cohort


def _resource(term: dict[str, Any], kept: CapacityReservation, g: int, f: int, r: int) -> Any:
    """A hub term in OME's spelling; the amount as written when the hub's equals it."""
    spelled = {"name": term["name"], "nominalQuota": term["nominalQuota"]}
    if "borrowingLimit" in term:
        spelled["borrowingLimit"] = term["borrowingLimit"]
    try:
        written = kept.spec.resource_groups[g].flavors[f].resources[r]
    except IndexError:
        return spelled
    if written.name != term["name"]:
        return spelled
    for field, value in (
        ("nominalQuota", written.nominal_quota),
        ("borrowingLimit", written.borrowing_limit),
    ):
        if field in spelled and value is not None and _same(term["name"], value, spelled[field]):
            spelled[field] = value
    return spelled


def _same(resource: str, written: Any, hub: str) -> bool:
    try:
        return parse_amount(resource, written) == parse_amount(resource, hub)
    except ValueError:
        return False


def _spellable(
    quota: CapacityQuota, kept: CapacityReservation, priority_classes: Mapping[str, int] | None
) -> None:
    spec = quota.spec
    problems = []
    if spec.requesters or spec.requester_prefixes != [association_prefix(kept.name)]:
        problems.append(FieldError("spec.requesters", "a reservation covers its associations only"))
    if spec.requester_origins:
        problems.append(FieldError("spec.requesterOrigins", "OME has no requester bindings"))
    if spec.association_requesters:
        problems.append(
            FieldError("spec.associationRequesters", "OME has no list of who may associate")
        )
    if spec.preemption.grace_period != Preemption().grace_period:
        problems.append(FieldError("spec.preemption.gracePeriod", "OME has no grace period"))
    for g, group in enumerate(spec.resource_groups):
        if group.limits is not None:
            problems.append(
                FieldError(f"spec.resourceGroups[{g}].limits", "OME has no group limits")
            )
        for f, flavor in enumerate(group.flavors):
            for r, term in enumerate(flavor.resources):
                if term.lending_limit is not None:
                    problems.append(
                        FieldError(
                            f"spec.resourceGroups[{g}].flavors[{f}].resources[{r}].lendingLimit",
                            "OME has no lending limit",
                        )
                    )
    if priority_classes is not None and priority_of(kept, priority_classes)[0] != spec.priority:
        problems.append(
            FieldError("spec.priority", "must be the value of the reservation's PriorityClass")
        )
    if problems:
        raise ConfigValidationError(problems)
