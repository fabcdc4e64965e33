"""Issue 17, "Who is the requester?": the rule that binds a claimed `requester` to the origin
AWS vouches for (SQS SenderId; the bus event's source and account), and its document form."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from capacity_launcher.domain.apis.quota_sets import conflicts
from capacity_launcher.domain.apis.quotas import CapacityQuota, parse_quota
from capacity_launcher.domain.errors import (
    ConfigValidationError,
    RequesterNotAllowed,
    RequestRejected,
)
from capacity_launcher.domain.launch_request import Message
from capacity_launcher.domain.requester_origins import (
    Origin,
    RequesterBindings,
    RequesterOrigins,
    origin_of,
)

NOW = datetime(2026, 11, 28, tzinfo=UTC)

ACCOUNT_A, ACCOUNT_B = "111122223333", "444455556666"
ROLE_A, ROLE_B = "AROAEXAMPLEROLEAAAAA", "AROAEXAMPLEROLEBBBBB"


def quota(name: str, requesters: list[str], origins: dict[str, Any] | None = None) -> CapacityQuota:
    spec: dict[str, Any] = {
        "requesters": requesters,
        "resourceGroups": [
            {
                "coveredResources": ["instances"],
                "flavors": [
                    {
                        "name": f"pool-{name}",
                        "resources": [{"name": "instances", "nominalQuota": "4"}],
                    }
                ],
            }
        ],
    }
    if origins is not None:
        spec["requesterOrigins"] = origins
    return parse_quota(
        {
            "apiVersion": "capacity-launcher/v1",
            "kind": "CapacityQuota",
            "metadata": {"name": name},
            "spec": spec,
        }
    )


BINDINGS = RequesterBindings.of(
    [
        quota(
            "team-a",
            ["team-a"],
            {
                "team-a": {
                    "eventSources": ["team-a.scheduler"],
                    "accounts": [ACCOUNT_A],
                    "queueSenders": [ROLE_A],
                }
            },
        ),
        quota("team-b", ["team-b", "team-b-ci"], {"team-b": {"accounts": [ACCOUNT_B]}}),
        quota("team-c", ["team-c"]),
    ]
)


def bus(source: str, account: str, sender: str | None = "AIDAEVENTBRIDGEDELIVERY") -> Origin:
    return Origin(sender, source, account)


# -- the rule -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "origin",
    [
        Origin(f"{ROLE_A}:scheduler"),  # any session of the bound role
        Origin(ROLE_A),
        bus("team-a.scheduler", ACCOUNT_A),
        bus("team-a.scheduler", ACCOUNT_A, sender=None),  # the event invoked the function itself
    ],
)
def test_a_bound_origin_may_claim_its_requester(origin: Origin) -> None:
    assert BINDINGS.requester_for("team-a", origin) == "team-a"


@pytest.mark.parametrize(
    ("origin", "described"),
    [
        (
            Origin(f"{ROLE_B}:scheduler"),
            f"sent to the launch queue by {ROLE_B}:scheduler, a sender no binding lists",
        ),
        (Origin(f"{ROLE_A}X:s"), f"sent to the launch queue by {ROLE_A}X:s, a sender no binding"),
        (
            bus("team-b.scheduler", ACCOUNT_A),
            "a bus event from source 'team-b.scheduler' in account '111122223333'",
        ),
        (
            bus("team-a.scheduler", ACCOUNT_B),
            "a bus event from source 'team-a.scheduler' in account '444455556666'",
        ),
        (Origin(None), "a request without a SenderId or an event envelope"),
    ],
)
def test_any_other_origin_claiming_a_bound_requester_is_refused_naming_field_and_rule(
    origin: Origin, described: str
) -> None:
    with pytest.raises(RequesterNotAllowed) as refused:
        BINDINGS.requester_for("team-a", origin)

    assert isinstance(refused.value, RequestRejected)
    assert refused.value.code == "RequesterNotAllowed"
    assert refused.value.reason.startswith(
        "requester: 'team-a' may be claimed only by bus events from team-a.scheduler in "
        f"{ACCOUNT_A} or queue senders {ROLE_A} (CapacityQuota spec.requesterOrigins); "
        "this request is "
    )
    assert described in refused.value.reason


def test_a_bound_sender_writing_an_envelope_is_still_only_itself() -> None:
    # ROLE_A is a bound sender: the envelope it wrote into its body proves no bus origin.
    forged = Origin(f"{ROLE_A}:s", "team-b.scheduler", ACCOUNT_B)

    with pytest.raises(RequesterNotAllowed, match="sent to the launch queue by"):
        BINDINGS.requester_for("team-b", forged)
    assert BINDINGS.requester_for("team-a", forged) == "team-a"


def test_accounts_alone_bind_every_source_of_those_accounts() -> None:
    assert BINDINGS.requester_for("team-b", bus("anything", ACCOUNT_B)) == "team-b"
    with pytest.raises(RequesterNotAllowed):
        BINDINGS.requester_for("team-b", bus("anything", ACCOUNT_A))
    with pytest.raises(RequesterNotAllowed):  # no queue senders: no direct send may claim it
        BINDINGS.requester_for("team-b", Origin(f"{ROLE_B}:s"))


@pytest.mark.parametrize("requester", ["team-c", "team-b-ci", "nobody-binds-me"])
def test_a_requester_no_quota_binds_is_served_as_claimed_from_anywhere(requester: str) -> None:
    for origin in (Origin(f"{ROLE_B}:s"), bus("x", ACCOUNT_B), Origin(None), Origin(ROLE_A)):
        assert BINDINGS.requester_for(requester, origin) == requester


def test_without_a_requester_the_origins_one_bound_requester_is_used() -> None:
    assert BINDINGS.requester_for(None, Origin(f"{ROLE_A}:s")) == "team-a"
    assert BINDINGS.requester_for(None, bus("team-a.scheduler", ACCOUNT_A)) == "team-a"
    assert BINDINGS.requester_for(None, bus("x", ACCOUNT_B)) == "team-b"
    assert BINDINGS.requester_for(None, Origin(f"{ROLE_B}:s")) is None
    assert BINDINGS.requester_for(None, Origin(None)) is None


def test_an_origin_bound_to_several_requesters_fills_in_none() -> None:
    shared = {"accounts": [ACCOUNT_A]}
    bindings = RequesterBindings.of(
        [quota("q", ["team-a", "team-x"], {"team-a": shared, "team-x": shared})]
    )

    assert bindings.requester_for(None, bus("s", ACCOUNT_A)) is None
    assert bindings.requester_for("team-x", bus("s", ACCOUNT_A)) == "team-x"


def test_no_bindings_change_nothing() -> None:
    bindings = RequesterBindings.of([quota("team-a", ["team-a"])])

    assert not bindings
    assert bindings.requester_for("team-a", Origin("AIDAANYONEATALLXXXXX")) == "team-a"
    assert bindings.requester_for(None, bus("team-a.scheduler", ACCOUNT_A)) is None


# -- where the origin comes from -----------------------------------------------------------------


def test_the_origin_of_a_queue_record_is_its_sender_id_and_the_bus_envelope() -> None:
    event = {
        "version": "0",
        "detail-type": "Launch Requested",
        "source": "team-a.scheduler",
        "account": ACCOUNT_A,
        "detail": {"requestId": "r1", "count": 1},
    }
    record = {
        "messageId": "m1",
        "receiptHandle": "h",
        "body": json.dumps(event),
        "attributes": {
            "ApproximateReceiveCount": "2",
            "SentTimestamp": "1545082649183",
            "SenderId": "AIDAEVENTBRIDGEDELIVERY",
        },
        "eventSourceARN": "arn:aws:sqs:us-east-1:111122223333:launch",
    }

    message = Message.from_sqs_record(record, NOW)

    assert message.origin == Origin("AIDAEVENTBRIDGEDELIVERY", "team-a.scheduler", ACCOUNT_A)
    assert (message.receive_count, message.queue_arn) == (2, record["eventSourceARN"])
    plain = Message.from_sqs_record({**record, "body": json.dumps(event["detail"])}, NOW)
    assert message.received_at == datetime.fromtimestamp(1545082649.183, UTC)
    unstamped = Message.from_sqs_record({**record, "attributes": {}}, NOW)
    assert unstamped.received_at == NOW  # the composition root's clock, not the wall's
    assert plain.origin == Origin("AIDAEVENTBRIDGEDELIVERY")
    assert not plain.origin.is_event


@pytest.mark.parametrize("body", ["not json", "[1]", '{"detail": {}}', b"\xff"])
def test_a_body_that_is_no_event_has_only_its_sender(body: Any) -> None:
    assert origin_of("AIDAX", body) == Origin("AIDAX")


def test_an_envelope_with_odd_fields_is_an_event_no_binding_matches() -> None:
    origin = origin_of(None, {"detail-type": "Launch Requested", "detail": {}, "source": 3})

    assert origin.is_event and origin.event_source == "" and origin.event_account == ""
    with pytest.raises(RequesterNotAllowed):
        BINDINGS.requester_for("team-a", origin)


# -- the document ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("origins", "field", "rule"),
    [
        ({"team-z": {"accounts": [ACCOUNT_A]}}, "spec.requesterOrigins[team-z]", "is not in spec"),
        ({"team-a": {}}, "spec.requesterOrigins[team-a]", "must list at least one of"),
        (
            {"team-a": {"accounts": ["1111"]}},
            "spec.requesterOrigins[team-a].accounts[0]",
            "must be a 12-digit AWS account id",
        ),
        (
            {"team-a": {"queueSenders": ["arn:aws:iam::111122223333:role/a"]}},
            "spec.requesterOrigins[team-a].queueSenders[0]",
            "must be an IAM unique id as SQS's SenderId carries it",
        ),
        (
            {"team-a": {"eventSources": ["capacity-launcher"]}},
            "spec.requesterOrigins[team-a].eventSources[0]",
            "'capacity-launcher' is the service's own source",
        ),
        (
            {"team-a": {"eventSources": ["aws.ec2"]}},
            "spec.requesterOrigins[team-a].eventSources[0]",
            "aws.* sources are AWS services'",
        ),
        (
            {"team-a": {"accounts": [ACCOUNT_A, ACCOUNT_A]}},
            "spec.requesterOrigins[team-a].accounts",
            "must not repeat 111122223333",
        ),
        (
            {"team-a": {"queueSender": [ROLE_A]}},
            "spec.requesterOrigins[team-a].queueSender",
            "is not an allowed field",
        ),
    ],
)
def test_bad_bindings_are_refused_naming_field_and_rule(
    origins: dict[str, Any], field: str, rule: str
) -> None:
    with pytest.raises(ConfigValidationError) as refused:
        quota("team-a", ["team-a"], origins)

    assert f"{field}: {rule}" in str(refused.value)


def test_a_requester_has_one_binding_across_quotas() -> None:
    same = {"team-a": {"accounts": [ACCOUNT_A]}}
    other = {"team-a": {"accounts": [ACCOUNT_B]}}

    assert conflicts([quota("a1", ["team-a"], same), quota("a2", ["team-a"], same)]) == []
    assert conflicts([quota("a1", ["team-a"], same), quota("a2", ["team-a"])]) == []
    found = conflicts([quota("a1", ["team-a"], same), quota("a2", ["team-a"], other)])
    assert [str(e) for e in found] == [
        "CapacityQuota a2: spec.requesterOrigins[team-a]: differs from CapacityQuota a1's; "
        "a requester has one binding, the same in every quota that gives one"
    ]


def test_the_binding_round_trips_in_camel_case() -> None:
    bound = quota("team-a", ["team-a"], {"team-a": {"queueSenders": [ROLE_A]}})

    dumped = bound.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    assert dumped["spec"]["requesterOrigins"] == {"team-a": {"queueSenders": [ROLE_A]}}
    assert bound.spec.requester_origins["team-a"] == RequesterOrigins(queue_senders=[ROLE_A])
