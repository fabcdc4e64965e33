"""`submit` flags become the launch request's JSON; the service, not the CLI, judges it."""

import json
from pathlib import Path

import pytest

from capacity_launcher_cli.main import parser
from capacity_launcher_cli.request_commands import (
    UsageError,
    parse_requirement,
    parse_tag,
    request_from_args,
)


def test_a_requirement_flag_with_values() -> None:
    assert parse_requirement("topology.kubernetes.io/zone=In:us-east-1a,us-east-1b") == {
        "key": "topology.kubernetes.io/zone",
        "operator": "In",
        "values": ["us-east-1a", "us-east-1b"],
    }


def test_a_requirement_flag_without_values() -> None:
    assert parse_requirement("karpenter.k8s.aws/instance-gpu-count=Exists") == {
        "key": "karpenter.k8s.aws/instance-gpu-count",
        "operator": "Exists",
    }


@pytest.mark.parametrize("text", ["no-equals", "=In:a", "key="])
def test_a_malformed_requirement_flag_says_the_expected_form(text: str) -> None:
    with pytest.raises(UsageError, match="KEY=OPERATOR:V1,V2"):
        parse_requirement(text)


def test_a_tag_flag_keeps_equals_signs_in_the_value() -> None:
    assert parse_tag("note=a=b") == ("note", "a=b")
    with pytest.raises(UsageError):
        parse_tag("novalue")


def test_flags_override_the_file_and_unset_flags_are_left_out(tmp_path: Path) -> None:
    path = tmp_path / "request.json"
    path.write_text(json.dumps({"requestId": "from-file", "nodePool": "a", "count": 1}))
    args = parser().parse_args(
        ["submit", "-f", str(path), "--count", "3", "--single-zone", "--tag", "team=ml",
         "--requirement", "karpenter.sh/capacity-type=In:reserved"]
    )  # fmt: skip

    request = request_from_args(args)

    assert request == {
        "requestId": "from-file",
        "nodePool": "a",
        "count": 3,
        "singleZone": True,
        "tags": {"team": "ml"},
        "requirements": [
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved"]}
        ],
    }


def test_a_request_without_an_id_gets_one() -> None:
    args = parser().parse_args(["submit", "--node-pool", "general", "--count", "1"])

    assert request_from_args(args)["requestId"].startswith("cli-")


def test_get_requests_shows_what_a_waiting_request_waits_for_and_instances_their_reservation():
    from datetime import UTC, datetime

    from rich.console import Console

    from capacity_launcher.domain.records.status import (
        AwaitedReservation,
        LaunchedInstance,
        RequestRecord,
        RequestStatus,
    )
    from capacity_launcher_cli import views

    start = datetime(2026, 11, 24, 11, 30, tzinfo=UTC)
    waiting = RequestRecord(
        request_id="r-wait",
        status=RequestStatus.WAITING,
        requested=2,
        launched=0,
        received_at=start,
        finished_at=start,
        wait_for_capacity_until=datetime(2026, 11, 24, 13, 30, tzinfo=UTC),
        waiting_for=[
            AwaitedReservation(
                capacity_reservation_id="cr-block",
                state="scheduled",
                capacity_reservation_type="capacity-block",
                start_date=start,
            )
        ],
    )
    in_block = LaunchedInstance(
        instance_id="i-0123456789abcdef0",
        instance_type="p5.48xlarge",
        zone="us-east-1a",
        capacity_type="reserved",
        capacity_reservation_id="cr-block",
        capacity_reservation_type="capacity-block",
        capacity_reservation_start_date=start,
        capacity_reservation_end_date=datetime(2026, 11, 25, 11, 30, tzinfo=UTC),
    )
    done = waiting.model_copy(
        update={"status": RequestStatus.FULFILLED, "launched": 1, "instances": [in_block]}
    )
    console = Console(width=250, record=True)
    console.print(views.requests([waiting]))
    console.print(views.instances([done], {"i-0123456789abcdef0": "stopped"}))
    text = console.export_text()
    assert "Waiting" in text
    assert (
        "waiting for cr-block (scheduled, starts 2026-11-24 11:30) until 2026-11-24 13:30" in text
    )
    assert "capacity-block" in text and "2026-11-25 11:30" in text
    assert "stopped" in text
    (detail,) = views.instance_details([done], {})
    assert (detail["instanceId"], detail["requestId"], detail["state"]) == (
        "i-0123456789abcdef0",
        done.request_id,
        None,
    )


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("nodePool: general\n", "not valid JSON (a launch request is a JSON object): "),
        ("", "not valid JSON (a launch request is a JSON object): Expecting value at line 1"),
        ("[1, 2]", "a launch request is a JSON object"),
    ],
)
def test_a_request_file_that_is_not_a_json_object_is_named_with_the_rule(
    tmp_path: Path, text: str, rule: str
) -> None:
    path = tmp_path / "request.yaml"
    path.write_text(text)
    args = parser().parse_args(["submit", "-f", str(path)])

    with pytest.raises(UsageError) as refused:
        request_from_args(args)

    assert str(refused.value).startswith(f"{path}: {rule}")


def test_a_request_file_that_cannot_be_read_is_named(tmp_path: Path) -> None:
    args = parser().parse_args(["submit", "-f", str(tmp_path / "missing.json")])

    with pytest.raises(UsageError, match=r"missing\.json: cannot read: No such file"):
        request_from_args(args)


def test_a_request_may_wait_until_a_time_or_for_a_duration_on_the_services_clock() -> None:
    from datetime import UTC, datetime

    service_now = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)  # the emulator's, ahead of the wall
    args = parser().parse_args(
        ["submit", "--node-pool", "gpu", "--count", "2", "--wait-for-capacity-until", "30m",
         "--priority-class-name", "urgent"]
    )  # fmt: skip

    request = request_from_args(args, now=lambda: service_now)

    assert request["waitForCapacityUntil"] == "2026-11-24T12:30:00Z"
    assert request["priorityClassName"] == "urgent"
    at = parser().parse_args(["submit", "--wait-for-capacity-until", "2026-11-25T08:00:00+01:00"])
    assert request_from_args(at)["waitForCapacityUntil"] == "2026-11-25T07:00:00Z"


@pytest.mark.parametrize("when", ["tomorrow", "2026-11-25T08:00:00", "30 minutes", "5 m"])
def test_a_wait_without_a_zone_or_unit_is_a_usage_error_naming_the_flag(when: str) -> None:
    args = parser().parse_args(["submit", "--wait-for-capacity-until", when])

    with pytest.raises(UsageError, match=r"--wait-for-capacity-until .*time zone.*duration"):
        request_from_args(args)
