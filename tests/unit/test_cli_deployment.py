"""Where commands act: a stack's outputs, or the local cloud's file; AWS_ENDPOINT_URL wins."""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest
from botocore.exceptions import NoRegionError
from botocore.stub import Stubber

from capacity_launcher_cli.deployment import (
    STACK_OUTPUTS,
    Deployment,
    DeploymentNotFound,
    from_stack,
    resolve,
    write_local,
)

NAMES = {
    "LaunchBusName": "prod-launch",
    "LaunchQueueUrl": "https://sqs.eu-west-1.amazonaws.com/111122223333/prod-LaunchQueue",
    "LaunchDeadLetterQueueUrl": "https://sqs.eu-west-1.amazonaws.com/111122223333/prod-DLQ",
    "StateTableName": "prod-StateTable",
    "UnavailableOfferingsTableName": "prod-Unavailable",
    "IdempotencyTableName": "prod-Idempotency",
}


def _cloudformation(
    outputs: dict[str, str], region: str | None = "eu-west-1"
) -> tuple[object, Stubber]:
    client = boto3.client(
        "cloudformation", region_name=region, aws_access_key_id="x", aws_secret_access_key="x"
    )
    stubber = Stubber(client)
    stubber.add_response(
        "describe_stacks",
        {
            "Stacks": [
                {
                    "StackName": "prod",
                    "CreationTime": "2026-01-01T00:00:00Z",
                    "StackStatus": "UPDATE_COMPLETE",
                    "Outputs": [{"OutputKey": k, "OutputValue": v} for k, v in outputs.items()],
                    "Parameters": [{"ParameterKey": "IceTtlSeconds", "ParameterValue": "300"}],
                }
            ]
        },
        {"StackName": "prod"},
    )
    stubber.activate()
    return client, stubber


def test_names_come_from_the_stack_outputs() -> None:
    client, stubber = _cloudformation(NAMES)

    deployment = from_stack("prod", cloudformation=client)

    stubber.assert_no_pending_responses()
    assert deployment.region == "eu-west-1"
    assert deployment.event_bus == "prod-launch"
    assert deployment.state_table == "prod-StateTable"
    assert deployment.ice_ttl_seconds == 300
    assert deployment.endpoint_url is None
    assert set(STACK_OUTPUTS) == set(NAMES)


@pytest.mark.parametrize(("region", "expected"), [(None, "us-east-1"), ("eu-west-1", "eu-west-1")])
def test_without_a_region_anywhere_the_stack_is_looked_up_in_us_east_1(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, region: str | None, expected: str
) -> None:
    # Given no region in the environment or a profile (as --region's help says)
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    asked: list[str | None] = []
    stubbed = {r: _cloudformation(NAMES, r)[0] for r in ("us-east-1", "eu-west-1")}

    def client(self: boto3.Session, service: str, region_name: str | None = None) -> object:
        asked.append(region_name or self.region_name)
        if asked[-1] is None:
            raise NoRegionError()
        return stubbed[str(asked[-1])]

    monkeypatch.setattr(boto3.Session, "client", client)

    # When a stack is named, with or without --region
    deployment = from_stack("prod", region)

    # Then it is looked up in that region, else us-east-1
    assert asked == [expected]
    assert deployment.region == expected


def test_a_stack_without_the_outputs_is_named_in_the_error() -> None:
    client, _ = _cloudformation({"LaunchBusName": "x"})

    with pytest.raises(DeploymentNotFound, match="StateTableName"):
        from_stack("prod", cloudformation=client)


def test_locally_the_file_is_read_and_aws_endpoint_url_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = Deployment("us-east-1", "bus", "q", "dlq", "state", "ice", "idem",
                       endpoint_url="http://127.0.0.1:4566")  # fmt: skip
    path = write_local(local, tmp_path / "local.json")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)

    assert resolve(local_path=path) == local
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://elsewhere:9999")
    assert resolve(local_path=path).endpoint_url == "http://elsewhere:9999"


def test_without_a_local_cloud_or_a_stack_the_error_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(DeploymentNotFound, match="capacity-launcher local up"):
        resolve(local_path=tmp_path / "absent.json")
