"""The tests' cloud makes the template's resources once per process and restores a copy of what
moto then held for each later cloud (local_cloud/snapshot.py): what a restored cloud holds is
what a made one holds, and nothing one cloud leaves (items, messages, events, queues, tables,
instances, tags, security groups, the clock, injected faults, pools) reaches the next."""

from __future__ import annotations

from collections import Counter
from typing import Any

import botocore.client
import pytest
from moto.core.base_backend import BackendDict, BaseBackend

import moto_capacity
from capacity_launcher.adapters import aws
from local_cloud import snapshot
from moto_capacity.core.clock import CLOCK
from tests.support.cloud import Cloud, an_image, default_subnets, launch_request, local_cloud

# What differs between two makings of the same resources: when, and moto's random ids.
_MOMENTS = {
    "CreationDateTime",
    "CreatedTimestamp",
    "LastModifiedTimestamp",
    "EarliestRestorableDateTime",
    "LatestRestorableDateTime",
    "TableId",
    "KMSMasterKeyArn",  # the key DynamoDB's encryption made, its id drawn at random
    "CreationTime",
    "LastModifiedTime",
}


def _without_moments(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_moments(v) for k, v in value.items() if k not in _MOMENTS}
    if isinstance(value, list | tuple):
        return [_without_moments(v) for v in value]
    return value


def _inventory() -> dict[str, Any]:
    """What the cloud holds, as its APIs describe it (when things were made left out)."""
    dynamodb, sqs, events = aws.client("dynamodb"), aws.client("sqs"), aws.client("events")
    tables = sorted(dynamodb.list_tables()["TableNames"])
    urls = sorted(sqs.list_queues().get("QueueUrls", []))
    buses = sorted(b["Name"] for b in events.list_event_buses()["EventBuses"])
    rules = {bus: events.list_rules(EventBusName=bus)["Rules"] for bus in buses}
    state = moto_capacity.state()
    state.pop("clock")
    found = {
        "tables": {
            name: (
                dynamodb.describe_table(TableName=name)["Table"],
                dynamodb.describe_time_to_live(TableName=name)["TimeToLiveDescription"],
                dynamodb.describe_continuous_backups(TableName=name)[
                    "ContinuousBackupsDescription"
                ],
            )
            for name in tables
        },
        "queues": {
            url: sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
            for url in urls
        },
        "buses": buses,
        "rules": rules,
        "targets": {
            (bus, rule["Name"]): events.list_targets_by_rule(Rule=rule["Name"], EventBusName=bus)[
                "Targets"
            ]
            for bus in buses
            for rule in rules[bus]
        },
        "ec2": _ec2_inventory(aws.client("ec2")),
        "emulator": state,
    }
    return dict(_without_moments(found))


def _ec2_inventory(ec2: Any) -> dict[str, Any]:
    reservations = ec2.describe_instances()["Reservations"]
    return {
        "vpcs": ec2.describe_vpcs()["Vpcs"],
        "subnets": ec2.describe_subnets()["Subnets"],
        "security_groups": ec2.describe_security_groups()["SecurityGroups"],
        "route_tables": ec2.describe_route_tables()["RouteTables"],
        "internet_gateways": ec2.describe_internet_gateways()["InternetGateways"],
        "images": sorted(i["ImageId"] for i in ec2.describe_images(Owners=["amazon"])["Images"]),
        "instances": [i for r in reservations for i in r["Instances"]],
        "launch_templates": ec2.describe_launch_templates()["LaunchTemplates"],
    }


def _calls_counted(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    calls: Counter[str] = Counter()
    original = botocore.client.BaseClient._make_api_call

    def counted(client: Any, operation: str, params: Any) -> Any:
        calls[f"{client.meta.service_model.service_name}:{operation}"] += 1
        return original(client, operation, params)

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", counted)
    return calls


def test_a_cloud_after_the_first_makes_none_of_its_resources(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with local_cloud(None):  # made, or restored if an earlier test made them
        pass
    calls = _calls_counted(monkeypatch)
    with local_cloud(None) as cloud:
        assert cloud.events_queue_url
        made = +calls
    assert made == Counter()


def test_a_restored_cloud_holds_what_a_made_one_holds() -> None:
    snapshot.forget()
    with local_cloud(None):
        made = _inventory()
    with local_cloud(None):
        restored = _inventory()
    assert made["tables"] and made["queues"] and made["targets"]
    assert restored == made


def _leave_everything(cloud: Cloud) -> None:
    """Everything a test might leave behind, in each backend the resources are in and beyond."""
    cloud.send(launch_request("left-behind", nodePool="none"))  # a record, an event
    cloud.sqs.send_message(QueueUrl=cloud.names.launch_queue_url, MessageBody="{}")
    cloud.sqs.set_queue_attributes(
        QueueUrl=cloud.names.launch_queue_url, Attributes={"VisibilityTimeout": "7"}
    )
    aws.client("dynamodb").put_item(
        TableName=cloud.names.state_table, Item={"pk": {"S": "left"}, "sk": {"S": "behind"}}
    )
    cloud.sqs.create_queue(QueueName="left-behind")
    aws.client("events").put_rule(
        Name="left-behind", EventBusName=cloud.names.event_bus, EventPattern='{"source": ["x"]}'
    )
    zone, subnet = sorted(default_subnets(cloud.ec2).items())[0]
    cloud.ec2.run_instances(ImageId=an_image(cloud.ec2), MinCount=1, MaxCount=1, SubnetId=subnet)
    cloud.ec2.create_tags(Resources=[subnet], Tags=[{"Key": "left", "Value": "behind"}])
    cloud.ec2.create_security_group(GroupName="left-behind", Description="left behind")
    moto_capacity.advance_clock(3600)
    moto_capacity.inject_fault("ec2:CreateFleet", "InsufficientInstanceCapacity")
    moto_capacity.set_capacity("us-east-1", "m5.large", zone, "on-demand", 0)


def test_nothing_one_cloud_leaves_reaches_the_next() -> None:
    with local_cloud(None):  # the resources made (or restored): the next two restore them
        clean = _inventory()
    with local_cloud(None) as cloud:
        _leave_everything(cloud)
        assert cloud.queued() > 0
        assert _inventory() != clean
    with local_cloud(None) as cloud:
        assert _inventory() == clean  # first: the emulator's call counters as the first cloud's
        assert CLOCK.offset_seconds == 0
        assert cloud.queued() == 0
        assert cloud.events() == []
        assert aws.client("dynamodb").scan(TableName=cloud.names.state_table)["Items"] == []
        reservations = cloud.ec2.describe_instances()["Reservations"]
        assert [i for r in reservations for i in r["Instances"]] == []
        assert cloud.record("left-behind") is None


def test_a_cloud_stops_without_rebuilding_the_backends_it_drops(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """moto's reset rebuilds each backend before dropping it (the Region's EC2: its default VPC,
    subnets and images again); a reusing cloud's stop drops them as they are, and leaves moto
    holding nothing all the same."""
    rebuilt: list[str] = []
    reset = BaseBackend.reset

    def counted(backend: BaseBackend) -> None:
        rebuilt.append(type(backend).__name__)
        reset(backend)

    with local_cloud(None) as cloud:
        assert cloud.ec2.describe_vpcs()["Vpcs"]
        monkeypatch.setattr(BaseBackend, "reset", counted)
    assert rebuilt == []
    assert BackendDict._instances == []  # type: ignore[misc]
    with local_cloud(None) as cloud:  # and the next cloud holds what a made one holds
        assert cloud.ec2.describe_vpcs()["Vpcs"]
