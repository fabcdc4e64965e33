"""Fixtures for the moto_capacity tests: fake credentials, a clean extension, moto clients."""

import json
import urllib.request
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import boto3
import pytest
from botocore.config import Config
from moto import mock_aws
from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.ec2.models import ec2_backends
from moto.server import ThreadedMotoServer

import moto_capacity
from moto_capacity.core.clock import CLOCK
from moto_capacity.ec2.models.platforms import register_image

REGION = "us-east-1"
# No retries: a test must see the first error EC2 answers, not a retried success.
LINUX_AMI = "ami-760aaa0f"
WINDOWS_AMI = "ami-03cf127a"
NO_RETRIES = Config(retries={"total_max_attempts": 1, "mode": "standard"})


@pytest.fixture(autouse=True)
def fake_aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    # Loading moto's AMI catalogue costs half a second per test; only the Windows test needs it.
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")


@pytest.fixture(scope="session")
def boto_session() -> boto3.Session:
    """One session for every client: mock_aws gives each default session a cold model cache."""
    return boto3.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION
    )


@pytest.fixture(autouse=True)
def capacity_extension() -> Iterator[None]:
    moto_capacity.install()
    moto_capacity.reset()
    yield
    moto_capacity.reset()


@pytest.fixture
def aws() -> Iterator[None]:
    with mock_aws():
        yield


@pytest.fixture
def aws_client(aws: None, boto_session: boto3.Session) -> Callable[[str], Any]:
    """A client for any service, inside the mock, without retries."""

    def client(service: str) -> Any:
        return boto_session.client(service, config=NO_RETRIES)  # type: ignore[call-overload]

    return client


@pytest.fixture
def state_table(aws_client: Callable[[str], Any]) -> Callable[..., Any]:
    """Creates a table keyed as the service's state table (pk, sk); returns its client. Extra
    string attributes are defined for the indexes passed in `extra`."""

    def create(name: str, attributes: tuple[str, ...] = (), **extra: Any) -> Any:
        client = aws_client("dynamodb")
        client.create_table(
            TableName=name,
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": a, "AttributeType": "S"} for a in ("pk", "sk", *attributes)
            ],
            BillingMode="PAY_PER_REQUEST",
            **extra,
        )
        return client

    return create


@pytest.fixture
def ec2(aws: None, boto_session: boto3.Session) -> Any:
    return boto_session.client("ec2", config=NO_RETRIES)


@pytest.fixture
def resource_groups(aws: None, boto_session: boto3.Session) -> Any:
    return boto_session.client("resource-groups", config=NO_RETRIES)


@pytest.fixture
def linux_ami(ec2: Any) -> str:
    """A Linux/UNIX image in the mock's account and region (EC2 refuses an unknown image)."""
    backend = ec2_backends[DEFAULT_ACCOUNT_ID][REGION]
    register_image(backend, "Linux/UNIX", image_id=LINUX_AMI)
    return LINUX_AMI


@pytest.fixture
def arm64_ami(ec2: Any) -> str:
    """A Linux/UNIX image built for arm64 (Graviton types run it; x86_64 ones cannot)."""
    backend = ec2_backends[DEFAULT_ACCOUNT_ID][REGION]
    return str(register_image(backend, "Linux/UNIX", architecture="arm64").id)


@pytest.fixture
def windows_ami(monkeypatch: pytest.MonkeyPatch, aws: None) -> str:
    """Windows Server from moto's AMI catalogue (loaded for this test only), or an image of
    that id registered as Windows when the backend started without the catalogue."""
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "true")
    backend = ec2_backends[DEFAULT_ACCOUNT_ID][REGION]
    if WINDOWS_AMI not in backend.amis:
        register_image(backend, "Windows", image_id=WINDOWS_AMI)
    return WINDOWS_AMI


@pytest.fixture
def default_subnets(ec2: Any) -> dict[str, str]:
    """The default VPC's subnet in each zone, by zone name."""
    subnets = ec2.describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]}])
    return {s["AvailabilityZone"]: s["SubnetId"] for s in subnets["Subnets"]}


@pytest.fixture
def reservation(ec2: Any) -> Callable[..., dict[str, Any]]:
    """Create a Capacity Reservation: 2 x m5.large, Linux, us-east-1a, open, unless told."""

    def create(**overrides: Any) -> dict[str, Any]:
        request = {
            "InstanceType": "m5.large",
            "InstancePlatform": "Linux/UNIX",
            "AvailabilityZone": "us-east-1a",
            "InstanceCount": 2,
            **overrides,
        }
        return ec2.create_capacity_reservation(**request)["CapacityReservation"]  # type: ignore[no-any-return]

    return create


@pytest.fixture
def launch_template(ec2: Any, linux_ami: str) -> Callable[..., str]:
    """Create a launch template with a Linux image; returns its name."""
    counter = iter(range(1000))

    def create(**data: Any) -> str:
        name = f"capacity-test-{next(counter)}"
        ec2.create_launch_template(
            LaunchTemplateName=name, LaunchTemplateData={"ImageId": linux_ami, **data}
        )
        return name

    return create


@pytest.fixture
def capacity_group(resource_groups: Any) -> Callable[..., str]:
    """Create a Capacity Reservation group holding the given reservations; returns its ARN."""
    counter = iter(range(1000))

    def create(*reservation_arns: str) -> str:
        group = resource_groups.create_group(
            Name=f"capacity-pool-{next(counter)}",
            Configuration=[
                {"Type": "AWS::EC2::CapacityReservationPool"},
                {
                    "Type": "AWS::ResourceGroups::Generic",
                    "Parameters": [
                        {
                            "Name": "allowed-resource-types",
                            "Values": ["AWS::EC2::CapacityReservation"],
                        }
                    ],
                },
            ],
        )["Group"]
        if reservation_arns:
            resource_groups.group_resources(
                Group=group["GroupArn"], ResourceArns=list(reservation_arns)
            )
        return group["GroupArn"]  # type: ignore[no-any-return]

    return create


@pytest.fixture
def available_count(ec2: Any) -> Callable[[str], int]:
    """AvailableInstanceCount of a reservation, as DescribeCapacityReservations reports it."""

    def count(reservation_id: str) -> int:
        found = ec2.describe_capacity_reservations(CapacityReservationIds=[reservation_id])
        return int(found["CapacityReservations"][0]["AvailableInstanceCount"])

    return count


@pytest.fixture(scope="module")
def moto_server() -> Iterator[str]:
    """A threaded moto server with the extension, on a free port; yields its base URL."""
    moto_capacity.install()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def server_url(moto_server: str) -> str:
    """The server, reset: moto's state through /moto-api, the extension's through /moto-capacity."""
    for path in ("/moto-api/reset", "/moto-capacity/reset"):
        urllib.request.urlopen(urllib.request.Request(moto_server + path, method="POST"))
    return moto_server


@pytest.fixture
def server_client(server_url: str, boto_session: boto3.Session) -> Callable[[str], Any]:
    """A boto3 client for any service, talking to the server over HTTP, without retries."""

    def client(service: str) -> Any:
        return boto_session.client(  # type: ignore[call-overload]
            service, endpoint_url=server_url, config=NO_RETRIES
        )

    return client


@pytest.fixture
def ec2_events(aws_client: Callable[[str], Any]) -> Callable[[], list[dict[str, Any]]]:
    """Every `aws.ec2` event on the default bus, read through a rule with an SQS target."""
    sqs = aws_client("sqs")
    events = aws_client("events")
    queue_url = sqs.create_queue(QueueName="ec2-events")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    events.put_rule(Name="ec2-events", EventPattern=json.dumps({"source": ["aws.ec2"]}))
    events.put_targets(Rule="ec2-events", Targets=[{"Id": "queue", "Arn": queue_arn}])
    received: list[dict[str, Any]] = []

    def read() -> list[dict[str, Any]]:
        while True:
            batch = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get(
                "Messages", []
            )
            if not batch:
                return received
            for message in batch:
                received.append(json.loads(message["Body"]))
                sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])

    return read


@pytest.fixture
def advance_to() -> Callable[..., None]:
    """Move the emulator's clock to `moment` (+ `plus_seconds`, which may be negative)."""

    def advance(moment: datetime, plus_seconds: float = 0.0) -> None:
        seconds = (moment - CLOCK.now()).total_seconds() + plus_seconds
        if seconds > 0:
            moto_capacity.advance_clock(seconds)

    return advance


BLOCK_TYPE = "p5.48xlarge"


@pytest.fixture
def offerings(ec2: Any) -> Callable[..., list[dict[str, Any]]]:
    def find(**overrides: Any) -> list[dict[str, Any]]:
        request = {"InstanceType": BLOCK_TYPE, "InstanceCount": 2, "CapacityDurationHours": 48}
        answer = ec2.describe_capacity_block_offerings(**{**request, **overrides})
        return answer["CapacityBlockOfferings"]  # type: ignore[no-any-return]

    return find


@pytest.fixture
def block(
    ec2: Any, offerings: Callable[..., list[dict[str, Any]]]
) -> Callable[..., dict[str, Any]]:
    """Buy the first offering; returns the PurchaseCapacityBlock answer's reservation."""

    def buy(**overrides: Any) -> dict[str, Any]:
        offering = offerings(**overrides)[0]
        answer = ec2.purchase_capacity_block(
            CapacityBlockOfferingId=offering["CapacityBlockOfferingId"],
            InstancePlatform="Linux/UNIX",
        )
        return answer["CapacityReservation"]  # type: ignore[no-any-return]

    return buy


@pytest.fixture
def active_block(
    block: Callable[..., dict[str, Any]], advance_to: Callable[..., None]
) -> dict[str, Any]:
    bought = block()
    advance_to(bought["StartDate"], 1)
    return bought
