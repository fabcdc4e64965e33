"""A NodeClass one of whose selectors finds nothing in the Region is not ready: its requests are
`Rejected` naming the class and why ("NodeClass X not ready: no subnets match
spec.subnetSelectorTerms"), not `NoOffering ... zones []`, and its status shows the condition
False with the same words, as Karpenter's EC2NodeClass does (issue 40; docs/karpenter.md)."""

from __future__ import annotations

from typing import Any

import pytest

from capacity_launcher.domain.apis.config import NODE_CLASS
from capacity_launcher.domain.records.status import RequestStatus
from tests.support import cloud as documents
from tests.support.cloud import Cloud, launch_request

NOWHERE = {"tags": {"tier": "no-such-tier"}}
# Each selector that finds nothing: the spec saying so, and the words of its condition.
NOT_READY: dict[str, tuple[dict[str, Any], str]] = {
    "SubnetsReady": (
        {"subnetSelectorTerms": [NOWHERE]},
        "no subnets match spec.subnetSelectorTerms",
    ),
    "SecurityGroupsReady": (
        {"securityGroupSelectorTerms": [NOWHERE]},
        "no security groups match spec.securityGroupSelectorTerms",
    ),
    "AMIsReady": (
        {"imageSelectorTerms": [{"name": "no-such-image-*", "owner": "self"}]},
        "no images match spec.imageSelectorTerms",
    ),
}


def pool_of(name: str, **spec: Any) -> dict[str, Any]:
    requirements = [documents.capacity_type("on-demand"), documents.instance_type("m5.large")]
    return documents.node_pool(name, name, requirements=requirements, **spec)


def security_group(cloud: Cloud) -> dict[str, Any]:
    return {"securityGroupIds": [documents.default_security_group(cloud.ec2)]}


def apply_class(cloud: Cloud, name: str, subnet_ids: list[str], image: str, **spec: Any) -> None:
    document = documents.node_class(name, subnet_ids, image, **spec)
    if "subnetSelectorTerms" in spec:
        del document["spec"]["subnetIds"]
    if "securityGroupSelectorTerms" in spec:
        del document["spec"]["securityGroupIds"]
    if "imageSelectorTerms" in spec:
        del document["spec"]["imageId"]
    cloud.apply(document, pool_of(name))


@pytest.mark.parametrize("condition", NOT_READY)
def test_a_request_for_a_class_whose_selector_finds_nothing_is_rejected_naming_it(
    cloud: Cloud, subnets: dict[str, str], image: str, condition: str
) -> None:
    # Given a NodeClass one of whose selectors matches nothing in the Region
    spec, words = NOT_READY[condition]
    if "securityGroupSelectorTerms" not in spec:
        spec = {**spec, **security_group(cloud)}
    apply_class(cloud, "broken", list(subnets.values()), image, **spec)
    # When a request for its pool arrives
    assert cloud.send(launch_request("not-ready-1", nodePool="broken")) == []
    # Then it is Rejected, naming the class, why it is not ready and the condition
    record = cloud.record("not-ready-1")
    assert record is not None and record.status is RequestStatus.REJECTED
    (error,) = record.errors
    assert (error.code, error.message) == (
        "NodeClassNotReady",
        f"NodeClass broken not ready: {words} ({condition} False)",
    )
    assert cloud.managed_instances() == []
    # And the class's status shows that condition False
    stored = cloud.adapters().config_store().stored(NODE_CLASS, "broken")
    status = cloud.adapters().queries().node_class_status_reader()(stored)
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions[condition]["status"] == "False"
    assert conditions["Ready"]["status"] == "False"
    if condition == "SubnetsReady":
        assert conditions[condition]["message"] == words


def test_a_request_naming_no_pool_passes_a_class_that_is_not_ready_by(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given a heavier pool whose class selects no subnet, and a lighter one that is ready
    group = security_group(cloud)
    apply_class(cloud, "broken", [], image, subnetSelectorTerms=[NOWHERE], **group)
    apply_class(cloud, "working", list(subnets.values()), image, **group)
    cloud.apply(pool_of("broken", weight=50))
    # When a request naming no pool arrives
    assert cloud.send(launch_request("any-pool-1")) == []
    # Then the ready pool serves it, and its record says why the other passed it over
    record = cloud.record("any-pool-1")
    assert record is not None and record.status is RequestStatus.FULFILLED
    assert record.node_pool == "working"
    assert any("NodeClass broken not ready" in e.message for e in record.errors), record.errors
