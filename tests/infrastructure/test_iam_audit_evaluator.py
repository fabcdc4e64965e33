"""The audit's evaluator follows IAM's rules where our policies depend on them, and the bus policy
lets the functions, and nobody else, publish status events."""

from typing import Any

import pytest

from local_cloud.lambda_runtime import RunningFunction
from tests.infrastructure.iam_audit import (
    Authorization,
    Call,
    Policies,
    Unmodelled,
    _applies,
    _condition_holds,
)
from tests.infrastructure.policy_checks import transform
from tests.support.template import load_template

ACCOUNT = "123456789012"
REGION = "us-east-1"
ENVIRONMENT = {"EVENT_BUS_NAME": "capacity-launcher-LaunchBus"}
BUS = f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/capacity-launcher-LaunchBus"


@pytest.mark.parametrize(
    ("operator", "context", "holds"),
    [
        ("StringEquals", {}, False),  # an absent key fails a positive operator
        ("StringNotEquals", {}, True),  # ... and passes a negated one
        ("ForAllValues:StringNotEquals", {}, True),  # ... and ForAllValues
        ("StringEqualsIfExists", {}, True),
        ("StringEquals", {"k": ("a",)}, True),
        ("StringNotEquals", {"k": ("a",)}, False),
        ("ForAllValues:StringNotEquals", {"k": ("b", "c")}, True),
        ("ForAllValues:StringNotEquals", {"k": ("b", "a")}, False),
        ("ForAnyValue:StringEquals", {"k": ("b", "a")}, True),
        ("StringLike", {"k": ("abc",)}, False),
        ("ArnNotEquals", {"k": ("arn:x",)}, True),
    ],
)
def test_conditions_evaluate_as_iam_does(
    operator: str, context: dict[str, tuple[str, ...]], holds: bool
) -> None:
    assert _condition_holds(operator, "K", ["a"], context) is holds  # keys are case-insensitive


def test_an_operator_it_does_not_model_is_never_taken_as_satisfied() -> None:
    with pytest.raises(Unmodelled):
        _condition_holds("NumericLessThan", "k", ["1"], {"k": ("0",)})


def _put_events(function: str, source: str, policies: Policies) -> list[Any]:
    running = RunningFunction(function, {"EVENT_BUS_NAME": "capacity-launcher-LaunchBus"}, ACCOUNT)
    context = {"events:source": (source,), "aws:RequestedRegion": ("us-east-1",)}
    call = Call(
        running,
        "events",
        "PutEvents",
        {},
        "us-east-1",
        "",
        (Authorization("events:PutEvents", BUS, context),),
    )
    return policies.denials(call)


@pytest.fixture(scope="module")
def policies() -> Policies:
    sam = load_template()
    return Policies(transform(sam), sam)


def test_the_functions_may_publish_status_events(policies: Policies) -> None:
    for function in ("LauncherFunction", "ReservationSyncFunction", "InstanceEventsFunction"):
        assert _put_events(function, "capacity-launcher", policies) == []


def test_a_function_may_not_publish_under_another_source(policies: Policies) -> None:
    assert _put_events("LauncherFunction", "someone-else", policies)


def test_anyone_else_claiming_the_services_source_is_denied_by_the_bus(policies: Policies) -> None:
    (statement,) = (s for s in policies._bus_policy if s.owner == "LaunchBusPolicy")
    stranger = Authorization(
        "events:PutEvents",
        BUS,
        {
            "events:source": ("capacity-launcher",),
            "aws:PrincipalArn": (f"arn:aws:iam::{ACCOUNT}:role/producer",),
        },
    )
    producer = Authorization(
        "events:PutEvents",
        BUS,
        {
            "events:source": ("team-a.scheduler",),
            "aws:PrincipalArn": (f"arn:aws:iam::{ACCOUNT}:role/producer",),
        },
    )
    resolve = policies._resolver(
        Call(
            RunningFunction("LauncherFunction", ENVIRONMENT, ACCOUNT), "events", "", {}, REGION, ""
        )
    )

    assert statement.effect == "Deny"
    assert _applies(statement, stranger, resolve)
    assert not _applies(statement, producer, resolve)


@pytest.mark.parametrize(
    ("wanted", "context", "holds"),
    [(["true"], {}, True), (["true"], {"k": ("v",)}, False), (["false"], {"k": ("v",)}, True)],
)
def test_null_says_whether_the_key_is_absent(
    wanted: list[str], context: dict[str, tuple[str, ...]], holds: bool
) -> None:
    assert _condition_holds("Null", "K", wanted, context) is holds


def _team_put(source: str, team: str | None) -> Authorization:
    context = {
        "events:source": (source,),
        "aws:PrincipalArn": (f"arn:aws:iam::{ACCOUNT}:role/producer",),
    }
    if team is not None:
        context["aws:PrincipalTag/capacity-launcher-team"] = (team,)
    return Authorization("events:PutEvents", BUS, context)


@pytest.mark.parametrize(
    ("source", "team", "denied"),
    [
        ("capacity-launcher.team.team-a", None, True),  # no team tag: no team source
        ("capacity-launcher.team.team-a", "team-b", True),  # another team's source
        ("capacity-launcher.team.team-a", "team-a", False),  # its own
        ("team-a.scheduler", None, False),  # outside the namespace: as before
        ("team-a.scheduler", "team-b", False),
    ],
)
def test_the_bus_gives_a_team_source_to_that_team_only(
    policies: Policies, source: str, team: str | None, denied: bool
) -> None:
    """Whatever a principal's own policies allow (ProducerPolicy puts any source), the bus policy
    refuses capacity-launcher.team.<t> unless its capacity-launcher-team tag is t."""
    resolve = policies._resolver(
        Call(
            RunningFunction("LauncherFunction", ENVIRONMENT, ACCOUNT), "events", "", {}, REGION, ""
        )
    )
    put = _team_put(source, team)
    denying = [
        s.owner for s in policies._bus_policy if s.effect == "Deny" and _applies(s, put, resolve)
    ]

    assert bool(denying) is denied, denying
