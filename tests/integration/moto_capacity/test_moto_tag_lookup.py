"""A resource's tags looked up by its id (moto_capacity/ec2/models/tag_lookup.py): the tags moto's
`describe_tags` finds for it, without matching every tag of the Region."""

from typing import Any

import pytest
from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.ec2.models import ec2_backends
from moto.ec2.models.tags import TagBackend

REGION = "us-east-1"


def test_each_instance_has_the_tags_describe_tags_finds_for_it(
    ec2: Any, linux_ami: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given instances tagged alike and apart, and a VPC tagged too
    tagged = [{"ResourceType": "instance", "Tags": [{"Key": "team", "Value": "a"}]}]
    three = {"ImageId": linux_ami, "InstanceType": "m5.large", "MinCount": 3, "MaxCount": 3}
    launched = ec2.run_instances(**three, TagSpecifications=tagged)["Instances"]
    ids = [i["InstanceId"] for i in launched]
    ec2.create_tags(Resources=ids[:1], Tags=[{"Key": "z-first", "Value": "1"}])
    ec2.create_tags(Resources=ids[:1], Tags=[{"Key": "a-second", "Value": ""}])
    vpc = ec2.describe_vpcs()["Vpcs"][0]["VpcId"]
    ec2.create_tags(Resources=[vpc], Tags=[{"Key": "team", "Value": "b"}])
    backend = ec2_backends[DEFAULT_ACCOUNT_ID][REGION]
    matched: list[object] = []
    original = TagBackend.describe_tags

    def counted(self: Any, filters: Any = None) -> Any:
        matched.append(filters)
        return original(self, filters)

    monkeypatch.setattr(TagBackend, "describe_tags", counted)
    # When each instance's tags are read, as DescribeInstances reads them
    instances = {i.id: i for r in backend.reservations.values() for i in r.instances}
    found = {instance_id: instances[instance_id].get_tags() for instance_id in ids}
    # Then no tag of the Region was matched for them, and each has what describe_tags finds
    assert matched == []
    for instance_id in ids:
        assert found[instance_id] == original(backend, {"resource-id": [instance_id]})
    assert [t["key"] for t in found[ids[0]]] == ["team", "z-first", "a-second"]
    assert found[ids[1]] == [
        {"resource_id": ids[1], "key": "team", "value": "a", "resource_type": "instance"}
    ]
    # and DescribeInstances answers them
    described = ec2.describe_instances(InstanceIds=ids[:1])["Reservations"][0]["Instances"][0]
    assert {t["Key"]: t["Value"] for t in described["Tags"]} == {
        "team": "a",
        "z-first": "1",
        "a-second": "",
    }


def test_an_untagged_resource_has_no_tags(ec2: Any) -> None:
    backend = ec2_backends[DEFAULT_ACCOUNT_ID][REGION]
    vpc = next(iter(backend.vpcs.values()))
    before = dict(backend.tags)
    assert vpc.get_tags() == []
    assert dict(backend.tags) == before
