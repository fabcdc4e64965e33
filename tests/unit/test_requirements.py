"""Requirement validation and the requirements algebra (intersect, match, narrow)."""

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from capacity_launcher.domain.capacity.constraints import Constraint, Requirements, narrow
from capacity_launcher.domain.capacity.requirements import (
    ARCH,
    CAPACITY_RESERVATION_ID,
    CAPACITY_RESERVATION_INTERRUPTIBLE,
    CAPACITY_RESERVATION_TYPE,
    CAPACITY_TYPE,
    CAPACITY_TYPES,
    INSTANCE_ACCELERATOR_COUNT,
    INSTANCE_ACCELERATOR_MANUFACTURER,
    INSTANCE_ACCELERATOR_NAME,
    INSTANCE_CATEGORY,
    INSTANCE_CPU,
    INSTANCE_FAMILY,
    INSTANCE_GENERATION,
    INSTANCE_GPU_COUNT,
    INSTANCE_GPU_MANUFACTURER,
    INSTANCE_GPU_NAME,
    INSTANCE_LOCAL_NVME,
    INSTANCE_MEMORY,
    INSTANCE_SIZE,
    INSTANCE_TYPE,
    INTEGER_KEYS,
    OS,
    WELL_KNOWN_KEYS,
    ZONE,
    Operator,
    Requirement,
)
from capacity_launcher.domain.errors import RequirementsConflict
from capacity_launcher.domain.field_errors import field_errors


def req(key: str, operator: str, *values: str) -> Requirement:
    return Requirement(key=key, operator=Operator(operator), values=values)


def reqs(*terms: Requirement) -> Requirements:
    return Requirements.of(terms)


def rule_for(data: dict[str, Any]) -> tuple[str, str]:
    with pytest.raises(ValidationError) as caught:
        Requirement.model_validate(data)
    (error,) = field_errors(caught.value)
    return error.field, error.rule


# --- keys and operators --------------------------------------------------------------------------


def test_well_known_keys_are_designs_fourteen_instance_category_and_reservation_kinds() -> None:
    assert {
        INSTANCE_TYPE,
        ZONE,
        ARCH,
        OS,
        CAPACITY_TYPE,
        INSTANCE_CATEGORY,
        INSTANCE_FAMILY,
        INSTANCE_SIZE,
        INSTANCE_GENERATION,
        INSTANCE_CPU,
        INSTANCE_MEMORY,
        INSTANCE_GPU_COUNT,
        INSTANCE_GPU_NAME,
        INSTANCE_GPU_MANUFACTURER,
        INSTANCE_ACCELERATOR_COUNT,
        INSTANCE_ACCELERATOR_NAME,
        INSTANCE_ACCELERATOR_MANUFACTURER,
        INSTANCE_LOCAL_NVME,
        CAPACITY_RESERVATION_ID,
        CAPACITY_RESERVATION_TYPE,
        CAPACITY_RESERVATION_INTERRUPTIBLE,
    } == WELL_KNOWN_KEYS
    assert INSTANCE_LOCAL_NVME == "karpenter.k8s.aws/instance-local-nvme"
    assert CAPACITY_RESERVATION_TYPE == "karpenter.k8s.aws/capacity-reservation-type"
    assert CAPACITY_RESERVATION_INTERRUPTIBLE == (
        "karpenter.k8s.aws/capacity-reservation-interruptible"
    )
    assert INSTANCE_CATEGORY == "karpenter.k8s.aws/instance-category"
    assert INSTANCE_FAMILY == "karpenter.k8s.aws/instance-family"
    assert INSTANCE_GPU_MANUFACTURER == "karpenter.k8s.aws/instance-gpu-manufacturer"
    integers = {INSTANCE_GENERATION, INSTANCE_CPU, INSTANCE_MEMORY, INSTANCE_GPU_COUNT}
    assert integers | {INSTANCE_LOCAL_NVME, INSTANCE_ACCELERATOR_COUNT} == INTEGER_KEYS
    assert INSTANCE_ACCELERATOR_COUNT == "karpenter.k8s.aws/instance-accelerator-count"
    assert CAPACITY_TYPES == ("reserved", "on-demand", "spot")


def test_operators_spell_like_karpenter() -> None:
    assert [str(o) for o in Operator] == ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]


# --- Requirement validation ----------------------------------------------------------------------


def test_a_valid_requirement_is_frozen_and_dedupes_values() -> None:
    requirement = Requirement.model_validate(
        {"key": INSTANCE_FAMILY, "operator": "In", "values": ["p5", "p4d", "p5"]}
    )

    assert requirement.values == ("p5", "p4d")
    with pytest.raises(ValidationError):
        requirement.key = ZONE  # type: ignore[misc]


def test_unknown_key_is_refused_by_name() -> None:
    field, rule = rule_for({"key": "example.com/team", "operator": "Exists"})

    assert field == "key"
    assert rule.startswith("must be a well-known key")
    assert CAPACITY_TYPE in rule


def test_unknown_operator_is_refused() -> None:
    field, rule = rule_for({"key": ZONE, "operator": "Like", "values": ["a"]})

    assert field == "operator"
    assert "'In'" in rule


def test_unknown_fields_are_refused() -> None:
    field, rule = rule_for({"key": ZONE, "operator": "Exists", "weight": 2})

    assert (field, rule) == ("weight", "is not an allowed field")


# --- minValues (flexibility) ---------------------------------------------------------------------


def test_min_values_is_read_and_written_in_karpenters_spelling() -> None:
    term = Requirement.model_validate(
        {"key": INSTANCE_FAMILY, "operator": "In", "values": ["m5", "c5", "r5"], "minValues": 2}
    )

    assert term.min_values == 2
    assert term.model_dump(by_alias=True)["minValues"] == 2
    assert "minValues" not in Requirement(key=ZONE, operator=Operator.EXISTS).model_dump(
        by_alias=True
    )


def test_min_values_cannot_exceed_the_values_in_allows() -> None:
    field, rule = rule_for(
        {"key": INSTANCE_FAMILY, "operator": "In", "values": ["m5"], "minValues": 2}
    )

    assert (field, rule) == ("minValues", "2 exceeds the 1 values operator In allows")


def test_min_values_on_does_not_exist_is_refused() -> None:
    field, rule = rule_for({"key": INSTANCE_FAMILY, "operator": "DoesNotExist", "minValues": 1})

    assert (field, rule) == ("minValues", "operator DoesNotExist leaves no values to choose among")


def test_min_values_survive_intersection_and_the_larger_wins() -> None:
    pool = Requirements.of(
        [Requirement(key=INSTANCE_FAMILY, operator=Operator.EXISTS, min_values=2)]
    )
    request = Requirements.of(
        [
            Requirement(
                key=INSTANCE_FAMILY, operator=Operator.IN, values=("m5", "c5", "r5"), min_values=3
            )
        ]
    )

    narrowed = narrow(pool, request, strict=True)

    assert narrowed.min_values() == {INSTANCE_FAMILY: 3}
    (term,) = narrowed.to_list()
    assert term.min_values == 3
    assert Requirements.of(narrowed.to_list()) == narrowed


def test_a_request_narrowing_below_the_pools_min_values_is_a_conflict() -> None:
    pool = Requirements.of(
        [
            Requirement(
                key=INSTANCE_FAMILY, operator=Operator.IN, values=("m5", "c5", "r5"), min_values=2
            )
        ]
    )
    request = Requirements.of(
        [Requirement(key=INSTANCE_FAMILY, operator=Operator.IN, values=("m5",))]
    )

    with pytest.raises(RequirementsConflict) as caught:
        narrow(pool, request, strict=True)

    assert caught.value.keys == (INSTANCE_FAMILY,)
    assert "minValues=2 needs at least 2 values" in str(caught.value)


@pytest.mark.parametrize("operator", ["In", "NotIn"])
def test_in_and_not_in_need_a_value(operator: str) -> None:
    assert rule_for({"key": ZONE, "operator": operator}) == (
        "values",
        f"operator {operator} requires at least one value",
    )
    assert rule_for({"key": ZONE, "operator": operator, "values": []})[0] == "values"


@pytest.mark.parametrize("operator", ["Exists", "DoesNotExist"])
def test_exists_and_does_not_exist_take_no_values(operator: str) -> None:
    assert rule_for({"key": ZONE, "operator": operator, "values": ["a"]}) == (
        "values",
        f"operator {operator} takes no values",
    )


@pytest.mark.parametrize("values", [[], ["1", "2"]])
@pytest.mark.parametrize("operator", ["Gt", "Lt"])
def test_gt_and_lt_take_exactly_one_value(operator: str, values: list[str]) -> None:
    assert rule_for({"key": INSTANCE_CPU, "operator": operator, "values": values}) == (
        "values",
        f"operator {operator} requires exactly one integer value",
    )


@pytest.mark.parametrize("operator", ["Gt", "Lt"])
def test_gt_and_lt_apply_only_to_integer_keys(operator: str) -> None:
    field, rule = rule_for({"key": INSTANCE_SIZE, "operator": operator, "values": ["4"]})

    assert field == "values"
    assert rule.startswith(f"operator {operator} applies only to integer keys")


@pytest.mark.parametrize("operator", ["Gt", "In", "NotIn"])
@pytest.mark.parametrize("value", ["four", "4.5", "1e3", "1" * 19])
def test_integer_keys_need_integer_values(operator: str, value: str) -> None:
    field, rule = rule_for({"key": INSTANCE_GENERATION, "operator": operator, "values": [value]})

    assert (field, rule) == (
        "values",
        f"values of {INSTANCE_GENERATION} must be integers of at most 18 digits",
    )


def test_integer_values_are_spelled_canonically() -> None:
    assert req(INSTANCE_GENERATION, "In", "05", "+6").values == ("5", "6")
    assert Requirement.model_validate(
        {"key": INSTANCE_CPU, "operator": "Gt", "values": [8]}
    ).values == ("8",)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (ARCH, "x86_64"),
        (CAPACITY_TYPE, "Spot"),
        (CAPACITY_RESERVATION_TYPE, "capacity-blocks"),
        (CAPACITY_RESERVATION_TYPE, "interruptible"),
        (CAPACITY_RESERVATION_INTERRUPTIBLE, "True"),
        (CAPACITY_RESERVATION_INTERRUPTIBLE, "yes"),
    ],
)
def test_closed_keys_take_only_their_values(key: str, value: str) -> None:
    field, rule = rule_for({"key": key, "operator": "In", "values": [value]})

    assert field == "values"
    assert rule.startswith(f"values of {key} must be among")


@pytest.mark.parametrize(
    ("key", "values"),
    [
        (CAPACITY_RESERVATION_TYPE, ["default", "capacity-block"]),
        (CAPACITY_RESERVATION_INTERRUPTIBLE, ["true", "false"]),
    ],
)
def test_reservation_kind_keys_take_karpenters_values(key: str, values: list[str]) -> None:
    requirement = Requirement.model_validate({"key": key, "operator": "In", "values": values})

    assert requirement.values == tuple(values)


@pytest.mark.parametrize("value", ["x" * 64, "a\nb", "tab\there", "nul\x00", ""])
def test_values_are_bounded_and_printable(value: str) -> None:
    assert rule_for({"key": ZONE, "operator": "In", "values": [value]}) == (
        "values",
        "each value must be 1 to 63 characters without control characters",
    )


def test_values_are_not_bounded_in_number() -> None:
    # Karpenter's CRD bounds each value (63 characters), not how many a requirement holds.
    assert len(req(INSTANCE_TYPE, "In", *(f"t{i}" for i in range(800))).values) == 800


# --- allows / matches ----------------------------------------------------------------------------


def test_in_requires_presence_and_membership() -> None:
    r = reqs(req(ZONE, "In", "a", "b"))

    assert r.allows(ZONE, "a")
    assert not r.allows(ZONE, "c")
    assert not r.allows(ZONE, None)


def test_not_in_admits_absence_and_other_values() -> None:
    r = reqs(req(ZONE, "NotIn", "a"))

    assert r.allows(ZONE, None)
    assert r.allows(ZONE, "b")
    assert not r.allows(ZONE, "a")


def test_exists_and_does_not_exist() -> None:
    exists, absent = reqs(req(ZONE, "Exists")), reqs(req(ZONE, "DoesNotExist"))

    assert exists.allows(ZONE, "a")
    assert not exists.allows(ZONE, None)
    assert absent.allows(ZONE, None)
    assert not absent.allows(ZONE, "a")


def test_gt_and_lt_compare_integers_and_require_presence() -> None:
    r = reqs(req(INSTANCE_CPU, "Gt", "8"), req(INSTANCE_CPU, "Lt", "64"))

    assert r.allows(INSTANCE_CPU, "9")
    assert r.allows(INSTANCE_CPU, "63")
    assert not r.allows(INSTANCE_CPU, "8")
    assert not r.allows(INSTANCE_CPU, "64")
    assert not r.allows(INSTANCE_CPU, "many")
    assert not r.allows(INSTANCE_CPU, None)
    assert r.allows(INSTANCE_CPU, "016")  # labels are read as integers too


def test_unconstrained_key_admits_anything() -> None:
    r = reqs(req(ZONE, "In", "a"))

    assert r.allows(ARCH, "arm64")
    assert r.allows(ARCH, None)
    assert Requirements().matches({})


def test_matches_checks_every_constrained_key() -> None:
    r = reqs(req(ZONE, "In", "us-east-1a"), req(INSTANCE_GPU_COUNT, "Gt", "0"))

    assert r.matches({ZONE: "us-east-1a", INSTANCE_GPU_COUNT: "8", ARCH: "amd64"})
    assert not r.matches({ZONE: "us-east-1a", INSTANCE_GPU_COUNT: "0"})
    assert not r.matches({INSTANCE_GPU_COUNT: "8"})


def test_allowed_values_filters_in_candidate_order() -> None:
    r = reqs(req(CAPACITY_TYPE, "NotIn", "reserved"))

    assert r.allowed_values(CAPACITY_TYPE, CAPACITY_TYPES) == ["on-demand", "spot"]
    assert r.allowed_values(ZONE, ["b", "a"]) == ["b", "a"]


# --- intersection and emptiness ------------------------------------------------------------------


def test_several_requirements_on_one_key_are_anded() -> None:
    r = reqs(req(ZONE, "In", "a", "b"), req(ZONE, "NotIn", "b"))

    assert r.allowed_values(ZONE, ["a", "b", "c"]) == ["a"]
    assert r.to_list() == [req(ZONE, "In", "a")]


@pytest.mark.parametrize(
    "terms",
    [
        [req(ZONE, "In", "a"), req(ZONE, "In", "b")],
        [req(INSTANCE_CPU, "Gt", "8"), req(INSTANCE_CPU, "Lt", "4")],
        [req(INSTANCE_CPU, "Gt", "8"), req(INSTANCE_CPU, "Lt", "9")],
        [
            req(INSTANCE_CPU, "Gt", "2"),
            req(INSTANCE_CPU, "Lt", "5"),
            req(INSTANCE_CPU, "NotIn", "3", "4"),
        ],
        [req(ZONE, "Exists"), req(ZONE, "DoesNotExist")],
        [req(ZONE, "In", "a"), req(ZONE, "DoesNotExist")],
        [req(ZONE, "In", "a"), req(ZONE, "NotIn", "a")],
        [req(INSTANCE_CPU, "In", "4"), req(INSTANCE_CPU, "Gt", "4")],
    ],
)
def test_empty_keys_finds_constraints_that_admit_nothing(terms: list[Requirement]) -> None:
    r = Requirements.of(terms)

    assert r.empty_keys() == [terms[0].key]
    assert not r.allows(terms[0].key, None)
    assert r.to_list() == [req(terms[0].key, "Exists"), req(terms[0].key, "DoesNotExist")]


@pytest.mark.parametrize(
    "terms",
    [
        [req(ZONE, "NotIn", "a"), req(ZONE, "DoesNotExist")],
        [
            req(INSTANCE_CPU, "Gt", "2"),
            req(INSTANCE_CPU, "Lt", "5"),
            req(INSTANCE_CPU, "NotIn", "3"),
        ],
        [req(INSTANCE_CPU, "Gt", "8")],
    ],
)
def test_non_empty_constraints_are_not_reported(terms: list[Requirement]) -> None:
    assert Requirements.of(terms).empty_keys() == []


def test_intersect_keeps_keys_of_both_sides() -> None:
    a = reqs(req(ZONE, "In", "a", "b"))
    b = reqs(req(ZONE, "In", "b", "c"), req(ARCH, "In", "arm64"))

    both = a.intersect(b)

    assert both.keys() == frozenset({ZONE, ARCH})
    assert both == reqs(req(ARCH, "In", "arm64"), req(ZONE, "In", "b"))
    assert (a & b) == both


def test_canonical_list_is_sorted_and_minimal() -> None:
    r = reqs(
        req(ZONE, "In", "b", "a"),
        req(INSTANCE_CPU, "Lt", "64"),
        req(INSTANCE_CPU, "Gt", "4"),
        req(INSTANCE_CPU, "NotIn", "100", "8"),
        req(ARCH, "Exists"),
        req(OS, "NotIn", "windows"),
    )

    assert r.to_list() == [
        req(INSTANCE_CPU, "NotIn", "8"),
        req(INSTANCE_CPU, "Gt", "4"),
        req(INSTANCE_CPU, "Lt", "64"),
        req(ARCH, "Exists"),
        req(OS, "NotIn", "windows"),
        req(ZONE, "In", "a", "b"),
    ]
    assert Requirements.of(r.to_list()) == r
    assert list(r) == r.to_list()


def test_exists_with_exclusions_keeps_both_terms() -> None:
    r = reqs(req(ZONE, "NotIn", "a"), req(ZONE, "Exists"))

    assert r.to_list() == [req(ZONE, "Exists"), req(ZONE, "NotIn", "a")]
    assert not r.allows(ZONE, None)


def test_truthiness_equality_and_hash() -> None:
    assert not Requirements()
    assert not reqs(req(ZONE, "NotIn", "a"), req(ZONE, "In", "b")).empty_keys()
    assert reqs(req(ZONE, "In", "a"))
    assert reqs(req(ZONE, "In", "a", "b")) == reqs(req(ZONE, "In", "b", "a"))
    assert hash(reqs(req(ZONE, "In", "a", "b"))) == hash(reqs(req(ZONE, "In", "b", "a")))
    assert reqs(req(ZONE, "In", "a")) != reqs(req(ZONE, "In", "b"))
    assert Requirements() != "nothing"
    assert len(reqs(req(ZONE, "In", "a"), req(ARCH, "Exists"))) == 2
    assert "topology.kubernetes.io/zone In ['a']" in repr(reqs(req(ZONE, "In", "a")))


@pytest.mark.parametrize(
    ("terms", "words"),
    [
        ([req(CAPACITY_TYPE, "In", "reserved", "on-demand")], "[on-demand, reserved]"),
        ([req(ZONE, "NotIn", "a")], "any value except [a] or none"),
        ([req(ZONE, "Exists")], "any value"),
        ([req(ZONE, "DoesNotExist")], "no value (the label must be absent)"),
        ([req(INSTANCE_CPU, "Gt", "4"), req(INSTANCE_CPU, "Lt", "9")], "values > 4 and < 9"),
        ([req(INSTANCE_CPU, "Lt", "9"), req(INSTANCE_CPU, "NotIn", "3")], "values < 9 except [3]"),
        ([req(INSTANCE_CPU, "In", "16", "4")], "[4, 16]"),
        ([req(ZONE, "In", "a"), req(ZONE, "In", "b")], "no value"),
    ],
)
def test_describe_reads_as_words(terms: list[Requirement], words: str) -> None:
    assert Requirements.of(terms).describe(terms[0].key) == words


# --- narrow --------------------------------------------------------------------------------------


def test_narrow_returns_the_intersection() -> None:
    pool = reqs(req(CAPACITY_TYPE, "In", "reserved", "on-demand"), req(INSTANCE_FAMILY, "In", "p5"))
    request = reqs(req(CAPACITY_TYPE, "In", "reserved"), req(ZONE, "In", "us-east-1a"))

    narrowed = narrow(pool, request)

    assert narrowed == pool.intersect(request)
    assert narrowed.allowed_values(CAPACITY_TYPE, CAPACITY_TYPES) == ["reserved"]


def test_narrow_refuses_a_request_outside_the_pool_naming_the_key() -> None:
    pool = reqs(req(CAPACITY_TYPE, "In", "reserved", "on-demand"))
    request = reqs(req(CAPACITY_TYPE, "In", "spot"))

    with pytest.raises(RequirementsConflict) as caught:
        narrow(pool, request)

    assert str(caught.value) == (
        "requirements[karpenter.sh/capacity-type]: request allows [spot] but node pool allows "
        "only [on-demand, reserved]: requirements can only narrow a node pool"
    )
    assert caught.value.keys == (CAPACITY_TYPE,)
    assert caught.value.code == "RequirementsConflict"


def test_narrow_names_every_conflicting_key() -> None:
    pool = reqs(req(ZONE, "In", "a"), req(INSTANCE_CPU, "Lt", "8"))
    request = reqs(req(ZONE, "In", "b"), req(INSTANCE_CPU, "Gt", "16"))

    with pytest.raises(RequirementsConflict) as caught:
        narrow(pool, request)

    assert caught.value.keys == (INSTANCE_CPU, ZONE)
    assert "request allows values > 16 but node pool allows only values < 8" in str(caught.value)


def test_narrow_blames_a_self_contradicting_request() -> None:
    with pytest.raises(RequirementsConflict, match="contradict each other"):
        narrow(Requirements(), reqs(req(ZONE, "In", "a"), req(ZONE, "NotIn", "a")))


def test_narrow_blames_an_empty_pool() -> None:
    pool = reqs(req(ZONE, "In", "a"), req(ZONE, "In", "b"))

    with pytest.raises(RequirementsConflict, match="node pool allows no value"):
        narrow(pool, reqs(req(ZONE, "In", "a")))


def test_narrow_is_lenient_about_partial_overlap_unless_strict() -> None:
    pool = reqs(req(CAPACITY_TYPE, "In", "on-demand"))
    request = reqs(req(CAPACITY_TYPE, "In", "on-demand", "spot"))

    assert narrow(pool, request).allowed_values(CAPACITY_TYPE, CAPACITY_TYPES) == ["on-demand"]
    with pytest.raises(RequirementsConflict, match=r"request allows \[on-demand, spot\]"):
        narrow(pool, request, strict=True)


def test_strict_narrow_accepts_a_true_narrowing() -> None:
    pool = reqs(req(CAPACITY_TYPE, "In", "on-demand", "reserved"))
    request = reqs(req(CAPACITY_TYPE, "In", "reserved"), req(ZONE, "NotIn", "a"))

    assert narrow(pool, request, strict=True) == pool.intersect(request)


# --- properties of the algebra -------------------------------------------------------------------

_KEYS = (ZONE, CAPACITY_TYPE, INSTANCE_CPU)
_VALUES = {
    ZONE: ["a", "b", "c"],
    CAPACITY_TYPE: list(CAPACITY_TYPES),
    INSTANCE_CPU: ["1", "2", "4", "8"],
}


@st.composite
def requirement(draw: st.DrawFn) -> Requirement:
    key = draw(st.sampled_from(_KEYS))
    operators = ["In", "NotIn", "Exists", "DoesNotExist"] + (
        ["Gt", "Lt"] if key == INSTANCE_CPU else []
    )
    operator = draw(st.sampled_from(operators))
    if operator in ("In", "NotIn"):
        values = draw(st.lists(st.sampled_from(_VALUES[key]), min_size=1, max_size=3))
    elif operator in ("Gt", "Lt"):
        values = [str(draw(st.integers(min_value=0, max_value=9)))]
    else:
        values = []
    return Requirement(key=key, operator=Operator(operator), values=tuple(values))


requirements_sets = st.lists(requirement(), max_size=5).map(Requirements.of)


@st.composite
def labels(draw: st.DrawFn) -> dict[str, str]:
    chosen: dict[str, str] = {}
    for key in _KEYS:
        value = draw(
            st.none()
            | st.sampled_from(
                [*_VALUES[key], "x"] if key != INSTANCE_CPU else [str(i) for i in range(11)]
            )
        )
        if value is not None:
            chosen[key] = value
    return chosen


@settings(max_examples=150, deadline=None)
@given(requirements_sets, requirements_sets)
def test_intersect_is_commutative(a: Requirements, b: Requirements) -> None:
    assert a.intersect(b) == b.intersect(a)


@settings(max_examples=100, deadline=None)
@given(requirements_sets, requirements_sets, requirements_sets)
def test_intersect_is_associative(a: Requirements, b: Requirements, c: Requirements) -> None:
    assert a.intersect(b).intersect(c) == a.intersect(b.intersect(c))


@settings(max_examples=150, deadline=None)
@given(requirements_sets, requirements_sets, labels())
def test_matching_an_intersection_is_matching_both(
    a: Requirements, b: Requirements, chosen: dict[str, str]
) -> None:
    assert a.intersect(b).matches(chosen) == (a.matches(chosen) and b.matches(chosen))


@settings(max_examples=150, deadline=None)
@given(st.lists(requirement(), max_size=5), labels())
def test_a_set_matches_exactly_when_every_term_matches(
    terms: list[Requirement], chosen: dict[str, str]
) -> None:
    each = all(Requirements.of([term]).matches(chosen) for term in terms)

    assert Requirements.of(terms).matches(chosen) == each


@settings(max_examples=150, deadline=None)
@given(requirements_sets, labels())
def test_canonical_list_round_trips(r: Requirements, chosen: dict[str, str]) -> None:
    again = Requirements.of(r.to_list())

    assert again == r
    assert again.matches(chosen) == r.matches(chosen)


@settings(max_examples=150, deadline=None)
@given(requirements_sets, labels())
def test_an_empty_key_matches_no_labels(r: Requirements, chosen: dict[str, str]) -> None:
    if r.empty_keys():
        assert not r.matches(chosen)


@settings(max_examples=100, deadline=None)
@given(requirements_sets, requirements_sets)
def test_narrow_either_conflicts_or_returns_the_intersection(
    pool: Requirements, request: Requirements
) -> None:
    emptied = set(pool.intersect(request).empty_keys()) & request.keys()

    if emptied:
        with pytest.raises(RequirementsConflict) as caught:
            narrow(pool, request)
        assert set(caught.value.keys) == emptied
    else:
        assert narrow(pool, request) == pool.intersect(request)


def test_constraint_of_unconstrained_key_is_unconstrained() -> None:
    assert Requirements().constraint(ZONE) == Constraint()
    assert Constraint().is_unconstrained()


def test_without_leaves_keys_unconstrained() -> None:
    r = reqs(req(ZONE, "In", "a"), req(ARCH, "In", "arm64"))

    assert r.without(ZONE) == reqs(req(ARCH, "In", "arm64"))
    assert r.without(ZONE, ARCH, OS) == Requirements()
    assert ZONE in r
    assert ZONE not in r.without(ZONE)
