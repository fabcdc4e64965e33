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
