"""The NodeClass's subnets and the zones they are in (DescribeSubnets), cached."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from capacity_launcher.adapters.aws import all_pages, aws_call, client
from capacity_launcher.adapters.cache import TtlCache
from capacity_launcher.domain.apis.config import NodeClass

if TYPE_CHECKING:  # pragma: no cover - typing only
    from capacity_launcher.adapters.shared_resolutions import SharedResolutions

SUBNETS_TTL_SECONDS = 300.0


class Subnets:
    def __init__(self, ec2: Any | None = None, shared: SharedResolutions | None = None) -> None:
        """`shared`: the resolutions the sync shares, asked first (a launcher's)."""
        self._ec2 = ec2 or client("ec2")
        self._shared = shared
        self._cache: TtlCache[dict[str, tuple[str, ...]]] = TtlCache(SUBNETS_TTL_SECONDS)

    def by_zone(self, node_class: NodeClass) -> dict[str, tuple[str, ...]]:
        """zone → subnet ids (sorted) for the NodeClass's subnets."""
        if self._shared is not None:
            resolution = self._shared.for_class(node_class)
            if resolution is not None:
                return dict(resolution.subnets)
        spec = node_class.spec
        if spec.subnet_ids:
            key: tuple[Any, ...] = ("ids", tuple(sorted(spec.subnet_ids)))
            request: dict[str, Any] = {"SubnetIds": sorted(spec.subnet_ids)}
            return self._cache.get_or_load(
                key, lambda: self._describe([request], node_class, "spec.subnetIds")
            )
        terms = spec.subnet_selector_terms or []
        requests: list[dict[str, Any]] = []
        for term in terms:
            if term.id:
                requests.append({"SubnetIds": [term.id]})
            else:
                tags = term.tags or {}
                requests.append(
                    {
                        "Filters": [
                            {"Name": f"tag:{k}", "Values": [v]} for k, v in sorted(tags.items())
                        ]
                    }
                )
        key = ("terms", tuple(repr(r) for r in requests))
        return self._cache.get_or_load(
            key, lambda: self._describe(requests, node_class, "spec.subnetSelectorTerms")
        )

    def _describe(
        self, requests: list[dict[str, Any]], node_class: NodeClass, field: str
    ) -> dict[str, tuple[str, ...]]:
        zones: dict[str, set[str]] = {}
        with aws_call("DescribeSubnets", node_class=node_class, field=field):
            for request in requests:
                pages = all_pages(self._ec2.describe_subnets, **request)
                for page in pages:
                    for subnet in page["Subnets"]:
                        zones.setdefault(subnet["AvailabilityZone"], set()).add(subnet["SubnetId"])
        return {zone: tuple(sorted(ids)) for zone, ids in sorted(zones.items())}
