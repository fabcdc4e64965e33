"""`capacity-launcher invoke`: each launcher sample event, run once against the local cloud."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.conftest import REPO, E2eCloud, run_cli


def _request_ids(event: dict) -> list[str]:
    if "Records" not in event:
        return [event["detail"]["requestId"]]
    ids = []
    for record in event["Records"]:
        body = json.loads(record["body"])
        ids.append(body.get("detail", body)["requestId"])
    return ids


@pytest.mark.parametrize("sample", ["launch_requested.json", "sqs_launch_batch.json"])
def test_invoke_runs_the_launcher_with_a_sample_event(e2e_cloud: E2eCloud, sample: str) -> None:
    event_file = REPO / "events" / sample
    event = json.loads(event_file.read_text())

    result = run_cli("invoke", "LauncherFunction", "-e", str(event_file),
                     "--env-vars", str(REPO / "env.json"))  # fmt: skip

    assert result.code == 0, result.err
    assert result.json() == {"batchItemFailures": []}
    assert "REPORT RequestId:" in result.err
    for rid in _request_ids(event):
        record = run_cli("status", rid).json()
        assert record["status"] in ("Fulfilled", "Rejected")
    if sample == "sqs_launch_batch.json":
        assert run_cli("status", "sample-sqs-invalid").json()["status"] == "Rejected"
        assert run_cli("status", "sample-sqs-from-bus").json()["status"] == "Fulfilled"


def test_invoke_by_folder_name_reports_a_handler_error_as_lambda_does(
    e2e_cloud: E2eCloud, tmp_path: Path
) -> None:
    # Given an event the handler cannot read (a JSON list, not an object)
    event_file = tmp_path / "not-an-object.json"
    event_file.write_text("[1, 2]")

    # When the function is named by its folder, as sam accepts
    result = run_cli("invoke", "launcher", "-e", str(event_file))

    # Then the error comes back in Lambda's shape and the exit code says it failed
    assert result.code == 1
    error = result.json()
    assert error["errorType"] == "AttributeError"
    assert error["stackTrace"]
    assert "REPORT RequestId:" in result.err


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["NoSuchFunction"], "no function 'NoSuchFunction' in the template; known: "),
        (["LauncherFunction", "-e", "no/such/event.json"], "-e/--event: No such file"),
        (["LauncherFunction", "--env-vars", "no/such/env.json"], "--env-vars: No such file"),
        (["LauncherFunction", "--template", "no/such/template.yaml"], "--template: No such file"),
    ],
)
def test_invoke_says_what_it_cannot_use_and_exits_2(
    e2e_cloud: E2eCloud, argv: list[str], named: str
) -> None:
    result = run_cli("invoke", *argv)

    assert result.code == 2
    assert result.err.startswith(f"error: {named}"), result.err
    assert "Traceback" not in result.err
    assert result.out == ""


def test_invoke_with_an_event_that_is_not_json_says_so(e2e_cloud: E2eCloud, tmp_path: Path) -> None:
    event_file = tmp_path / "broken.json"
    event_file.write_text("{not json")

    result = run_cli("invoke", "LauncherFunction", "-e", str(event_file))

    assert result.code == 2
    assert result.err.startswith(f"error: -e/--event {event_file}: not JSON: "), result.err
