"""The limits check (parameter_limits.py) reads botocore's service models: what it finds over a
maximum, and what it leaves alone."""

from __future__ import annotations

import botocore.session
import pytest

from tests.infrastructure.parameter_limits import check

_SESSION = botocore.session.get_session()


def _operation(service: str, name: str):  # type: ignore[no-untyped-def]
    return _SESSION.get_service_model(service).operation_model(name)


def test_a_list_over_its_maximum_is_named_with_its_path_and_limit() -> None:
    found = check(
        _operation("ec2", "DescribeInstanceTypes"),
        {"InstanceTypes": [f"t{i}.large" for i in range(101)]},
    )
    assert found == ["DescribeInstanceTypes InstanceTypes: 101 items, at most 100"]


def test_a_list_at_its_maximum_passes() -> None:
    operation = _operation("ec2", "DescribeInstanceTypes")
    assert check(operation, {"InstanceTypes": [f"t{i}.large" for i in range(100)]}) == []


@pytest.mark.parametrize(
    ("service", "operation", "params", "expected"),
    [
        # Nested lists: CreateFleet's configs (50) hold overrides' instance requirements.
        (
            "ec2",
            "CreateFleet",
            {"LaunchTemplateConfigs": [{}] * 51, "TargetCapacitySpecification": {}},
            "CreateFleet LaunchTemplateConfigs: 51 items, at most 50",
        ),
        # An integer over its maximum (MaxResults 200 for DescribeLaunchTemplates).
        ("ec2", "DescribeLaunchTemplates", {"MaxResults": 201}, "MaxResults: 201, at most 200"),
        # A string over its length (DynamoDB's table names: 1024 characters).
        ("dynamodb", "GetItem", {"TableName": "t" * 1025, "Key": {}}, "TableName: 1025 char"),
        # A list inside a structure inside a list (EventBridge's 10 entries a call).
        ("events", "PutEvents", {"Entries": [{}] * 11}, "Entries: 11 items, at most 10"),
    ],
)
def test_limits_are_found_at_any_depth(
    service: str, operation: str, params: dict[str, object], expected: str
) -> None:
    (found,) = check(_operation(service, operation), params)
    assert expected in found


def test_a_maximum_deep_in_a_recursive_shape_is_found() -> None:
    # DynamoDB's attribute names (65535 characters) are the keys of a map attribute, which an
    # item's attribute values hold at any depth (AttributeValue names itself).
    name = "n" * 65536
    item = {"pk": {"S": "p"}, "m": {"L": [{"S": "s"}, {"M": {"ok": {"M": {name: {"N": "1"}}}}}]}}
    (found,) = check(_operation("dynamodb", "PutItem"), {"TableName": "t", "Item": item})
    assert found == (
        f"PutItem Item['m'].L[1].M['ok'].M.<key {name!r}>: 65536 characters, at most 65535"
    )


class _Walked(list[object]):
    """A list that notes each walk over its items."""

    walks = 0

    def __iter__(self):  # type: ignore[no-untyped-def]
        _Walked.walks += 1
        return super().__iter__()


def test_what_no_maximum_can_reach_is_not_walked() -> None:
    # A string set's strings have no maximum, nor does anything else the set holds
    strings = _Walked(f"s{i}" for i in range(1000))
    item = {"pk": {"S": "p"}, "set": {"SS": strings}}
    assert check(_operation("dynamodb", "PutItem"), {"TableName": "t", "Item": item}) == []
    assert _Walked.walks == 0
