"""The extension in a moto server, over HTTP: boto3 with endpoint_url, and /moto-capacity/*."""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError


def _call(url: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url + path, data=data, method="GET" if body is None else "POST"
    )
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.fixture
def linux_image(server_url: str) -> str:
    """A Linux/UNIX image registered on the server (EC2 launches no unknown image)."""
    _, state = _call(
        server_url,
        "/moto-capacity/images",
        {"region": "us-east-1", "platformDetails": "Linux/UNIX"},
    )
    return str(state["images"][-1]["imageId"])


def _m5_large_pool(count: int) -> dict[str, Any]:
    """The /moto-capacity/capacity body (and state entry) for on-demand m5.large in us-east-1a."""
    return {
        "region": "us-east-1",
        "instanceType": "m5.large",
        "zone": "us-east-1a",
        "capacityType": "on-demand",
        "count": count,
    }


def _one_m5_large_fleet(ec2: Any, template: str, **extra: Any) -> Any:
    """CreateFleet instant for one on-demand m5.large in us-east-1a."""
    return ec2.create_fleet(
        Type="instant",
        TargetCapacitySpecification={
            "TotalTargetCapacity": 1,
            "DefaultTargetCapacityType": "on-demand",
        },
        LaunchTemplateConfigs=[
            {
                "LaunchTemplateSpecification": {
                    "LaunchTemplateName": template,
                    "Version": "$Latest",
                },
                "Overrides": [{"InstanceType": "m5.large", "AvailabilityZone": "us-east-1a"}],
            }
        ],
        **extra,
    )


def test_control_endpoints_set_a_dry_pool_that_create_fleet_reports_per_override(
    server_url: str, server_client: Any, linux_image: str
) -> None:
    # Given a dry m5.large pool, set over HTTP
    status, state = _call(
        server_url,
        "/moto-capacity/capacity",
        _m5_large_pool(0),
    )
    assert status == 200
    assert state["pools"] == [_m5_large_pool(0)]
    ec2 = server_client("ec2")
    ec2.create_launch_template(
        LaunchTemplateName="server-lt", LaunchTemplateData={"ImageId": linux_image}
    )

    # When
    answer = _one_m5_large_fleet(ec2, "server-lt")

    # Then
    assert answer["Instances"] == []
    assert [e["ErrorCode"] for e in answer["Errors"]] == ["InsufficientInstanceCapacity"]


def test_state_reports_reservations_created_through_the_server(
    server_url: str, server_client: Any
) -> None:
    # Given
    created = server_client("ec2").create_capacity_reservation(
        InstanceType="p5.48xlarge",
        InstancePlatform="Linux/UNIX",
        AvailabilityZone="us-east-1b",
        InstanceCount=4,
    )["CapacityReservation"]

    # When
    status, state = _call(server_url, "/moto-capacity/state")

    # Then
    assert status == 200
    assert [
        (r["capacityReservationId"], r["availableInstanceCount"]) for r in state["reservations"]
    ] == [(created["CapacityReservationId"], 4)]


def test_resource_group_arns_carry_the_request_region_over_http(
    server_url: str, boto_session: Any
) -> None:
    # Given a client for another region than the server's default
    client = boto_session.client(
        "resource-groups", region_name="eu-west-1", endpoint_url=server_url
    )

    # When
    group = client.create_group(
        Name="gpu", Configuration=[{"Type": "AWS::EC2::CapacityReservationPool"}]
    )

    # Then
    assert group["Group"]["GroupArn"].startswith("arn:aws:resource-groups:eu-west-1:")


def test_fault_and_latency_set_over_http_apply_to_the_next_calls(
    server_url: str, server_client: Any
) -> None:
    # Given
    _call(
        server_url,
        "/moto-capacity/faults",
        {
            "operation": "ec2:DescribeVpcs",
            "code": "RequestLimitExceeded",
            "times": 1,
        },
    )
    _call(server_url, "/moto-capacity/latency", {"operation": "ec2:DescribeVpcs", "seconds": 0.1})
    ec2 = server_client("ec2")

    # When
    with pytest.raises(ClientError) as error:
        ec2.describe_vpcs()
    started = time.monotonic()
    ec2.describe_vpcs()
    elapsed = time.monotonic() - started

    # Then
    assert error.value.response["Error"]["Code"] == "RequestLimitExceeded"
    assert elapsed >= 0.1
    _, state = _call(server_url, "/moto-capacity/state")
    assert state["operations"]["ec2:DescribeVpcs"] == {"calls": 2, "failures": 1}


def test_control_endpoint_refuses_bad_input_with_400_naming_the_problem(server_url: str) -> None:
    status, answer = _call(server_url, "/moto-capacity/capacity", {"region": "us-east-1"})
    assert status == 400
    assert "instanceType" in answer["error"]


def test_fifty_concurrent_targeted_launches_never_oversubscribe_a_reservation(
    server_url: str, server_client: Any, linux_image: str
) -> None:
    # Given a reservation of ten
    ec2 = server_client("ec2")
    rid = ec2.create_capacity_reservation(
        InstanceType="m5.large",
        InstancePlatform="Linux/UNIX",
        AvailabilityZone="us-east-1a",
        InstanceCount=10,
        InstanceMatchCriteria="targeted",
    )["CapacityReservation"]["CapacityReservationId"]
    target = {"CapacityReservationTarget": {"CapacityReservationId": rid}}

    def launch(_: int) -> str:
        try:
            ec2.run_instances(
                ImageId=linux_image,
                MinCount=1,
                MaxCount=1,
                InstanceType="m5.large",
                Placement={"AvailabilityZone": "us-east-1a"},
                CapacityReservationSpecification=target,
            )
        except ClientError as error:
            return str(error.response["Error"]["Code"])
        return "launched"

    # When fifty threads launch at once
    with ThreadPoolExecutor(max_workers=50) as pool:
        outcomes = list(pool.map(launch, range(50)))

    # Then exactly ten got in, the rest were told the reservation is full
    assert outcomes.count("launched") == 10
    assert outcomes.count("ReservationCapacityExceeded") == 40
    found = ec2.describe_capacity_reservations(CapacityReservationIds=[rid])["CapacityReservations"]
    assert found[0]["AvailableInstanceCount"] == 0


def test_fifty_concurrent_fleets_never_oversubscribe_a_finite_pool(
    server_url: str, server_client: Any, linux_image: str
) -> None:
    # Given a pool of ten m5.large
    _call(
        server_url,
        "/moto-capacity/capacity",
        _m5_large_pool(10),
    )
    ec2 = server_client("ec2")
    ec2.create_launch_template(
        LaunchTemplateName="pool-lt", LaunchTemplateData={"ImageId": linux_image}
    )

    def launch(_: int) -> int:
        answer = _one_m5_large_fleet(ec2, "pool-lt")
        return sum(len(group["InstanceIds"]) for group in answer["Instances"])

    # When
    with ThreadPoolExecutor(max_workers=50) as pool:
        launched = sum(pool.map(launch, range(50)))

    # Then
    assert launched == 10
    _, state = _call(server_url, "/moto-capacity/state")
    assert state["pools"][0]["count"] == 0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_python_m_moto_capacity_serves_aws_and_the_control_api() -> None:
    # Given
    port = _free_port()
    local = Path(__file__).resolve().parents[3] / "local"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(local), os.environ.get("PYTHONPATH", "")]),
    }
    server = subprocess.Popen(
        [sys.executable, "-m", "moto_capacity", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        # When
        deadline = time.monotonic() + 20
        status = 0
        while time.monotonic() < deadline:
            try:
                status, state = _call(url, "/moto-capacity/state")
                break
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.1)

        # Then
        assert status == 200
        assert state["pools"] == []
        assert _call(url, "/moto-capacity/reset", {})[0] == 200
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_concurrent_fleets_sharing_a_client_token_launch_once(
    server_url: str, server_client: Any, linux_image: str
) -> None:
    # Given
    ec2 = server_client("ec2")
    ec2.create_launch_template(
        LaunchTemplateName="token-lt", LaunchTemplateData={"ImageId": linux_image}
    )

    def launch(_: int) -> tuple[str, tuple[str, ...]]:
        answer = _one_m5_large_fleet(ec2, "token-lt", ClientToken="request-7")
        ids = tuple(i for group in answer["Instances"] for i in group["InstanceIds"])
        return answer["FleetId"], ids

    # When twenty callers retry the same request at once
    with ThreadPoolExecutor(max_workers=20) as pool:
        answers = set(pool.map(launch, range(20)))

    # Then they all got the one fleet and its one instance
    assert len(answers) == 1
    assert len(next(iter(answers))[1]) == 1
