"""NodeClass and NodePool documents: every rule, named by field and rule."""

import copy
import json
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from capacity_launcher.domain.apis.config import ConfigDocument, NodeClass, NodePool
from capacity_launcher.domain.apis.config_base import MAX_POOL_REQUIREMENTS_BYTES
from capacity_launcher.domain.apis.documents import parse_document, to_document
from capacity_launcher.domain.apis.node_class_terms import (
    CapacityReservationSelectorTerm,
    CapacityReservationSpec,
    CapacityReservationTarget,
)
from capacity_launcher.domain.capacity.requirements import (
    CAPACITY_TYPE,
    INSTANCE_FAMILY,
    INSTANCE_TYPE,
)
from capacity_launcher.domain.errors import ConfigValidationError
from capacity_launcher.domain.field_errors import FieldError

RESERVATION = "cr-0123456789abcdef0"
GROUP_ARN = "arn:aws:resource-groups:us-east-1:123456789012:group/gpu"
EC2_ARN = "arn:aws:ec2:us-east-1:123456789012:group/gpu"
EXACTLY_ONE_TARGET = (
    "exactly one of capacityReservationId or capacityReservationResourceGroupArn must be set"
)


def document(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "capacity-launcher/v1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": {key: value for key, value in spec.items() if value is not None},
    }


def node_class(**spec: Any) -> dict[str, Any]:
    base = {
        "imageId": "ami-0123456789abcdef0",
        "subnetIds": ["subnet-aaa", "subnet-bbb"],
        "securityGroupIds": ["sg-123"],
    }
    return document("NodeClass", "p5-odcr", base | spec)


def node_pool(**spec: Any) -> dict[str, Any]:
    return document("NodePool", "gpu-training", {"nodeClassRef": "p5-odcr"} | spec)


def errors_of(document: Any) -> list[FieldError]:
    with pytest.raises(ConfigValidationError) as caught:
        parse_document(document)
    return caught.value.errors


def the_error(document: Any) -> tuple[str, str]:
    (error,) = errors_of(document)
    return error.field, error.rule


DESIGN_NODE_CLASS = node_class(
    instanceProfile="gpu-node",
    userData="#!/bin/bash\necho hello",
    tags={"team": "ml"},
    capacityReservationSpec={"capacityReservationPreference": "open"},
    capacityReservationSelectorTerms=[
        {"id": RESERVATION},
        {"tags": {"team": "ml"}, "ownerID": "123456789012", "instanceMatchCriteria": "targeted"},
    ],
)
DESIGN_NODE_POOL = node_pool(
    weight=10,
    requirements=[
        {
            "key": "karpenter.sh/capacity-type",
            "operator": "In",
            "values": ["reserved", "on-demand"],
        },
        {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["p5", "p4d"]},
    ],
    limits={"cpu": "2048", "memory": "16Ti", "nvidia.com/gpu": "128", "instances": "32"},
)


# --- happy paths ---------------------------------------------------------------------------------


def test_designs_node_class_parses_into_python_names() -> None:
    parsed = parse_document(DESIGN_NODE_CLASS)

    assert isinstance(parsed, NodeClass)
    assert parsed.name == "p5-odcr"
    spec = parsed.spec
    assert spec.image_id == "ami-0123456789abcdef0"
    assert spec.subnet_ids == ["subnet-aaa", "subnet-bbb"]
    assert spec.instance_profile == "gpu-node"
    assert spec.reservation_preference == "open"
    assert spec.reservation_target is None
    terms = spec.capacity_reservation_selector_terms
    assert terms is not None
    assert terms[0].id == RESERVATION
    assert terms[1].owner_id == "123456789012"
    assert terms[1].instance_match_criteria == "targeted"


def test_designs_node_pool_parses_with_limits_and_requirements() -> None:
    parsed = parse_document(DESIGN_NODE_POOL)

    assert isinstance(parsed, NodePool)
    assert parsed.name == "gpu-training"
    assert parsed.spec.node_class_ref == "p5-odcr"
    assert parsed.spec.weight == 10
    assert parsed.spec.limits is not None
    assert parsed.spec.limits.memory == 16777216
    assert parsed.spec.limits.cpu == Decimal(2048)
    assert parsed.spec.requirements_set().allowed_values(INSTANCE_FAMILY, ["p5", "m5"]) == ["p5"]


@pytest.mark.parametrize("document", [DESIGN_NODE_CLASS, DESIGN_NODE_POOL])
def test_documents_round_trip_through_their_stored_form(document: dict[str, Any]) -> None:
    parsed = parse_document(document)

    stored = to_document(parsed)

    assert parse_document(json.loads(json.dumps(stored))) == parsed
    assert stored["apiVersion"] == "capacity-launcher/v1"
    assert "api_version" not in stored


def test_stored_form_keeps_document_names_and_drops_unset_fields() -> None:
    stored = to_document(parse_document(DESIGN_NODE_CLASS))

    assert stored["spec"]["capacityReservationSelectorTerms"][1]["ownerID"] == "123456789012"
    assert "imageSsmParameter" not in stored["spec"]
    assert stored["spec"]["capacityReservationSpec"] == {"capacityReservationPreference": "open"}


def test_config_document_union_picks_the_model_by_kind() -> None:
    adapter = TypeAdapter(ConfigDocument)

    assert isinstance(adapter.validate_python(DESIGN_NODE_CLASS), NodeClass)
    assert isinstance(adapter.validate_python(DESIGN_NODE_POOL), NodePool)


def test_python_names_are_accepted_too() -> None:
    target = CapacityReservationTarget(capacity_reservation_id=RESERVATION)
    spec = CapacityReservationSpec(capacity_reservation_target=target)

    assert spec.capacity_reservation_target == target
    assert CapacityReservationSelectorTerm(owner_id="123456789012").owner_id == "123456789012"


def test_node_class_with_target_by_group_and_ssm_image() -> None:
    parsed = parse_document(
        node_class(
            imageId=None,
            imageSsmParameter="/aws/service/eks/optimized-ami/1.30/amazon-linux-2-gpu/recommended",
            subnetIds=None,
            subnetSelectorTerms=[{"tags": {"tier": "private"}}, {"id": "subnet-0abc"}],
            capacityReservationSpec={
                "capacityReservationTarget": {"capacityReservationResourceGroupArn": GROUP_ARN}
            },
        )
    )

    assert isinstance(parsed, NodeClass)
    target = parsed.spec.reservation_target
    assert target is not None
    assert target.capacity_reservation_resource_group_arn == GROUP_ARN
    assert parsed.spec.reservation_preference == "open"


def test_preference_none_is_kept() -> None:
    parsed = parse_document(
        node_class(capacityReservationSpec={"capacityReservationPreference": "none"})
    )

    assert isinstance(parsed, NodeClass)
    assert parsed.spec.reservation_preference == "none"


def test_documents_are_immutable() -> None:
    parsed = parse_document(DESIGN_NODE_POOL)

    with pytest.raises(ValueError, match="frozen"):
        parsed.spec.weight = 50  # type: ignore[misc]


# --- capacity types ------------------------------------------------------------------------------


def test_a_pool_that_says_nothing_allows_reserved_and_on_demand_but_not_spot() -> None:
    pool = parse_document(node_pool())

    assert isinstance(pool, NodePool)
    assert pool.spec.allowed_capacity_types() == ["reserved", "on-demand"]
    assert not pool.spec.requirements_set().allows(CAPACITY_TYPE, "spot")


@pytest.mark.parametrize(
    ("requirement", "allowed"),
    [
        ({"operator": "In", "values": ["spot", "reserved"]}, ["reserved", "spot"]),
        ({"operator": "In", "values": ["on-demand"]}, ["on-demand"]),
        ({"operator": "NotIn", "values": ["reserved"]}, ["on-demand", "spot"]),
        ({"operator": "Exists"}, ["reserved", "on-demand", "spot"]),
    ],
)
def test_allowed_capacity_types_follow_the_pool_in_canonical_order(
    requirement: dict[str, Any], allowed: list[str]
) -> None:
    pool = parse_document(node_pool(requirements=[{"key": CAPACITY_TYPE, **requirement}]))

    assert isinstance(pool, NodePool)
    assert pool.spec.allowed_capacity_types() == allowed


# --- document-level rules -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("document", "field", "rule"),
    [
        ([1, 2], "body", "must be a mapping (one document)"),
        (
            {"apiVersion": "capacity-launcher/v1"},
            "kind",
            "is required: NodeClass, NodePool or CapacityQuota",
        ),
        ({"kind": "EC2NodeClass"}, "kind", "must be NodeClass, NodePool or CapacityQuota"),
        ({"kind": ["NodeClass"]}, "kind", "must be NodeClass, NodePool or CapacityQuota"),
    ],
)
def test_kind_decides_the_model(document: Any, field: str, rule: str) -> None:
    assert the_error(document) == (field, rule)


def test_api_version_is_fixed() -> None:
    document = node_pool()
    document["apiVersion"] = "karpenter.sh/v1"

    field, rule = the_error(document)

    assert field == "apiVersion"
    assert "capacity-launcher/v1" in rule


@pytest.mark.parametrize("name", ["GPU", "-gpu", "gpu-", "a" * 64, "gpu_training", ""])
def test_names_are_dns_labels(name: str) -> None:
    document = node_pool()
    document["metadata"]["name"] = name

    field, rule = the_error(document)

    assert field == "metadata.name"
    assert rule.startswith("must be 1 to 63 lowercase letters, digits or '-'")


def test_unknown_fields_are_errors_everywhere() -> None:
    document = node_class(amiFamily="AL2", capacityReservationSpec={"preference": "open"})
    document["metadata"]["labels"] = {"a": "b"}

    assert set(errors_of(document)) == {
        FieldError("metadata.labels", "is not an allowed field"),
        FieldError("spec.amiFamily", "is not an allowed field"),
        FieldError("spec.capacityReservationSpec.preference", "is not an allowed field"),
    }


def test_every_broken_rule_is_reported_at_once() -> None:
    document = node_class(securityGroupIds=[], instanceProfile="bad profile!")

    fields = {error.field for error in errors_of(document)}

    assert fields == {"spec.securityGroupIds", "spec.instanceProfile"}


# --- NodeClass rules -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "field", "rule"),
    [
        (
            {
                "capacityReservationSpec": {
                    "capacityReservationPreference": "open",
                    "capacityReservationTarget": {"capacityReservationId": RESERVATION},
                }
            },
            "spec.capacityReservationSpec",
            "capacityReservationPreference cannot be set together with capacityReservationTarget",
        ),
        (
            {"capacityReservationSpec": {"capacityReservationTarget": {}}},
            "spec.capacityReservationSpec.capacityReservationTarget",
            EXACTLY_ONE_TARGET,
        ),
        (
            {
                "capacityReservationSpec": {
                    "capacityReservationTarget": {
                        "capacityReservationId": RESERVATION,
                        "capacityReservationResourceGroupArn": GROUP_ARN,
                    }
                }
            },
            "spec.capacityReservationSpec.capacityReservationTarget",
            EXACTLY_ONE_TARGET,
        ),
        (
            {
                "capacityReservationSpec": {
                    "capacityReservationTarget": {"capacityReservationId": "cr-123"}
                }
            },
            "spec.capacityReservationSpec.capacityReservationTarget.capacityReservationId",
            "must be 'cr-' followed by 17 lowercase hexadecimal digits",
        ),
        (
            {
                "capacityReservationSpec": {
                    "capacityReservationTarget": {"capacityReservationResourceGroupArn": EC2_ARN}
                }
            },
            "spec.capacityReservationSpec.capacityReservationTarget.capacityReservationResourceGroupArn",
            "must be a resource group ARN: arn:aws:resource-groups:REGION:ACCOUNT:group/NAME",
        ),
        (
            {
                "capacityReservationSpec": {
                    "capacityReservationTarget": {"capacityReservationId": RESERVATION}
                },
                "capacityReservationSelectorTerms": [{"id": RESERVATION}],
            },
            "spec",
            "capacityReservationSelectorTerms cannot be set together with "
            "capacityReservationSpec.capacityReservationTarget: selector terms are an alternative "
            "to a target",
        ),
        (
            {"capacityReservationSpec": {"capacityReservationPreference": "targeted"}},
            "spec.capacityReservationSpec.capacityReservationPreference",
            "input should be 'open' or 'none'",
        ),
    ],
)
def test_capacity_reservation_rules(spec: dict[str, Any], field: str, rule: str) -> None:
    assert the_error(node_class(**spec)) == (field, rule)


def test_group_arns_in_other_partitions_are_accepted() -> None:
    arn = "arn:aws-us-gov:resource-groups:us-gov-west-1:123456789012:group/gpu.v2_a-b"
    document = node_class(
        capacityReservationSpec={
            "capacityReservationTarget": {"capacityReservationResourceGroupArn": arn}
        }
    )

    assert isinstance(parse_document(document), NodeClass)


def test_selector_terms_with_a_preference_are_fine() -> None:
    document = node_class(
        capacityReservationSpec={"capacityReservationPreference": "none"},
        capacityReservationSelectorTerms=[{"tags": {"team": "ml"}}],
    )

    assert isinstance(parse_document(document), NodeClass)


@pytest.mark.parametrize(
    ("term", "field", "rule"),
    [
        (
            {"id": RESERVATION, "tags": {"team": "ml"}},
            "spec.capacityReservationSelectorTerms[0]",
            "id cannot be combined with tags, ownerID or instanceMatchCriteria",
        ),
        (
            {"id": RESERVATION, "ownerID": "123456789012"},
            "spec.capacityReservationSelectorTerms[0]",
            "id cannot be combined with tags, ownerID or instanceMatchCriteria",
        ),
        (
            {},
            "spec.capacityReservationSelectorTerms[0]",
            "set id, or at least one of tags, ownerID or instanceMatchCriteria",
        ),
        (
            {"id": "cr-xyz"},
            "spec.capacityReservationSelectorTerms[0].id",
            "must be 'cr-' followed by 17 lowercase hexadecimal digits",
        ),
        (
            {"ownerID": "1234"},
            "spec.capacityReservationSelectorTerms[0].ownerID",
            "must be a 12-digit AWS account id",
        ),
        (
            {"instanceMatchCriteria": "any"},
            "spec.capacityReservationSelectorTerms[0].instanceMatchCriteria",
            "input should be 'open' or 'targeted'",
        ),
        (
            {"tags": {}},
            "spec.capacityReservationSelectorTerms[0].tags",
            "must select by at least one tag",
        ),
        (
            {"tags": {"team": ""}},
            "spec.capacityReservationSelectorTerms[0].tags",
            "tag keys and values must not be empty",
        ),
        (
            {"ownerId": "123456789012"},
            "spec.capacityReservationSelectorTerms[0].ownerId",
            "is not an allowed field",
        ),
    ],
)
def test_reservation_selector_term_rules(term: dict[str, Any], field: str, rule: str) -> None:
    assert the_error(node_class(capacityReservationSelectorTerms=[term])) == (field, rule)


def test_reservation_selector_terms_need_at_least_one_term() -> None:
    field, rule = the_error(node_class(capacityReservationSelectorTerms=[]))

    assert field == "spec.capacityReservationSelectorTerms"
    assert "at least 1 item" in rule


@pytest.mark.parametrize(
    ("spec", "field", "rule"),
    [
        (
            {"imageId": None},
            "spec",
            "exactly one of imageId, imageSsmParameter or imageSelectorTerms must be set",
        ),
        (
            {"imageSsmParameter": "/aws/service/x"},
            "spec",
            "exactly one of imageId, imageSsmParameter or imageSelectorTerms must be set",
        ),
        (
            {"imageId": "image-1"},
            "spec.imageId",
            "must be an image id such as ami-0123456789abcdef0",
        ),
        (
            {"imageId": None, "imageSsmParameter": "/aws/service/x; rm -rf"},
            "spec.imageSsmParameter",
            "must be an SSM parameter name such as /aws/service/ami-amazon-linux-latest/...",
        ),
        (
            {"subnetIds": None},
            "spec",
            "exactly one of subnetIds or subnetSelectorTerms must be set",
        ),
        (
            {"subnetSelectorTerms": [{"tags": {"tier": "private"}}]},
            "spec",
            "exactly one of subnetIds or subnetSelectorTerms must be set",
        ),
        (
            {"subnetIds": ["subnet-a", "vpc-1"]},
            "spec.subnetIds[1]",
            "must be a subnet id such as subnet-0123456789abcdef0",
        ),
        ({"subnetIds": ["subnet-a", "subnet-a"]}, "spec.subnetIds", "must not repeat an id"),
        (
            {"subnetIds": None, "subnetSelectorTerms": [{"id": "subnet-a", "tags": {"a": "b"}}]},
            "spec.subnetSelectorTerms[0]",
            "exactly one of id or tags must be set",
        ),
        (
            {"subnetIds": None, "subnetSelectorTerms": [{}]},
            "spec.subnetSelectorTerms[0]",
            "exactly one of id or tags must be set",
        ),
        (
            {"subnetIds": None, "subnetSelectorTerms": [{"id": "sn-1"}]},
            "spec.subnetSelectorTerms[0].id",
            "must be a subnet id such as subnet-0123456789abcdef0",
        ),
        (
            {"subnetIds": None, "subnetSelectorTerms": [{"tags": {}}]},
            "spec.subnetSelectorTerms[0].tags",
            "must select by at least one tag",
        ),
        (
            {"securityGroupIds": ["default"]},
            "spec.securityGroupIds[0]",
            "must be a security group id such as sg-0123456789abcdef0",
        ),
        (
            {"securityGroupIds": ["sg-1", "sg-1"]},
            "spec.securityGroupIds",
            "must not repeat an id",
        ),
        (
            {"instanceProfile": "arn:aws:iam::123456789012:instance-profile/x"},
            "spec.instanceProfile",
            "must be an instance profile name: 1 to 128 letters, digits or +=,.@_-",
        ),
        ({"userData": "x" * 16385}, "spec.userData", "must be at most 16384 bytes (EC2's limit)"),
        ({"userData": "é" * 8193}, "spec.userData", "must be at most 16384 bytes (EC2's limit)"),
    ],
)
def test_node_class_spec_rules(spec: dict[str, Any], field: str, rule: str) -> None:
    assert the_error(node_class(**spec)) == (field, rule)


def test_security_groups_are_required() -> None:
    document = node_class()
    del document["spec"]["securityGroupIds"]

    rule = "exactly one of securityGroupIds or securityGroupSelectorTerms must be set"
    assert the_error(document) == ("spec", rule)
    both = node_class(securityGroupSelectorTerms=[{"tags": {"a": "b"}}])
    assert the_error(both) == ("spec", rule)
    by_name = node_class(securityGroupIds=None, securityGroupSelectorTerms=[{"name": "nodes"}])
    assert parse_document(by_name).spec.security_group_selector_terms is not None
    field, rule = the_error(node_class(securityGroupIds=[]))
    assert field == "spec.securityGroupIds"
    assert "at least 1 item" in rule


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"subnetIds": [f"subnet-{i}" for i in range(101)]}, "spec.subnetIds"),
        ({"securityGroupIds": [f"sg-{i}" for i in range(17)]}, "spec.securityGroupIds"),
        (
            {"capacityReservationSelectorTerms": [{"instanceMatchCriteria": "open"}] * 101},
            "spec.capacityReservationSelectorTerms",
        ),
        (
            {"subnetIds": None, "subnetSelectorTerms": [{"tags": {"a": "b"}}] * 101},
            "spec.subnetSelectorTerms",
        ),
    ],
)
def test_lists_are_bounded(spec: dict[str, Any], field: str) -> None:
    found, rule = the_error(node_class(**spec))

    assert found == field
    assert rule.startswith("list should have at most")


def test_selector_term_tags_are_bounded() -> None:
    term = {"tags": {f"t{i}": "v" for i in range(51)}}

    assert the_error(node_class(capacityReservationSelectorTerms=[term])) == (
        "spec.capacityReservationSelectorTerms[0].tags",
        "at most 50 tags",
    )


def test_user_data_at_the_limit_is_fine() -> None:
    assert isinstance(parse_document(node_class(userData="x" * 16384)), NodeClass)


@pytest.mark.parametrize(
    ("tags", "rule"),
    [
        (
            {"aws:cloudformation:stack-name": "x"},
            "tag key 'aws:cloudformation:stack-name' must not start with the reserved 'aws:'",
        ),
        ({"AWS:x": "y"}, "tag key 'AWS:x' must not start with the reserved 'aws:'"),
        (
            {"capacity-launcher:managed": "true"},
            "tag key 'capacity-launcher:managed' must not start with the reserved "
            "'capacity-launcher:'",
        ),
        ({"": "x"}, "tag keys must be 1 to 128 characters without control characters"),
        ({"k" * 129: "x"}, "tag keys must be 1 to 128 characters without control characters"),
        ({"team\n": "x"}, "tag keys must be 1 to 128 characters without control characters"),
        (
            {"team": "v" * 257},
            "tag 'team': values must be at most 256 characters without control characters",
        ),
        (
            {f"t{i}": "x" for i in range(45)},
            "at most 44 tags: EC2 allows 50 per resource and capacity-launcher adds 6 of its own "
            "to every instance",
        ),
    ],
)
def test_node_class_tag_rules(tags: dict[str, str], rule: str) -> None:
    assert the_error(node_class(tags=tags)) == ("spec.tags", rule)


def test_forty_four_tags_are_fine() -> None:
    # 50 per resource, less the 6 capacity-launcher adds to every instance (its stack's among them).
    assert isinstance(parse_document(node_class(tags={f"t{i}": "x" for i in range(44)})), NodeClass)


def test_long_hostile_tag_keys_are_cut_short_in_messages() -> None:
    (error,) = errors_of(node_class(tags={"aws:" + "x" * 100: "v"}))

    assert len(error.rule) < 120


# --- NodePool rules ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "field", "rule_start"),
    [
        ({"nodeClassRef": "P5 ODCR"}, "spec.nodeClassRef", "must be 1 to 63 lowercase letters"),
        ({"nodeClassRef": None}, "spec.nodeClassRef", "is required"),
        ({"weight": 101}, "spec.weight", "input should be less than or equal to 100"),
        ({"weight": -1}, "spec.weight", "input should be greater than or equal to 0"),
        ({"weight": "10"}, "spec.weight", "input should be a valid integer"),
        ({"weight": True}, "spec.weight", "input should be a valid integer"),
        (
            {"requirements": [{"key": "example.com/x", "operator": "Exists"}]},
            "spec.requirements[0].key",
            "must be a well-known key",
        ),
        (
            {"requirements": [{"key": CAPACITY_TYPE, "operator": "In", "values": ["cheap"]}]},
            "spec.requirements[0].values",
            "values of karpenter.sh/capacity-type must be among reserved, on-demand, spot",
        ),
        (
            {
                "requirements": [
                    {"key": INSTANCE_FAMILY, "operator": "In", "values": ["p5"]},
                    {"key": INSTANCE_FAMILY, "operator": "In", "values": ["p4d"]},
                ]
            },
            "spec.requirements",
            "requirements on karpenter.k8s.aws/instance-family admit no value together",
        ),
        (
            {
                "requirements": [
                    {
                        "key": CAPACITY_TYPE,
                        "operator": "NotIn",
                        "values": ["reserved", "on-demand", "spot"],
                    }
                ]
            },
            "spec.requirements",
            "karpenter.sh/capacity-type must allow at least one of reserved, on-demand, spot",
        ),
        (
            {"requirements": [{"key": INSTANCE_FAMILY, "operator": "Exists"}] * 101},
            "spec.requirements",
            "list should have at most 100 items",
        ),
        ({"limits": {"cpu": "many"}}, "spec.limits.cpu", "must be a non-negative number of cores"),
        (
            {"limits": {"memory": "1TB"}},
            "spec.limits.memory",
            "must be a non-negative number of bytes",
        ),
        (
            {"limits": {"nvidia.com/gpu": "-1"}},
            "spec.limits[nvidia.com/gpu]",
            "must be a non-negative whole number",
        ),
        (
            {"limits": {"instances": "2.5"}},
            "spec.limits.instances",
            "must be a non-negative whole number",
        ),
        ({"limits": {"pods": "10"}}, "spec.limits.pods", "is not an allowed field"),
        ({"template": {}}, "spec.template", "is not an allowed field"),
    ],
)
def test_node_pool_rules(spec: dict[str, Any], field: str, rule_start: str) -> None:
    found, rule = the_error(node_pool(**spec))

    assert found == field
    assert rule.startswith(rule_start)


def test_weight_defaults_to_zero_and_limits_to_none() -> None:
    pool = parse_document(node_pool())

    assert isinstance(pool, NodePool)
    assert pool.spec.weight == 0
    assert pool.spec.limits is None
    assert pool.spec.requirements == []


# --- hostile documents ---------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=100, deadline=None)
@given(json_values)
def test_arbitrary_input_gets_a_validation_error_never_a_crash(data: Any) -> None:
    with pytest.raises(ConfigValidationError) as caught:
        parse_document(data)

    assert all(error.field and error.rule for error in caught.value.errors)


@settings(max_examples=100, deadline=None)
@given(
    st.sampled_from(["spec", "spec.capacityReservationSpec", "metadata", "spec.limits"]),
    st.text(max_size=12),
    json_values,
)
def test_mutated_valid_documents_either_parse_or_explain(where: str, key: str, value: Any) -> None:
    document = copy.deepcopy(DESIGN_NODE_CLASS if "capacity" in where else DESIGN_NODE_POOL)
    node = document
    for part in where.split("."):
        node = node.setdefault(part, {})
    node[key] = value

    outcome: NodeClass | NodePool | ConfigValidationError
    try:
        outcome = parse_document(document)
    except ConfigValidationError as error:
        outcome = error

    if isinstance(outcome, ConfigValidationError):
        assert outcome.errors
    else:
        assert parse_document(to_document(outcome)) == outcome


def test_a_pool_takes_hundreds_of_instance_types() -> None:
    # Karpenter accepts any number of values; an 800-type pool is a few KB as stored.
    types = [f"m{i}.large" for i in range(800)]
    pool = parse_document(
        node_pool(requirements=[{"key": INSTANCE_TYPE, "operator": "In", "values": types}])
    )
    assert isinstance(pool, NodePool)
    assert len(pool.spec.requirements[0].values) == 800


def test_a_pools_requirements_fit_one_dynamodb_item() -> None:
    values = [f"{i:063d}" for i in range(2100)]  # 2,100 values of 63 characters: 140 KB
    field, rule = the_error(
        node_pool(requirements=[{"key": INSTANCE_TYPE, "operator": "In", "values": values}])
    )
    assert field == "spec.requirements"
    assert rule.startswith(f"must be at most {MAX_POOL_REQUIREMENTS_BYTES} bytes as JSON")
    assert "400 KB" in rule
