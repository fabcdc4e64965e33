"""The NodeClass's security groups: its ids, or what its selector terms find, cached.

DescribeSecurityGroups by `group-id`, `group-name` or `tag:KEY` filters, one call per term, the
union of what they find: as Karpenter's EC2NodeClass resolves securityGroupSelectorTerms."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from capacity_launcher.adapters.aws import all_pages, aws_call, client
from capacity_launcher.adapters.cache import TtlCache
from capacity_launcher.domain.apis.config import NodeClass
from capacity_launcher.domain.errors import NO_SECURITY_GROUP_SELECTED, NodeClassRefused

if TYPE_CHECKING:  # pragma: no cover - typing only
    from capacity_launcher.adapters.shared_resolutions import SharedResolutions

SECURITY_GROUPS_TTL_SECONDS = 300.0
_FIELD = "spec.securityGroupSelectorTerms"


class SecurityGroups:
    def __init__(self, ec2: Any | None = None, shared: SharedResolutions | None = None) -> None:
        """`shared`: the resolutions the sync shares, asked first (a launcher's)."""
        self._ec2 = ec2 or client("ec2")
        self._shared = shared
        self._cache: TtlCache[tuple[str, ...]] = TtlCache(SECURITY_GROUPS_TTL_SECONDS)

    def ids(self, node_class: NodeClass) -> tuple[str, ...]:
        """The security group ids to launch with (sorted); NodeClassRefused when the selector
        terms find none."""
        spec = node_class.spec
        if spec.security_group_ids:
            return tuple(sorted(spec.security_group_ids))
        if self._shared is not None:
            resolution = self._shared.for_class(node_class)
            if resolution is not None and resolution.security_groups:
                return resolution.security_groups
        filters = [_filters(term) for term in spec.security_group_selector_terms or []]
        key = tuple(repr(f) for f in filters)
        found = self._cache.get_or_load(key, lambda: self._describe(filters, node_class))
        if not found:
            raise NodeClassRefused(
                NO_SECURITY_GROUP_SELECTED,
                "selects no security group in this region",
                node_class.metadata.name,
                _FIELD,
            )
        return found

    def _describe(
        self, filters: list[list[dict[str, Any]]], node_class: NodeClass
    ) -> tuple[str, ...]:
        found: set[str] = set()
        with aws_call("DescribeSecurityGroups", node_class=node_class, field=_FIELD):
            for term in filters:
                pages = all_pages(self._ec2.describe_security_groups, Filters=term)
                found |= {g["GroupId"] for page in pages for g in page["SecurityGroups"]}
        return tuple(sorted(found))


def _filters(term: Any) -> list[dict[str, Any]]:
    if term.id:
        return [{"Name": "group-id", "Values": [term.id]}]
    if term.name:
        return [{"Name": "group-name", "Values": [term.name]}]
    return [{"Name": f"tag:{k}", "Values": [v]} for k, v in sorted((term.tags or {}).items())]
