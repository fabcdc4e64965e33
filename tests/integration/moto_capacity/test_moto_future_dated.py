"""Future-dated Capacity Reservations through EC2's own API: what CreateCapacityReservation
accepts with a StartDate, assessing -> scheduled -> active on the emulator's clock, delayed and
unsupported outcomes, and the commitment."""

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

import moto_capacity
from moto_capacity.core.clock import CLOCK

DAY = 24 * 3600
COMMITMENT = 14 * DAY


@pytest.fixture
def future_reservation(ec2: Any) -> Callable[..., dict[str, Any]]:
    """8 x m5.xlarge (32 vCPUs), targeted, starting in 10 days, committed for 14 days."""

    def create(**overrides: Any) -> dict[str, Any]:
        request = {
            "InstanceType": "m5.xlarge",
            "InstancePlatform": "Linux/UNIX",
            "AvailabilityZone": "us-east-1a",
            "InstanceCount": 8,
            "InstanceMatchCriteria": "targeted",
            "StartDate": CLOCK.now() + timedelta(days=10),
            "CommitmentDuration": COMMITMENT,
            "DeliveryPreference": "incremental",
            **overrides,
        }
        request = {key: value for key, value in request.items() if value is not None}
        return ec2.create_capacity_reservation(**request)["CapacityReservation"]  # type: ignore[no-any-return]

    return create


def _state(ec2: Any, reservation_id: str) -> str:
    found = ec2.describe_capacity_reservations(CapacityReservationIds=[reservation_id])
    return str(found["CapacityReservations"][0]["State"])


def _launch(ec2: Any, linux_ami: str, reservation_id: str) -> Any:
    return ec2.run_instances(
        ImageId=linux_ami,
        InstanceType="m5.xlarge",
        MinCount=1,
        MaxCount=1,
        Placement={"AvailabilityZone": "us-east-1a"},
        CapacityReservationSpecification={
            "CapacityReservationTarget": {"CapacityReservationId": reservation_id}
        },
    )


def test_a_future_dated_request_is_assessing_then_scheduled_then_active_at_its_start(
    ec2: Any,
    future_reservation: Callable[..., dict[str, Any]],
    linux_ami: str,
    advance_to: Callable[..., None],
) -> None:
    """https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/cr-concepts.html (start date and
    commitment) and https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CapacityReservation.html
    (assessing, scheduled, active); launching needs the active state."""
    created = future_reservation()
    reservation_id = created["CapacityReservationId"]

    assert created["State"] == "assessing"
    assert created["DeliveryPreference"] == "incremental"
    assert created["CommitmentInfo"]["CommittedInstanceCount"] == 8
    assert created["CommitmentInfo"]["CommitmentDuration"] == COMMITMENT

    moto_capacity.advance_clock(3601)
    assert _state(ec2, reservation_id) == "scheduled"
    with pytest.raises(ClientError) as error:
        _launch(ec2, linux_ami, reservation_id)
    assert error.value.response["Error"]["Code"] == "InvalidParameterValue"

    advance_to(created["StartDate"], 1)
    assert _state(ec2, reservation_id) == "active"
    assert _launch(ec2, linux_ami, reservation_id)["Instances"][0]["CapacityReservationId"] == (
        reservation_id
    )


def test_assessment_time_is_a_control(
    ec2: Any, future_reservation: Callable[..., dict[str, Any]]
) -> None:
    """https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CapacityReservation.html:
    assessing lasts as long as EC2 takes; the emulator's figure is set by a control."""
    moto_capacity.set_lifecycle(assessment_seconds=10)
    created = future_reservation()

    moto_capacity.advance_clock(5)
    assert _state(ec2, created["CapacityReservationId"]) == "assessing"
    moto_capacity.advance_clock(6)
    assert _state(ec2, created["CapacityReservationId"]) == "scheduled"


@pytest.mark.parametrize(
    ("overrides", "code"),
    [
        ({"StartDate": "in 4 days"}, "InvalidParameterValue"),
        ({"StartDate": "in 121 days"}, "InvalidParameterValue"),
        ({"CommitmentDuration": COMMITMENT - 1}, "InvalidParameterValue"),
        ({"DeliveryPreference": "fixed"}, "InvalidParameterValue"),
        ({"InstanceMatchCriteria": None}, "InvalidParameterValue"),
        ({"InstanceMatchCriteria": "open"}, "InvalidParameterValue"),
        ({"InstanceType": "p5.48xlarge", "InstanceCount": 1}, "InvalidParameterValue"),
        ({"InstanceType": "inf2.xlarge", "InstanceCount": 8}, "InvalidParameterValue"),
        ({"InstanceCount": 7}, "InvalidParameterValue"),
        ({"EndDateType": "limited", "EndDate": "in 20 days"}, "InvalidParameterValue"),
        ({"CommitmentDuration": None}, "MissingParameter"),
        ({"DeliveryPreference": None}, "MissingParameter"),
        ({"StartDate": None}, "InvalidParameterCombination"),
    ],
)
def test_future_dated_requests_are_refused_outside_the_documented_rules(
    future_reservation: Callable[..., dict[str, Any]], overrides: dict[str, Any], code: str
) -> None:
    """https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreateCapacityReservation.html:
    5 to 120 days ahead, commitment of at least 14 days (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/cr-concepts.html),
    incremental delivery only, targeted, C/M/R/I/T/G families, at least 32 vCPUs, no end date
    inside the commitment; the three parameters come together."""
    resolved = {
        key: CLOCK.now() + timedelta(days=int(value.split()[1]))
        if isinstance(value, str) and value.startswith("in ")
        else value
        for key, value in overrides.items()
    }
    with pytest.raises(ClientError) as error:
        future_reservation(**resolved)
    assert error.value.response["Error"]["Code"] == code


def test_a_delayed_request_stays_unusable_past_its_start_until_delivered(
    ec2: Any,
    future_reservation: Callable[..., dict[str, Any]],
    linux_ami: str,
    advance_to: Callable[..., None],
) -> None:
    """https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CapacityReservation.html
    (delayed: EC2 cannot deliver by the start date) and
    https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-reservations-release.html
    (a delayed reservation's commitment is waived: it can be cancelled once active)."""
    created = future_reservation()
    reservation_id = created["CapacityReservationId"]
    moto_capacity.advance_clock(3601)
    moto_capacity.set_reservation_state(reservation_id, "delayed")

    advance_to(created["StartDate"], DAY)
    assert _state(ec2, reservation_id) == "delayed"
    with pytest.raises(ClientError) as error:
        _launch(ec2, linux_ami, reservation_id)
    assert error.value.response["Error"]["Code"] == "InvalidParameterValue"

    moto_capacity.set_reservation_state(reservation_id, "active")
    assert _state(ec2, reservation_id) == "active"
    _launch(ec2, linux_ami, reservation_id)
    ec2.cancel_capacity_reservation(CapacityReservationId=reservation_id)
    assert _state(ec2, reservation_id) == "cancelled"


def test_an_unsupported_request_never_becomes_active(
    ec2: Any, future_reservation: Callable[..., dict[str, Any]], advance_to: Callable[..., None]
) -> None:
    """https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CapacityReservation.html
    (unsupported: EC2 can't support the request; it will not be delivered)."""
    created = future_reservation()
    moto_capacity.set_reservation_state(created["CapacityReservationId"], "unsupported")

    advance_to(created["StartDate"], DAY)

    assert _state(ec2, created["CapacityReservationId"]) == "unsupported"


def test_cancel_while_assessing_but_not_when_scheduled_nor_during_the_commitment(
    ec2: Any, future_reservation: Callable[..., dict[str, Any]], advance_to: Callable[..., None]
) -> None:
    """https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-reservations-release.html:
    a future-dated reservation can be cancelled while assessing, or when active after its
    commitment; https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/cr-concepts.html: no
    decrease below the committed count during the commitment."""
    assessing = future_reservation()
    ec2.cancel_capacity_reservation(CapacityReservationId=assessing["CapacityReservationId"])
    assert _state(ec2, assessing["CapacityReservationId"]) == "cancelled"

    committed = future_reservation()
    reservation_id = committed["CapacityReservationId"]
    moto_capacity.advance_clock(3601)
    with pytest.raises(ClientError) as error:
        ec2.cancel_capacity_reservation(CapacityReservationId=reservation_id)
    assert error.value.response["Error"]["Code"] == "IncorrectState"

    advance_to(committed["StartDate"], 1)
    with pytest.raises(ClientError) as error:
        ec2.cancel_capacity_reservation(CapacityReservationId=reservation_id)
    assert error.value.response["Error"]["Code"] == "IncorrectState"
    with pytest.raises(ClientError) as error:
        ec2.modify_capacity_reservation(CapacityReservationId=reservation_id, InstanceCount=7)
    assert error.value.response["Error"]["Code"] == "InvalidParameterValue"
    ec2.modify_capacity_reservation(CapacityReservationId=reservation_id, InstanceCount=9)

    advance_to(committed["StartDate"], COMMITMENT + 1)
    ec2.cancel_capacity_reservation(CapacityReservationId=reservation_id)
    assert _state(ec2, reservation_id) == "cancelled"


def test_reservation_state_control_refuses_transitions_ec2_does_not_make(
    server_client: Callable[[str], Any], server_url: str
) -> None:
    """The control names the rule: `unsupported` follows only `assessing`."""
    ec2 = server_client("ec2")
    created = ec2.create_capacity_reservation(
        InstanceType="m5.xlarge",
        InstancePlatform="Linux/UNIX",
        AvailabilityZone="us-east-1a",
        InstanceCount=8,
        InstanceMatchCriteria="targeted",
        StartDate=CLOCK.now() + timedelta(days=10),
        CommitmentDuration=COMMITMENT,
        DeliveryPreference="incremental",
    )["CapacityReservation"]
    _post(server_url, "/moto-capacity/clock", {"advanceSeconds": 3601})

    with pytest.raises(urllib.error.HTTPError) as error:
        _post(
            server_url,
            "/moto-capacity/reservation-state",
            {"capacityReservationId": created["CapacityReservationId"], "state": "unsupported"},
        )
    assert error.value.code == 400
    assert "unsupported can follow only assessing" in json.loads(error.value.read())["error"]

    state = _post(
        server_url,
        "/moto-capacity/reservation-state",
        {"capacityReservationId": created["CapacityReservationId"], "state": "delayed"},
    )
    assert [r["state"] for r in state["reservations"]] == ["delayed"]


def _post(base: str, path: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(
        base + path,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request) as answer:
        return json.loads(answer.read())


def test_each_state_a_future_dated_request_enters_is_put_on_the_default_bus(
    ec2: Any,
    aws_client: Callable[[str], Any],
    future_reservation: Callable[..., dict[str, Any]],
    advance_to: Callable[..., None],
) -> None:
    """EC2 User Guide, "Monitor state changes for future-dated Capacity Reservations"
    (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/monitor-fcr-state.html): EC2 sends
    `EC2 Capacity Reservation <State>` to EventBridge when the state changes, with the
    reservation's id and new state; a rule with the prefix pattern receives them."""
    # Given a rule on the default bus sending every state event to a queue
    sqs, events = aws_client("sqs"), aws_client("events")
    # (14 days' retention: the emulator's SQS reads its clock, which moves 10 days here)
    queue = sqs.create_queue(
        QueueName="fcr-states", Attributes={"MessageRetentionPeriod": "1209600"}
    )["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    events.put_rule(
        Name="fcr-states",
        EventPattern=json.dumps(
            {"source": ["aws.ec2"], "detail-type": [{"prefix": "EC2 Capacity Reservation"}]}
        ),
    )
    events.put_targets(Rule="fcr-states", Targets=[{"Id": "q", "Arn": arn}])
    # and a request delayed, then delivered, and a second one scheduled then active
    delayed = future_reservation()["CapacityReservationId"]
    moto_capacity.set_reservation_state(delayed, "delayed")
    moto_capacity.set_reservation_state(delayed, "active")
    on_time = future_reservation()
    moto_capacity.advance_clock(3601)
    advance_to(on_time["StartDate"], 1)
    _state(ec2, on_time["CapacityReservationId"])

    # Then each state entered is one event, on the bus and in the state's log
    received = []
    while answer := sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10).get("Messages"):
        received += [json.loads(m["Body"]) for m in answer]
        sqs.delete_message_batch(
            QueueUrl=queue,
            Entries=[
                {"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]} for n, m in enumerate(answer)
            ],
        )
    seen = [
        (e["detail"]["capacity-reservation-id"], e["detail-type"], e["detail"]["state"])
        for e in received
    ]
    on_time_id = on_time["CapacityReservationId"]
    assert sorted(seen) == sorted(
        [
            (delayed, "EC2 Capacity Reservation Delayed", "delayed"),
            (delayed, "EC2 Capacity Reservation Active", "active"),
            (on_time_id, "EC2 Capacity Reservation Scheduled", "scheduled"),
            (on_time_id, "EC2 Capacity Reservation Active", "active"),
        ]
    )
    assert all(e["source"] == "aws.ec2" and len(e["resources"]) == 1 for e in received)
    logged = [e["detail-type"] for e in moto_capacity.state()["ec2Events"]]
    assert sorted(logged) == sorted(t for _, t, _ in seen)
