"""CapacityQuota: a team's nominal quota per NodePool (flavor) and resource, shared in a cohort.

The document follows OME's CapacityReservation / Kueue's ClusterQueue (docs/quotas.md). Amounts
are held in the units of ``Resources.amount``: cores, MiB, GPUs, instances. A quota limits only
the resources it covers; every error names the field (by document path) and the rule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    Field,
    StrictBool,
    StrictInt,
    ValidationError,
    ValidationInfo,
    field_serializer,
    field_validator,
    model_validator,
)

from capacity_launcher.domain.apis.config import _TopLevel
from capacity_launcher.domain.apis.config_base import (
    BUILT_ON_FIRST_USE,
    Name,
    _Document,
    no_repeats,
)
from capacity_launcher.domain.apis.fair_sharing import FairSharing
from capacity_launcher.domain.apis.ome.associations import (
    ASSOCIATION_PREFIX,
    prefix_reservation,
)
from capacity_launcher.domain.apis.quota_preemption import (
    MAX_PRIORITY,
    MIN_PRIORITY,
    Preemption,
    ReclaimPolicy,
)
from capacity_launcher.domain.errors import ConfigValidationError
from capacity_launcher.domain.field_errors import FieldError, bounded, field_errors, field_path
from capacity_launcher.domain.quantities import (
    CPU,
    DIMENSIONS,
    MEMORY,
    PoolLimits,
    format_cpu,
    format_memory,
    parse_count,
    parse_cpu,
    parse_memory_mib,
)
from capacity_launcher.domain.requester_origins import MAX_REQUESTER_LENGTH, RequesterOrigins

MAX_REQUESTERS = 100
MAX_PREFIXES = 10
MAX_RESOURCE_GROUPS = 4
MAX_FLAVORS = 64
RESOURCE_RULE = f"must be one of {', '.join(DIMENSIONS)}"


def parse_amount(resource: str, value: object) -> Decimal:
    """One resource's quantity in its unit (cores, MiB, count); raises ValueError with the rule."""
    if resource == CPU:
        return parse_cpu(value)  # type: ignore[arg-type]
    if resource == MEMORY:
        return Decimal(parse_memory_mib(value))  # type: ignore[arg-type]
    return Decimal(parse_count(value))  # type: ignore[arg-type]


def format_amount(resource: str, amount: Decimal) -> str:
    """The document spelling of an amount: cores as '2' or '1500m', memory with units ('8Ti')."""
    if resource == CPU:
        return format_cpu(amount)
    if resource == MEMORY:
        return format_memory(int(amount))
    return str(int(amount))


class Problems(ValueError):
    """Several broken rules found by one validator, each at its own path below the validator's."""

    def __init__(self, errors: Sequence[FieldError]) -> None:
        self.errors = list(errors)
        super().__init__("; ".join(str(error) for error in self.errors))


def _requester(value: str) -> str:
    if not value or len(value) > MAX_REQUESTER_LENGTH or not value.isprintable():
        raise ValueError(f"must be 1 to {MAX_REQUESTER_LENGTH} printable characters")
    return value


Requester = Annotated[str, AfterValidator(_requester)]


class QuotaResource(_Document):
    """One resource of one flavor: the nominal quota, and what may be borrowed or lent."""

    model_config = BUILT_ON_FIRST_USE

    name: str
    nominal_quota: Decimal
    borrowing_limit: Decimal | None = None
    lending_limit: Decimal | None = None

    @field_validator("name")
    @classmethod
    def _known(cls, name: str) -> str:
        if name not in DIMENSIONS:
            raise ValueError(RESOURCE_RULE)
        return name

    @field_validator("nominal_quota", "borrowing_limit", "lending_limit", mode="before")
    @classmethod
    def _quantity(cls, value: Any, info: ValidationInfo) -> Decimal | None:
        if value is None:
            return None
        name = info.data.get("name")
        if name is None:
            return Decimal(0)  # the name is refused: the amount's unit is unknown, so unchecked
        return parse_amount(name, value)

    @model_validator(mode="after")
    def _lending_within_nominal(self) -> QuotaResource:
        if self.lending_limit is not None and self.lending_limit > self.nominal_quota:
            raise Problems([FieldError("lendingLimit", "must be at most nominalQuota")])
        return self

    @field_serializer("nominal_quota", "borrowing_limit", "lending_limit")
    def _text(self, amount: Decimal | None) -> str | None:
        return None if amount is None else format_amount(self.name, amount)

    @property
    def lendable(self) -> Decimal:
        """The part of the nominal quota the cohort may borrow while this quota leaves it idle."""
        return self.nominal_quota if self.lending_limit is None else self.lending_limit

    @property
    def guaranteed(self) -> Decimal:
        """The part never lent: always there for the quota's own requesters."""
        return self.nominal_quota - self.lendable


class Flavor(_Document):
    """A NodePool, and this quota's amounts of each covered resource in it."""

    model_config = BUILT_ON_FIRST_USE

    name: Name
    resources: list[QuotaResource] = Field(min_length=1, max_length=16)

    def resource(self, name: str) -> QuotaResource | None:
        return next((r for r in self.resources if r.name == name), None)


class ResourceGroup(_Document):
    """Resources quoted together, for one or more flavors (every flavor lists each of them)."""

    model_config = BUILT_ON_FIRST_USE

    covered_resources: list[str] = Field(min_length=1, max_length=16)
    flavors: list[Flavor] = Field(min_length=1, max_length=MAX_FLAVORS)
    # Optional, beyond OME's sketch: a cap on this quota's use summed over the group's flavors,
    # the "limits across pools" budget (docs/quotas.md).
    limits: PoolLimits | None = None

    @field_validator("covered_resources")
    @classmethod
    def _covered(cls, names: list[str]) -> list[str]:
        unknown = [name for name in names if name not in DIMENSIONS]
        if unknown:
            raise ValueError(f"{', '.join(repr(n) for n in unknown)}: {RESOURCE_RULE}")
        return no_repeats(names)

    @model_validator(mode="after")
    def _flavors_list_the_covered_resources(self) -> ResourceGroup:
        covered = set(self.covered_resources)
        problems = [p for i, f in enumerate(self.flavors) for p in self._flavor_problems(i, f)]
        if self.limits is not None:
            uncovered = [
                d for d in DIMENSIONS if self.limits.limit_for(d) is not None and d not in covered
            ]
            if uncovered:
                problems.append(
                    FieldError("limits", f"{', '.join(uncovered)}: not in coveredResources")
                )
        if problems:
            raise Problems(problems)
        return self

    def _flavor_problems(self, index: int, flavor: Flavor) -> list[FieldError]:
        """A flavor lists each covered resource once, and no other."""
        names = [r.name for r in flavor.resources]
        where = f"flavors[{index}].resources"
        problems = []
        extra = [n for n in names if n not in self.covered_resources]
        if extra:
            problems.append(
                FieldError(where, f"{', '.join(extra)}: not in this group's coveredResources")
            )
        missing = ", ".join(n for n in self.covered_resources if n not in names)
        if missing:
            problems.append(
                FieldError(where, f"must list every covered resource; missing {missing}")
            )
        if len(set(names)) != len(names):
            problems.append(FieldError(where, "must not repeat a resource"))
        return problems


def repeats_across_groups(groups: Sequence[ResourceGroup]) -> list[FieldError]:
    """A resource covered by two groups, a flavor listed twice (a quota's or a Cohort's)."""
    problems = []
    seen_resources: dict[str, int] = {}
    seen_flavors: dict[str, int] = {}
    for g, group in enumerate(groups):
        for name in group.covered_resources:
            if name in seen_resources:
                problems.append(
                    FieldError(
                        f"resourceGroups[{g}].coveredResources",
                        f"{name} is already covered by resourceGroups[{seen_resources[name]}]; "
                        "a resource belongs to one group",
                    )
                )
            seen_resources.setdefault(name, g)
        for f, flavor in enumerate(group.flavors):
            if flavor.name in seen_flavors:
                problems.append(
                    FieldError(
                        f"resourceGroups[{g}].flavors[{f}].name",
                        f"{flavor.name} is already listed in "
                        f"resourceGroups[{seen_flavors[flavor.name]}]; a flavor appears once",
                    )
                )
            seen_flavors.setdefault(flavor.name, g)
    return problems


class CapacityQuotaSpec(_Document):
    model_config = BUILT_ON_FIRST_USE

    requesters: list[Requester] = Field(default=[], max_length=MAX_REQUESTERS)
    # Optional: also every requester that starts with one of these (a reservation's associations,
    # docs/ome.md); at least one requester or prefix.
    requester_prefixes: list[Requester] = Field(default=[], max_length=MAX_PREFIXES)
    cohort: Name | None = None
    priority: StrictInt = Field(default=0, ge=MIN_PRIORITY, le=MAX_PRIORITY)
    allow_borrowing: StrictBool = False
    resource_groups: list[ResourceGroup] = Field(min_length=1, max_length=MAX_RESOURCE_GROUPS)
    preemption: Preemption = Field(default_factory=Preemption)
    # Kueue's spec.fairSharing: the weight of this quota's share when waiting requests of one
    # priority are admitted (docs/queueing.md, "Fair sharing"); absent: weight 1.
    fair_sharing: FairSharing | None = None
    # Who may claim each requester (docs/quotas.md "Who is the requester?"); unbound: anyone.
    requester_origins: dict[Requester, RequesterOrigins] = Field(
        default_factory=dict, max_length=MAX_REQUESTERS
    )
    # A reservation's quota (a prefix capacityreservation/NAME/): the requesters that may
    # associate with it (docs/ome.md); none listed, any requester may, as before the field.
    association_requesters: list[Requester] = Field(default=[], max_length=MAX_REQUESTERS)

    @field_validator("requesters", "requester_prefixes", "association_requesters")
    @classmethod
    def _distinct_requesters(cls, requesters: list[str]) -> list[str]:
        return no_repeats(requesters)

    @model_validator(mode="after")
    def _covers_someone(self) -> CapacityQuotaSpec:
        if not self.requesters and not self.requester_prefixes:
            raise Problems([FieldError("requesters", "must list at least one requester")])
        return self

    @model_validator(mode="after")
    def _consistent(self) -> CapacityQuotaSpec:
        problems = [*self._group_problems(), *self._cohort_problems(), *self._binding_problems()]
        if problems:
            raise Problems(problems)
        return self

    def _group_problems(self) -> list[FieldError]:
        """A resource in two groups, a flavor listed twice, limits that need a cohort."""
        problems = repeats_across_groups(self.resource_groups)
        for g, group in enumerate(self.resource_groups):
            for f, flavor in enumerate(group.flavors):
                for r, resource in enumerate(flavor.resources):
                    where = f"resourceGroups[{g}].flavors[{f}].resources[{r}]"
                    problems += self._limit_problems(where, resource)
        return problems

    def _limit_problems(self, where: str, resource: QuotaResource) -> list[FieldError]:
        """Borrowing and lending happen within a cohort; borrowing also needs allowBorrowing."""
        problems = []
        if resource.borrowing_limit is not None and self.cohort is None:
            problems.append(FieldError(f"{where}.borrowingLimit", "needs spec.cohort"))
        elif resource.borrowing_limit is not None and not self.allow_borrowing:
            problems.append(
                FieldError(f"{where}.borrowingLimit", "needs spec.allowBorrowing: true")
            )
        if resource.lending_limit is not None and self.cohort is None:
            problems.append(FieldError(f"{where}.lendingLimit", "needs spec.cohort"))
        return problems

    def _cohort_problems(self) -> list[FieldError]:
        problems = []
        if self.allow_borrowing and self.cohort is None:
            problems.append(
                FieldError("allowBorrowing", "needs spec.cohort: quotas borrow within a cohort")
            )
        if self.preemption.reclaim_within_cohort is not ReclaimPolicy.NEVER and not self.cohort:
            problems.append(FieldError("preemption.reclaimWithinCohort", "needs spec.cohort"))
        return problems

    def _binding_problems(self) -> list[FieldError]:
        """Origins bind only the quota's own requesters; associations need a reservation prefix."""
        problems = []
        for requester in self.requester_origins:
            if requester not in self.requesters and requester not in self.association_requesters:
                problems.append(
                    FieldError(
                        field_path(("requesterOrigins", requester)),
                        "is not in spec.requesters or spec.associationRequesters; a quota binds "
                        "only its own requesters",
                    )
                )
        if self.association_requesters and not self.reservations():
            problems.append(
                FieldError(
                    "associationRequesters",
                    f"needs a reservation's prefix in spec.requesterPrefixes "
                    f"({ASSOCIATION_PREFIX}NAME/): it lists who may associate with a reservation",
                )
            )
        return problems

    @property
    def fair_weight(self) -> Decimal:
        """spec.fairSharing.weight, 1 when the quota does not set it (as Kueue defaults it)."""
        return self.fair_sharing.weight if self.fair_sharing is not None else Decimal(1)

    def reservations(self) -> list[str]:
        """The reservations whose associations this quota covers (its prefixes of that form)."""
        return [r for r in map(prefix_reservation, self.requester_prefixes) if r is not None]


class CapacityQuota(_TopLevel):
    model_config = BUILT_ON_FIRST_USE

    kind: Literal["CapacityQuota"]
    spec: CapacityQuotaSpec

    def flavor(self, name: str) -> Flavor | None:
        """This quota's amounts in one NodePool, if it names it."""
        for group in self.spec.resource_groups:
            for flavor in group.flavors:
                if flavor.name == name:
                    return flavor
        return None

    def flavors(self) -> list[Flavor]:
        return [flavor for group in self.spec.resource_groups for flavor in group.flavors]

    def covers(self, requester: str | None) -> bool:
        if requester is None:
            return False
        return requester in self.spec.requesters or any(
            requester.startswith(prefix) for prefix in self.spec.requester_prefixes
        )

    @property
    def cohort_key(self) -> str:
        """Quotas without a cohort are a cohort of one: keyed apart from every named cohort."""
        return self.spec.cohort or f"quota/{self.name}"

    def usage_item(self, flavor: str) -> str:
        """The key of the item that keeps this quota's cohort's use of ``flavor``."""
        return usage_item_key(self.cohort_key, flavor)


def usage_item_key(cohort_key: str, flavor: str) -> str:
    """The key of the item that keeps a cohort's use of one flavor (docs/quotas.md)."""
    return f"QuotaUsage#{cohort_key}#{flavor}"


def parse_quota(data: Mapping[str, Any]) -> CapacityQuota:
    """Validate a CapacityQuota document; every broken rule is reported at its document path."""
    try:
        return CapacityQuota.model_validate(dict(data))
    except ValidationError as error:
        raise ConfigValidationError(problem_field_errors(error)) from None


def problem_field_errors(error: ValidationError) -> list[FieldError]:
    """pydantic's errors by document path, with each of a validator's Problems at its own path."""
    details = error.errors(include_url=False, include_input=False)
    # One shared wording per detail, in order (limit above the count: nothing is cut here).
    plain = field_errors(error, limit=len(details) + 1)
    found: list[FieldError] = []
    for detail, shared in zip(details, plain, strict=False):
        problems = (detail.get("ctx") or {}).get("error")
        if isinstance(problems, Problems):
            base = field_path(detail["loc"])
            found += [FieldError(f"{base}.{p.field}", p.rule) for p in problems.errors]
        else:
            found.append(shared)
    return bounded(found)
