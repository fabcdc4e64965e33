"""EC2 allows 50 tags per resource; capacity-launcher adds its own to every instance and fleet, so
the NodeClass (at apply) and each request (before any launch) are held to what is left."""

from datetime import UTC, datetime
from typing import Any

import pytest

from capacity_launcher.domain.apis.config import (
    MAX_NODE_CLASS_TAGS,
    SERVICE_INSTANCE_TAGS,
    NodeClass,
    PoolSet,
)
from capacity_launcher.domain.apis.documents import parse_document
from capacity_launcher.domain.errors import ConfigValidationError, RequestRejected
from capacity_launcher.domain.launch_request import parse_launch_request
from capacity_launcher.domain.records.tags import check_instance_tag_count, instance_tags
from capacity_launcher.service.resolution import resolve


def _node_class(tag_count: int) -> dict[str, Any]:
    return {
        "apiVersion": "capacity-launcher/v1",
        "kind": "NodeClass",
        "metadata": {"name": "tagged"},
        "spec": {
            "imageId": "ami-0123456789abcdef0",
            "subnetIds": ["subnet-0123456789abcdef0"],
            "securityGroupIds": ["sg-0123456789abcdef0"],
            "tags": {f"class-{i}": "v" for i in range(tag_count)},
        },
    }


def _request(tag_count: int) -> Any:
    tags = {f"request-{i}": "v" for i in range(tag_count)}
    return parse_launch_request({"requestId": "r-1", "count": 1, "tags": tags})


def test_the_service_adds_exactly_the_tags_it_counts() -> None:
    node_class = parse_document(_node_class(3))
    assert isinstance(node_class, NodeClass)
    tags = instance_tags(node_class, "pool", _request(2), "prod")
    assert len(tags) == SERVICE_INSTANCE_TAGS + 3 + 2


def test_a_node_class_with_room_for_the_services_tags_applies() -> None:
    assert isinstance(parse_document(_node_class(MAX_NODE_CLASS_TAGS)), NodeClass)


def test_a_node_class_leaving_no_room_for_the_services_tags_is_refused_naming_field_and_rule() -> (
    None
):
    with pytest.raises(ConfigValidationError) as raised:
        parse_document(_node_class(MAX_NODE_CLASS_TAGS + 1))
    ((error,),) = [raised.value.errors]
    assert error.field == "spec.tags"
    assert error.rule == (
        "at most 44 tags: EC2 allows 50 per resource and capacity-launcher adds 6 of its own "
        "to every instance"
    )


def test_request_tags_that_would_overflow_the_instances_are_rejected_before_launching() -> None:
    node_class = parse_document(_node_class(30))
    assert isinstance(node_class, NodeClass)
    check_instance_tag_count(node_class, _request(14))  # 6 + 30 + 14 = 50: fits
    with pytest.raises(RequestRejected) as raised:
        check_instance_tag_count(node_class, _request(15))
    assert raised.value.code == "TooManyTags"
    assert str(raised.value) == (
        "tags: instances would carry 51 tags (6 of capacity-launcher's, 30 of NodeClass tagged, "
        "15 of the request); EC2 allows 50 per resource"
    )


def test_a_request_tag_overriding_a_node_class_tag_counts_once() -> None:
    node_class = parse_document(_node_class(44))
    assert isinstance(node_class, NodeClass)
    overriding = parse_launch_request({"requestId": "r-2", "count": 1, "tags": {"class-0": "mine"}})
    check_instance_tag_count(node_class, overriding)


class _OneClass:
    """A configuration with one NodePool over the given NodeClass."""

    def __init__(self, node_class: NodeClass) -> None:
        self._class = node_class
        pool = {
            "apiVersion": "capacity-launcher/v1",
            "kind": "NodePool",
            "metadata": {"name": "pool"},
            "spec": {"nodeClassRef": node_class.metadata.name},
        }
        self._pool = parse_document(pool)

    def node_pool(self, name: str) -> Any:
        return self._pool

    def pool_set(self, *, fresh: bool = False) -> PoolSet:
        return PoolSet(None, (self._pool,))

    def node_class(self, name: str) -> NodeClass:
        return self._class

    def capacity_quotas(self) -> tuple[()]:
        return ()  # no quota: the request's priority is 0 (its instances' records carry it)


def test_resolution_rejects_a_request_whose_tags_overflow_the_instances() -> None:
    node_class = parse_document(_node_class(40))
    assert isinstance(node_class, NodeClass)
    with pytest.raises(RequestRejected, match=r"^tags: instances would carry 51 tags"):
        resolve(_OneClass(node_class), _request(5), datetime.now(UTC))
    assert resolve(_OneClass(node_class), _request(4), datetime.now(UTC)).node_class is node_class
