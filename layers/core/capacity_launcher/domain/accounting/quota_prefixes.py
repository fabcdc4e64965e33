"""CapacityQuota requester prefixes (an OME reservation's associations, docs/ome.md): a prefix
may not cover another quota's requester, nor overlap its prefix, in a NodePool both name."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from capacity_launcher.domain.field_errors import FieldError


class CapacityQuota(Protocol):
    """What these rules read of a quota (domain/apis/quotas.py's, which imports this module)."""

    @property
    def name(self) -> str: ...

    @property
    def spec(self) -> Any: ...

    def flavors(self) -> Sequence[Any]: ...


def prefix_conflicts(quotas: Sequence[CapacityQuota]) -> list[FieldError]:
    """A requester prefix may not cover another quota's requester, nor overlap its prefix, in a
    flavor both name (a prefix clash blames the later quota by name, as requesters do)."""
    found: list[FieldError] = []
    for quota in sorted(quotas, key=lambda q: q.name):
        for index, prefix in enumerate(quota.spec.requester_prefixes):
            for other in sorted(quotas, key=lambda q: q.name):
                clash = _overlap(prefix, quota, other)
                if clash is not None:
                    found.append(
                        FieldError(
                            f"CapacityQuota {quota.name}: spec.requesterPrefixes[{index}]",
                            f"prefix {prefix!r} overlaps {clash!r}, already covered in flavor "
                            f"{_clash_flavor(quota, other)} by CapacityQuota {other.name}; a "
                            "requester has at most one quota per flavor",
                        )
                    )
    return found


def _clash_flavor(quota: CapacityQuota, other: CapacityQuota) -> str:
    shared: set[str] = {f.name for f in quota.flavors()} & {f.name for f in other.flavors()}
    return min(shared)


def _overlap(prefix: str, quota: CapacityQuota, other: CapacityQuota) -> str | None:
    """What of ``other`` the ``prefix`` of ``quota`` clashes with in a shared flavor, if any."""
    if other.name == quota.name or not {f.name for f in quota.flavors()} & {
        f.name for f in other.flavors()
    }:
        return None
    requesters: list[str] = other.spec.requesters
    prefixes: list[str] = other.spec.requester_prefixes
    covered = next((r for r in requesters if r.startswith(prefix)), None)
    if covered is not None:
        return covered
    if other.name > quota.name:
        return None
    return next(
        (p for p in prefixes if p.startswith(prefix) or prefix.startswith(p)),
        None,
    )
