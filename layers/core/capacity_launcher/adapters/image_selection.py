"""The image a NodeClass's `imageSelectorTerms` find: DescribeImages per term (ids; or name,
owner and `tag:KEY` filters), the newest by CreationDate among all they find, as Karpenter picks
among its amiSelectorTerms. A term that names no owner looks at `self` and `amazon` images only
(Karpenter's default, so that a name cannot pick up another account's image). Cached."""

from __future__ import annotations

from typing import Any

from capacity_launcher.adapters.aws import aws_call, client
from capacity_launcher.adapters.cache import TtlCache
from capacity_launcher.domain.apis.config import NodeClass
from capacity_launcher.domain.capacity.launch_options import ImageSelectorTerm
from capacity_launcher.domain.errors import NO_IMAGE_SELECTED, NodeClassRefused

IMAGE_SELECTION_TTL_SECONDS = 300.0
DEFAULT_OWNERS = ("self", "amazon")
_FIELD = "spec.imageSelectorTerms"


def describe_request(term: ImageSelectorTerm) -> dict[str, Any]:
    """DescribeImages' arguments for one term."""
    if term.id is not None:
        return {"ImageIds": [term.id]}
    filters = [{"Name": f"tag:{k}", "Values": [v]} for k, v in sorted((term.tags or {}).items())]
    if term.name is not None:
        filters.append({"Name": "name", "Values": [term.name]})
    request: dict[str, Any] = {"Owners": [term.owner] if term.owner else list(DEFAULT_OWNERS)}
    if filters:
        request["Filters"] = filters
    return request


class ImageSelection:
    def __init__(self, ec2: Any | None = None) -> None:
        self._ec2 = ec2 or client("ec2")
        self._cache: TtlCache[str | None] = TtlCache(IMAGE_SELECTION_TTL_SECONDS)

    def image_id(self, node_class: NodeClass) -> str:
        """The newest image the terms find; NodeClassRefused naming the field when none."""
        requests = [describe_request(t) for t in node_class.spec.image_selector_terms or []]
        key = tuple(repr(r) for r in requests)
        found = self._cache.get_or_load(key, lambda: self._newest(requests, node_class))
        if found is None:
            raise NodeClassRefused(
                NO_IMAGE_SELECTED,
                "selects no image in this region",
                node_class.metadata.name,
                _FIELD,
            )
        return found

    def _newest(self, requests: list[dict[str, Any]], node_class: NodeClass) -> str | None:
        images: dict[str, str] = {}
        with aws_call("DescribeImages", node_class=node_class, field=_FIELD):
            for request in requests:
                for image in self._ec2.describe_images(**request)["Images"]:
                    images[image["ImageId"]] = image.get("CreationDate", "")
        if not images:
            return None
        return max(images, key=lambda image_id: (images[image_id], image_id))
