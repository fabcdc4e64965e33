"""The largest quantities accepted: every quantity either parses within its bound or is refused
with the field and the rule, never with another exception (a huge cpu once raised
decimal.InvalidOperation)."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from capacity_launcher.domain.apis.documents import parse_document
from capacity_launcher.domain.apis.served_versions import REGISTRY
from capacity_launcher.domain.errors import ConfigValidationError
from capacity_launcher.domain.field_errors import FieldError, field_errors
from capacity_launcher.domain.launch_request import LaunchRequest
from capacity_launcher.domain.quantities import (
    COUNT_RULE,
    CPU_BOUND_RULE,
    CPU_RULE,
    MAX_CPU_CORES,
    MAX_MEMORY_BYTES,
    MEMORY_BOUND_RULE,
    MEMORY_RULE,
    MIB,
    PoolLimits,
    parse_count,
    parse_cpu,
    parse_memory_mib,
)

HUGE = "9" * 29


@pytest.mark.parametrize(
    ("text", "cores"),
    [
        ("1000000000000", MAX_CPU_CORES),
        ("1000000000000000m", MAX_CPU_CORES),
        ("999999999999.999", Decimal("999999999999.999")),
        ("0.000000000000000000000000000000", Decimal(0)),
    ],
)
def test_cpu_up_to_a_trillion_cores_is_accepted(text: str, cores: Decimal) -> None:
    assert parse_cpu(text) == cores


@pytest.mark.parametrize(
    "text",
    ["9" * 26, HUGE, "9" * 30, "9" * 30 + "m", "1000000000000.001", "1000000000001", 10**13],
)
def test_cpu_beyond_a_trillion_cores_is_refused_with_the_bound(text: Any) -> None:
    with pytest.raises(ValueError, match="at most 1000000000000 cores") as caught:
        parse_cpu(text)

    assert str(caught.value) == CPU_BOUND_RULE


def test_a_fraction_of_a_millicore_is_seen_exactly_however_long() -> None:
    # 29 significant digits: rounding to Decimal's default 28 would make it a whole millicore.
    with pytest.raises(ValueError, match="whole number of millicores"):
        parse_cpu("999999999999999.00000000000001m")


@pytest.mark.parametrize(
    ("text", "mib"), [("1Ei", 1024**4), ("1024Pi", 1024**4), ("1E", 10**18 // MIB)]
)
def test_memory_up_to_1ei_is_accepted(text: str, mib: int) -> None:
    assert parse_memory_mib(text) == mib


@pytest.mark.parametrize(
    "text", ["1025Pi", "2Ei", "9" * 20 + "Ei", "9" * 30 + "Ei", "9" * 30, "1.000000001Ei"]
)
def test_memory_beyond_1ei_is_refused_with_the_bound(text: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_memory_mib(text)

    assert str(caught.value) == MEMORY_BOUND_RULE


def test_counts_beyond_18_digits_name_the_bound() -> None:
    with pytest.raises(ValueError) as caught:
        parse_count("9" * 19)

    assert str(caught.value) == COUNT_RULE
    assert "at most 18 digits" in COUNT_RULE


_DIGITS = st.text(alphabet="0123456789", max_size=40)
QUANTITY_TEXT = st.one_of(
    st.text(max_size=50),
    st.builds(
        lambda whole, point, fraction, suffix: whole + point + fraction + suffix,
        _DIGITS,
        st.sampled_from(["", "."]),
        _DIGITS,
        st.sampled_from(["", "m", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "k", "M", "G", "E", "x"]),
    ),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.decimals(allow_nan=True, allow_infinity=True),
    st.floats(),
)


@given(QUANTITY_TEXT)
def test_any_cpu_parses_within_its_bound_or_is_refused_with_the_rule(value: Any) -> None:
    try:
        cores = parse_cpu(value)
    except ValueError:
        return
    assert Decimal(0) <= cores <= MAX_CPU_CORES
    assert cores == cores.quantize(Decimal("0.001"))


@given(QUANTITY_TEXT)
def test_any_memory_parses_within_its_bound_or_is_refused_with_the_rule(value: Any) -> None:
    try:
        mib = parse_memory_mib(value)
    except ValueError:
        return
    assert 0 <= mib <= MAX_MEMORY_BYTES // MIB


@given(QUANTITY_TEXT)
def test_any_count_parses_within_its_bound_or_is_refused_with_the_rule(value: Any) -> None:
    try:
        count = parse_count(value)
    except ValueError:
        return
    assert 0 <= count < 10**18


def validated[T](validate: Callable[[Any], T], data: Any) -> tuple[T | None, list[FieldError]]:
    """What validation made of ``data``, or None and its field errors."""
    try:
        return validate(data), []
    except ValidationError as error:
        return None, field_errors(error)


LIMIT_RULES = {
    "cpu": (CPU_RULE, CPU_BOUND_RULE),
    "memory": (MEMORY_RULE, MEMORY_BOUND_RULE),
    "nvidia.com/gpu": (COUNT_RULE,),
    "instances": (COUNT_RULE,),
}


@given(st.sampled_from(sorted(LIMIT_RULES)), QUANTITY_TEXT)
def test_any_pool_limit_is_stored_within_dynamodb_or_refused_naming_the_field(
    dimension: str, value: Any
) -> None:
    limits, problems = validated(PoolLimits.model_validate, {dimension: value})
    if limits is None:
        [problem] = problems
        assert problem.field == dimension
        assert problem.rule in LIMIT_RULES[dimension] or "millicores" in problem.rule
        return
    bound = limits.limit_for(dimension)
    assert bound is not None
    # DynamoDB numbers carry 38 significant digits.
    assert len(bound.as_tuple().digits) <= 38
    assert PoolLimits.model_validate(limits.to_document()) == limits


def hub_pool(limits: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "capacity-launcher/v1",
        "kind": "NodePool",
        "metadata": {"name": "pool"},
        "spec": {"nodeClassRef": "general", "limits": limits},
    }


def karpenter_pool(limits: dict[str, Any]) -> dict[str, Any]:
    ref = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "pool"},
        "spec": {
            "template": {"spec": {"nodeClassRef": ref, "requirements": []}},
            "limits": limits,
        },
    }


def quota(resource: str, amount: str) -> dict[str, Any]:
    return {
        "apiVersion": "capacity-launcher/v1",
        "kind": "CapacityQuota",
        "metadata": {"name": "team-a"},
        "spec": {
            "requesters": ["team-a"],
            "resourceGroups": [
                {
                    "coveredResources": [resource],
                    "flavors": [
                        {"name": "pool", "resources": [{"name": resource, "nominalQuota": amount}]}
                    ],
                }
            ],
        },
    }


@pytest.mark.parametrize(
    ("document", "field", "rule"),
    [
        (hub_pool({"cpu": HUGE}), "spec.limits.cpu", CPU_BOUND_RULE),
        (hub_pool({"memory": HUGE + "Ei"}), "spec.limits.memory", MEMORY_BOUND_RULE),
        (karpenter_pool({"cpu": HUGE}), "spec.limits.cpu", CPU_BOUND_RULE),
        (karpenter_pool({"memory": "2Ei"}), "spec.limits.memory", MEMORY_BOUND_RULE),
        (
            quota("cpu", HUGE),
            "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota",
            CPU_BOUND_RULE,
        ),
        (
            quota("memory", "9" * 20 + "Ei"),
            "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota",
            MEMORY_BOUND_RULE,
        ),
    ],
)
def test_documents_with_huge_quantities_are_refused_naming_the_field(
    document: dict[str, Any], field: str, rule: str
) -> None:
    read = REGISTRY.read if document["apiVersion"].startswith("karpenter") else parse_document
    with pytest.raises(ConfigValidationError) as caught:
        read(document)

    assert FieldError(field, rule) in caught.value.errors


@given(
    st.sampled_from(["Gt", "Lt", "In", "NotIn"]),
    st.one_of(_DIGITS, st.text(max_size=70), st.integers(min_value=-(10**40), max_value=10**40)),
)
def test_a_launch_request_with_any_integer_requirement_parses_or_names_the_field(
    operator: str, value: Any
) -> None:
    body = {
        "requestId": "r-1",
        "count": 1,
        "requirements": [
            {"key": "karpenter.k8s.aws/instance-cpu", "operator": operator, "values": [value]}
        ],
    }
    request, problems = validated(LaunchRequest.model_validate, body)
    if request is None:
        assert problems
        assert all(p.field.startswith("requirements[0]") for p in problems)
        return
    [requirement] = request.requirements
    assert all(len(value.lstrip("-")) <= 18 for value in requirement.values)
    assert isinstance(request.requirements_set().allows(requirement.key, "4"), bool)
