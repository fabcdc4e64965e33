"""The requirements' algebra, as Karpenter holds it: per key a `Constraint` (an explicit value
set or its complement, optional integer bounds, whether the label may be absent), a pool's or a
request's `Requirements` as one constraint per key, their intersection and matching, and a pool's
narrowed by a request's (`narrow`). The keys, operators and the Requirement document:
domain/capacity/requirements.py."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from capacity_launcher.domain.capacity.requirements import Operator, Requirement, canonical_value
from capacity_launcher.domain.errors import RequirementsConflict

_CANONICAL_INTEGER = re.compile(r"^(0|-?[1-9][0-9]*)$")


def _sorted(values: Iterable[str]) -> list[str]:
    return sorted(values, key=_sort_key)


@dataclass(frozen=True)
class Constraint:
    """What one key admits: a value set or its complement, integer bounds, and absence."""

    values: frozenset[str] = frozenset()
    complement: bool = True
    gt: int | None = None
    lt: int | None = None
    absent_ok: bool = True

    @classmethod
    def of(cls, requirement: Requirement) -> Constraint:
        values = frozenset(requirement.values)
        match requirement.operator:
            case Operator.IN:
                return cls(values, complement=False, absent_ok=False)
            case Operator.NOT_IN:
                return cls(values, complement=True, absent_ok=True)
            case Operator.EXISTS:
                return cls(absent_ok=False)
            case Operator.DOES_NOT_EXIST:
                return cls(complement=False, absent_ok=True)
            case Operator.GT:
                return cls(gt=int(requirement.values[0]), absent_ok=False)._normalized()
            case Operator.LT:
                return cls(lt=int(requirement.values[0]), absent_ok=False)._normalized()
        raise AssertionError(requirement.operator)  # pragma: no cover - exhaustive match

    @property
    def bounded(self) -> bool:
        return self.gt is not None or self.lt is not None

    def _within_bounds(self, value: str) -> bool:
        if not self.bounded:
            return True
        number = _as_int(value)
        return (
            number is not None
            and (self.gt is None or number > self.gt)
            and (self.lt is None or number < self.lt)
        )

    def admits(self, value: str | None) -> bool:
        """Whether a label with this value (None: the label is absent) satisfies the constraint."""
        if value is None:
            return self.absent_ok
        return (value in self.values) != self.complement and self._within_bounds(value)

    def is_empty(self) -> bool:
        """Admits nothing at all, not even an absent label."""
        return not self.absent_ok and not self.complement and not self.values

    def is_unconstrained(self) -> bool:
        return self.absent_ok and self.complement and not self.values and not self.bounded

    def intersect(self, other: Constraint) -> Constraint:
        if not self.complement and not other.complement:
            values, complement = self.values & other.values, False
        elif not self.complement:
            values, complement = self.values - other.values, False
        elif not other.complement:
            values, complement = other.values - self.values, False
        else:
            values, complement = self.values | other.values, True
        return Constraint(
            values=values,
            complement=complement,
            gt=_pick(max, self.gt, other.gt),
            lt=_pick(min, self.lt, other.lt),
            absent_ok=self.absent_ok and other.absent_ok,
        )._normalized()

    def _normalized(self) -> Constraint:
        """One spelling per meaning: bounds folded into explicit sets, empty ranges made empty."""
        if not self.bounded:
            return self
        values = frozenset(value for value in self.values if self._within_bounds(value))
        if not self.complement:
            return Constraint(values, complement=False, absent_ok=False)
        if self.gt is not None and self.lt is not None:
            size = self.lt - self.gt - 1
            if size <= len(values) and all(
                str(number) in values for number in range(self.gt + 1, self.lt)
            ):
                return _EMPTY
        return Constraint(values, complement=True, gt=self.gt, lt=self.lt, absent_ok=False)

    def requirements(self, key: str) -> list[Requirement]:
        """The fewest requirements that spell this constraint, in a fixed order."""
        if self.is_empty():
            return [
                Requirement(key=key, operator=Operator.EXISTS),
                Requirement(key=key, operator=Operator.DOES_NOT_EXIST),
            ]
        if not self.complement:
            if not self.values:
                return [Requirement(key=key, operator=Operator.DOES_NOT_EXIST)]
            return [Requirement(key=key, operator=Operator.IN, values=tuple(_sorted(self.values)))]
        terms: list[Requirement] = []
        if not self.absent_ok and not self.bounded:
            terms.append(Requirement(key=key, operator=Operator.EXISTS))
        if self.values:
            terms.append(
                Requirement(key=key, operator=Operator.NOT_IN, values=tuple(_sorted(self.values)))
            )
        if self.gt is not None:
            terms.append(Requirement(key=key, operator=Operator.GT, values=(str(self.gt),)))
        if self.lt is not None:
            terms.append(Requirement(key=key, operator=Operator.LT, values=(str(self.lt),)))
        return terms

    def describe(self) -> str:
        """Human words for messages: "[on-demand, reserved]", "any value except [spot]"."""
        if self.is_empty():
            return "no value"
        if not self.complement:
            if not self.values:
                return "no value (the label must be absent)"
            return "[" + ", ".join(_sorted(self.values)) + "]"
        parts = ["any value" if not self.bounded else "values"]
        if self.gt is not None:
            parts.append(f"> {self.gt}")
        if self.lt is not None:
            parts.append(f"{'and ' if self.gt is not None else ''}< {self.lt}")
        if self.values:
            parts.append("except [" + ", ".join(_sorted(self.values)) + "]")
        if self.absent_ok:
            parts.append("or none")
        return " ".join(parts)


_EMPTY = Constraint(complement=False, absent_ok=False)


_UNCONSTRAINED = Constraint()


class Requirements:
    """An immutable set of requirements, ANDed; keys without a requirement admit anything."""

    __slots__ = ("_constraints", "_min_values")

    def __init__(
        self,
        constraints: Mapping[str, Constraint] | None = None,
        min_values: Mapping[str, int] | None = None,
    ) -> None:
        kept = {
            key: constraint
            for key, constraint in (constraints or {}).items()
            if not constraint.is_unconstrained()
        }
        self._constraints: Mapping[str, Constraint] = dict(sorted(kept.items()))
        # Flexibility asked per key; only keys that are constrained can carry it.
        self._min_values: Mapping[str, int] = {
            key: n for key, n in sorted((min_values or {}).items()) if key in self._constraints
        }

    @classmethod
    def of(cls, requirements: Iterable[Requirement]) -> Requirements:
        constraints: dict[str, Constraint] = {}
        min_values: dict[str, int] = {}
        for requirement in requirements:
            constraint = Constraint.of(requirement)
            existing = constraints.get(requirement.key)
            constraints[requirement.key] = (
                constraint if existing is None else existing.intersect(constraint)
            )
            if requirement.min_values is not None:
                min_values[requirement.key] = max(
                    requirement.min_values, min_values.get(requirement.key, 0)
                )
        return cls(constraints, min_values)

    def constraint(self, key: str) -> Constraint:
        return self._constraints.get(key, _UNCONSTRAINED)

    def min_values(self) -> Mapping[str, int]:
        """Per key, how many distinct values whatever is launched must be chosen among."""
        return self._min_values

    def intersect(self, other: Requirements) -> Requirements:
        merged = dict(self._constraints)
        for key, constraint in other._constraints.items():
            merged[key] = constraint if key not in merged else merged[key].intersect(constraint)
        min_values = dict(self._min_values)
        for key, n in other._min_values.items():
            min_values[key] = max(n, min_values.get(key, 0))
        return Requirements(merged, min_values)

    def without(self, *keys: str) -> Requirements:
        """The same requirements with ``keys`` left unconstrained."""
        return Requirements(
            {k: c for k, c in self._constraints.items() if k not in keys}, self._min_values
        )

    def __and__(self, other: Requirements) -> Requirements:
        return self.intersect(other)

    def allows(self, key: str, value: str | None) -> bool:
        """Whether ``key`` may have ``value``; None asks whether the label may be absent."""
        if value is not None:
            value = canonical_value(key, value)
        return self.constraint(key).admits(value)

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(self.allows(key, labels.get(key)) for key in self._constraints)

    def allowed_values(self, key: str, candidates: Iterable[str]) -> list[str]:
        return [candidate for candidate in candidates if self.allows(key, candidate)]

    def empty_keys(self) -> list[str]:
        return [key for key, constraint in self._constraints.items() if constraint.is_empty()]

    def keys(self) -> frozenset[str]:
        return frozenset(self._constraints)

    def __contains__(self, key: object) -> bool:
        """Whether ``key`` is constrained at all."""
        return key in self._constraints

    def describe(self, key: str) -> str:
        return self.constraint(key).describe()

    def to_list(self) -> list[Requirement]:
        """Canonical form: keys sorted, each key spelled by the fewest requirements."""
        spelled: list[Requirement] = []
        for key, constraint in self._constraints.items():
            terms = constraint.requirements(key)
            if key in self._min_values:
                terms[0] = terms[0].model_copy(update={"min_values": self._min_values[key]})
            spelled += terms
        return spelled

    def __iter__(self) -> Iterator[Requirement]:
        return iter(self.to_list())

    def __len__(self) -> int:
        return len(self._constraints)

    def __bool__(self) -> bool:
        return bool(self._constraints)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Requirements):
            return NotImplemented
        return self._constraints == other._constraints and self._min_values == other._min_values

    def __hash__(self) -> int:
        return hash((frozenset(self._constraints.items()), frozenset(self._min_values.items())))

    def __repr__(self) -> str:
        terms = ", ".join(
            f"{r.key} {r.operator}{' ' + str(list(r.values)) if r.values else ''}"
            for r in self.to_list()
        )
        return f"Requirements({terms})"


def narrow(pool: Requirements, request: Requirements, *, strict: bool = False) -> Requirements:
    """The pool's requirements narrowed by a request's; a key left with no value is a conflict.

    With ``strict``, a request that names values (In) the pool does not allow is refused too,
    even when some of its values remain: it tried to widen the pool.
    """
    narrowed = pool.intersect(request)
    conflicts: list[str] = []
    keys: list[str] = []
    for key in sorted(request.keys()):
        pool_constraint, request_constraint = pool.constraint(key), request.constraint(key)
        emptied = narrowed.constraint(key).is_empty()
        widened = (
            strict
            and not request_constraint.complement
            and any(not pool_constraint.admits(value) for value in request_constraint.values)
        )
        if not (emptied or widened):
            continue
        keys.append(key)
        if request_constraint.is_empty():
            conflicts.append(
                f"requirements[{key}]: request allows no value: "
                "its requirements on this key contradict each other"
            )
        elif pool_constraint.is_empty():
            conflicts.append(f"requirements[{key}]: node pool allows no value for this key")
        else:
            conflicts.append(
                f"requirements[{key}]: request allows {request_constraint.describe()} "
                f"but node pool allows only {pool_constraint.describe()}: "
                "requirements can only narrow a node pool"
            )
    for key, wanted in narrowed.min_values().items():
        constraint = narrowed.constraint(key)
        if not constraint.complement and len(constraint.values) < wanted and key not in keys:
            keys.append(key)
            conflicts.append(
                f"requirements[{key}]: minValues={wanted} needs at least {wanted} values "
                f"but only {constraint.describe()} remain"
            )
    if conflicts:
        raise RequirementsConflict("; ".join(conflicts), keys=keys)
    return narrowed


def _as_int(value: str) -> int | None:
    """The integer a label value spells in canonical decimal form, else None ("04" is not 4)."""
    return int(value) if _CANONICAL_INTEGER.match(value) else None


def _sort_key(value: str) -> tuple[int, int, str]:
    number = _as_int(value)
    return (0, number, value) if number is not None else (1, 0, value)


def _pick(choose: Any, first: int | None, second: int | None) -> int | None:
    if first is None:
        return second
    if second is None:
        return first
    result: int = choose(first, second)
    return result
