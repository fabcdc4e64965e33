"""CPU and memory quantities, resource arithmetic, and pool limits."""

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from capacity_launcher.domain.field_errors import FieldError, field_errors
from capacity_launcher.domain.quantities import (
    COUNT_RULE,
    CPU_RULE,
    DIMENSIONS,
    MEMORY_RULE,
    PoolLimits,
    Resources,
    format_cpu,
    format_memory,
    limits_token,
    parse_count,
    parse_cpu,
    parse_memory_mib,
)


@pytest.mark.parametrize(
    ("text", "cores"),
    [
        ("500m", Decimal("0.5")),
        ("2048", Decimal(2048)),
        ("1.5", Decimal("1.5")),
        ("0", Decimal(0)),
        (" 4 ", Decimal(4)),
        (2, Decimal(2)),
        (0.25, Decimal("0.25")),
        ("1m", Decimal("0.001")),
        (".5", Decimal("0.5")),
    ],
)
def test_parse_cpu_reads_cores_and_millicores(text: str | int | float, cores: Decimal) -> None:
    assert parse_cpu(text) == cores


@pytest.mark.parametrize(
    "text", ["", "-1", "two", "5x", "1e3", "500mm", "m", True, None, float("nan"), float("inf")]
)
def test_parse_cpu_refuses_what_is_not_a_quantity(text: Any) -> None:
    with pytest.raises(ValueError, match="number of cores or millicores"):
        parse_cpu(text)


def test_parse_cpu_refuses_fractions_of_a_millicore() -> None:
    with pytest.raises(ValueError, match="whole number of millicores"):
        parse_cpu("0.0005")


@pytest.mark.parametrize(
    ("text", "mib"),
    [
        ("16Ti", 16777216),
        ("1Gi", 1024),
        ("512Mi", 512),
        ("2048Ki", 2),
        ("1Pi", 1024**3),
        ("1G", 953),
        ("1T", 953674),
        ("1048576", 1),
        (1048576 * 3, 3),
        ("1.5Gi", 1536),
        ("512", 0),
        ("4M", 3),
        ("8K", 0),
    ],
)
def test_parse_memory_reads_binary_and_decimal_suffixes(text: str | int, mib: int) -> None:
    assert parse_memory_mib(text) == mib


@pytest.mark.parametrize("text", ["", "-1Gi", "16TB", "16ti", "Gi", "1.2.3Gi", False, [1]])
def test_parse_memory_refuses_what_is_not_a_quantity(text: Any) -> None:
    with pytest.raises(ValueError, match="number of bytes with an optional suffix"):
        parse_memory_mib(text)


@pytest.mark.parametrize(("text", "count"), [("128", 128), (32, 32), ("0", 0)])
def test_parse_count_reads_whole_numbers(text: str | int, count: int) -> None:
    assert parse_count(text) == count


@pytest.mark.parametrize("text", ["-1", "1.5", 1.0, "ten", "", True])
def test_parse_count_refuses_anything_else(text: Any) -> None:
    with pytest.raises(ValueError, match="non-negative whole number"):
        parse_count(text)


@pytest.mark.parametrize(
    ("cores", "text"), [(Decimal(2048), "2048"), (Decimal("1.5"), "1500m"), (Decimal(0), "0")]
)
def test_format_cpu(cores: Decimal, text: str) -> None:
    assert format_cpu(cores) == text


@pytest.mark.parametrize(
    ("mib", "text"),
    [(16777216, "16Ti"), (1536, "1536Mi"), (2048, "2Gi"), (1024**3, "1Pi"), (0, "0")],
)
def test_format_memory_picks_the_largest_exact_unit(mib: int, text: str) -> None:
    assert format_memory(mib) == text


@given(st.integers(min_value=0, max_value=10**9))
def test_memory_format_round_trips(mib: int) -> None:
    assert parse_memory_mib(format_memory(mib)) == mib


@given(st.integers(min_value=0, max_value=10**9))
def test_cpu_format_round_trips(millicores: int) -> None:
    cores = Decimal(millicores) / 1000

    assert parse_cpu(format_cpu(cores)) == cores


# --- Resources -----------------------------------------------------------------------------------

P5 = Resources(cpu=Decimal(192), memory_mib=2097152, gpu=8, instances=1)


def test_resources_add_subtract_and_multiply() -> None:
    two = P5 * 2

    assert two == Resources(Decimal(384), 4194304, 16, 2)
    assert two == 2 * P5
    assert two - P5 == P5
    assert P5 + Resources.ZERO == P5
    assert (P5 - P5).is_zero()
    assert Resources.ZERO.is_zero()


def test_resources_multiply_only_by_whole_numbers() -> None:
    with pytest.raises(TypeError):
        P5 * 1.5  # type: ignore[operator]
    with pytest.raises(TypeError):
        P5 * True  # type: ignore[operator]


def test_resources_amounts_round_trip_by_dimension_name() -> None:
    amounts = P5.amounts()

    assert list(amounts) == list(DIMENSIONS)
    assert amounts["nvidia.com/gpu"] == Decimal(8)
    assert P5.amount("memory") == Decimal(2097152)
    assert Resources.from_amounts(amounts) == P5
    assert Resources.from_amounts({}) == Resources.ZERO


def test_fits_within_names_the_exceeded_dimensions() -> None:
    limits = PoolLimits.model_validate({"cpu": "256", "nvidia.com/gpu": 8, "instances": "1"})

    assert P5.fits_within(limits) == []
    assert (P5 * 2).fits_within(limits) == ["cpu", "nvidia.com/gpu", "instances"]


def test_fits_within_no_limits_always_fits() -> None:
    assert (P5 * 1000).fits_within(PoolLimits()) == []


# --- PoolLimits ----------------------------------------------------------------------------------


def test_pool_limits_parse_the_documents_form() -> None:
    limits = PoolLimits.model_validate(
        {"cpu": "2048", "memory": "16Ti", "nvidia.com/gpu": "128", "instances": "32"}
    )

    assert limits.cpu == Decimal(2048)
    assert limits.memory == 16777216
    assert limits.gpu == 128
    assert limits.instances == 32
    assert limits.limit_for("nvidia.com/gpu") == Decimal(128)
    assert limits.as_resources() == Resources(Decimal(2048), 16777216, 128, 32)


def test_pool_limits_serialize_back_to_the_documents_form() -> None:
    document = {"cpu": "2048", "memory": "16Ti", "nvidia.com/gpu": "128", "instances": "32"}

    limits = PoolLimits.model_validate(document)

    assert limits.to_document() == document
    assert limits.model_dump(mode="json", by_alias=True) == document
    assert PoolLimits.model_validate(limits.to_document()) == limits


def test_absent_limits_are_unlimited() -> None:
    limits = PoolLimits.model_validate({"cpu": 8})

    assert limits.limit_for("memory") is None
    assert limits.limit_for("instances") is None
    assert not limits.is_unlimited()
    assert PoolLimits().is_unlimited()
    assert limits.to_document() == {"cpu": "8"}


def test_gpu_limit_accepts_its_python_name_too() -> None:
    assert PoolLimits(gpu=4).limit_for("nvidia.com/gpu") == Decimal(4)


@pytest.mark.parametrize(
    ("document", "field", "rule"),
    [
        ({"cpu": "lots"}, "cpu", CPU_RULE),
        ({"memory": "16TB"}, "memory", MEMORY_RULE),
        ({"nvidia.com/gpu": "1.5"}, "nvidia.com/gpu", COUNT_RULE),
        ({"instances": -1}, "instances", COUNT_RULE),
        ({"pods": "10"}, "pods", "is not an allowed field"),
    ],
)
def test_pool_limits_errors_name_the_field_and_rule(
    document: dict[str, Any], field: str, rule: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        PoolLimits.model_validate(document)

    assert field_errors(caught.value) == [FieldError(field, rule)]


def test_headroom_counts_what_still_fits() -> None:
    limits = PoolLimits.model_validate({"nvidia.com/gpu": "32", "instances": "10"})
    used = P5 * 3

    assert limits.headroom(used, P5) == 1
    assert limits.headroom(P5 * 4, P5) == 0
    assert limits.headroom(P5 * 5, P5) == 0
    assert PoolLimits().headroom(used, P5) is None


def test_a_pool_without_unready_keeps_the_limits_token_stored_before_unready_existed() -> None:
    # Pools stored earlier carry this token; each lease checks the token it computes against it.
    before = '{"cpu": "8", "instances": null, "memory": null, "nvidia.com/gpu": null}'

    assert limits_token(PoolLimits.model_validate({"cpu": 8})) == before
    assert "unready" in limits_token(PoolLimits.model_validate({"cpu": 8, "unready": "20%"}))
