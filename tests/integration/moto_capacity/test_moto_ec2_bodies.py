"""EC2's answers as the extension serializes them (moto_capacity/core/xml_bodies.py and the
picker's direct reads, core/picking.py): byte for byte the bodies moto's own serializer makes of
the same results, over a corpus of the answers the service reads."""

import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from botocore.exceptions import ClientError
from moto.core import responses, serialize
from moto.core.utils import get_service_model
from moto.ec2.models import EC2Backend
from moto.ec2.responses import EC2Response

import moto_capacity
from moto_capacity.core import xml_bodies

# moto's functions the extension hooks, each replacement holding moto's own as `original`.
_HOOKED = (
    (serialize.ResponseSerializer, "get_value"),
    (serialize.ResponseSerializer, "_serialize_type_structure"),
    (serialize.EC2Serializer, "_serialize_body"),
)


def _moto_s_own(owner: type, name: str) -> Any:
    return inspect.getclosurevars(vars(owner)[name]).nonlocals["original"]


@contextmanager
def _as_moto_ships_it() -> Iterator[None]:
    """moto's serializer without the extension's hooks, for the time of the block."""
    ours = [(owner, name, vars(owner)[name]) for owner, name in _HOOKED]
    try:
        for owner, name, _ in ours:
            setattr(owner, name, _moto_s_own(owner, name))
        yield
    finally:
        for owner, name, replacement in ours:
            setattr(owner, name, replacement)


def _both_ways(serializer: Any, result: Any) -> tuple[Any, Any, Any]:
    """`serializer`'s answer to `result`, then (status, headers, body) of it and of moto's own
    serializer's answer (moto's picker too), before moto adds its headers to the answer."""
    ours = serializer.serialize(result)
    as_served = (ours["status_code"], dict(ours["headers"]), ours["body"])
    with _as_moto_ships_it():
        picker = serialize.XFormedAttributePicker(
            response_transformers=serializer._value_picker.response_transformers
        )
        moto_s = type(serializer)(
            serializer.operation_model,
            context=serializer.context,
            pretty_print=serializer.pretty_print,
            value_picker=picker,
        )
        theirs = moto_s.serialize(result)
    return ours, as_served, (theirs["status_code"], dict(theirs["headers"]), theirs["body"])


@pytest.fixture
def answered_both_ways(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any, Any]]:
    """Every EC2 answer served from now on, as (operation, the extension's, moto's own)."""
    pairs: list[tuple[str, Any, Any]] = []
    serialize_once = serialize.ResponseSerializer.serialize

    def serialize_twice(self: Any, result: Any) -> Any:
        if not isinstance(self, serialize.EC2Serializer):
            return serialize_once(self, result)
        monkeypatch.setattr(serialize.ResponseSerializer, "serialize", serialize_once)
        try:
            answer, ours, theirs = _both_ways(self, result)
        finally:
            monkeypatch.setattr(serialize.ResponseSerializer, "serialize", serialize_twice)
        pairs.append((self.operation_name, ours, theirs))
        return answer

    monkeypatch.setattr(serialize.ResponseSerializer, "serialize", serialize_twice)
    return pairs


def _catalogue_page(names: list[str] | None) -> Any:
    """DescribeInstanceTypes' answer for `names` (every type when None)."""
    service_model = get_service_model("ec2")
    operation_model = service_model.operation_model("DescribeInstanceTypes")
    catalogue = EC2Backend.instance_types
    listed = [t for t in catalogue if names is None or t["InstanceType"] in names]
    # The picker moto's ActionResult gives an EC2 answer's serializer (the extension's).
    picker = responses.XFormedAttributePicker(
        response_transformers=getattr(EC2Response, "RESPONSE_KEY_PATH_TO_TRANSFORMER", None)
    )
    serializer = serialize.EC2Serializer(operation_model, value_picker=picker)
    return serializer.serialize({"InstanceTypes": listed})


def test_the_extension_writes_every_ec2_answer_with_moto_s_bytes(
    ec2: Any,
    linux_ami: str,
    default_subnets: dict[str, str],
    launch_template: Callable[..., str],
    answered_both_ways: list[tuple[str, Any, Any]],
) -> None:
    # Given instances with tags, network interfaces and block devices, stopped and terminated
    # ones, a reservation, and fleets that launch and fail
    ec2.create_capacity_reservation(
        InstanceType="m5.large",
        InstancePlatform="Linux/UNIX",
        AvailabilityZone="us-east-1a",
        InstanceCount=3,
        TagSpecifications=[
            {"ResourceType": "capacity-reservation", "Tags": [{"Key": "pool", "Value": "a&b"}]}
        ],
    )
    launched = ec2.run_instances(
        ImageId=linux_ami,
        InstanceType="m5.large",
        MinCount=12,
        MaxCount=12,
        BlockDeviceMappings=[{"DeviceName": "/dev/sda1", "Ebs": {"VolumeSize": 50}}],
        TagSpecifications=[
            {
                "ResourceType": "instance",
                "Tags": [
                    {"Key": "Name", "Value": "<launcher> \"quoted\" 'x' & more"},
                    {"Key": "empty", "Value": ""},
                    {"Key": "unicode", "Value": "é ✓ \t tab"},
                ],
            }
        ],
    )["Instances"]
    ids = [i["InstanceId"] for i in launched]
    ec2.run_instances(
        ImageId=linux_ami,
        InstanceType="t3.micro",
        MinCount=1,
        MaxCount=1,
        SubnetId=default_subnets["us-east-1b"],
    )
    ec2.stop_instances(InstanceIds=ids[:2])
    ec2.terminate_instances(InstanceIds=ids[2:4])
    template = launch_template()
    moto_capacity.set_capacity("us-east-1", "c5.xlarge", "us-east-1a", "on-demand", 0)
    fleets = [
        ec2.create_fleet(
            Type="instant",
            LaunchTemplateConfigs=[
                {
                    "LaunchTemplateSpecification": {
                        "LaunchTemplateName": template,
                        "Version": "$Latest",
                    },
                    "Overrides": [{"InstanceType": kind, "AvailabilityZone": "us-east-1a"}],
                }
            ],
            TargetCapacitySpecification={
                "TotalTargetCapacity": 2,
                "DefaultTargetCapacityType": "on-demand",
            },
        )
        for kind in ("m5.large", "c5.xlarge")
    ]
    # When EC2's reads are answered, some refused (and the catalogue's pages serialized)
    ec2.describe_instances()
    ec2.describe_instances(Filters=[{"Name": "tag:Name", "Values": ["nothing-has-this"]}])
    ec2.describe_instance_status(IncludeAllInstances=True)
    ec2.describe_capacity_reservations()
    ec2.describe_subnets()
    ec2.describe_images(ImageIds=[linux_ami])
    ec2.describe_tags()
    ec2.describe_fleets(FleetIds=[f["FleetId"] for f in fleets])
    refused: list[Callable[[], Any]] = [
        lambda: ec2.describe_instances(InstanceIds=["i-0123456789abcdef0"]),
        lambda: ec2.describe_images(ImageIds=["not-an-image"]),
        lambda: ec2.describe_subnets(SubnetIds=["subnet-12345678"]),
        lambda: ec2.describe_capacity_reservations(CapacityReservationIds=["cr-0123456789abcdef0"]),
    ]
    for refusal in refused:
        with pytest.raises(ClientError):
            refusal()
    pages = [
        _catalogue_page(None),
        _catalogue_page(sorted(t["InstanceType"] for t in EC2Backend.instance_types)[:100]),
        _catalogue_page(["p5.48xlarge", "m5.large", "t3.micro"]),
    ]
    # Then each body the extension wrote (refusals too) is the one moto writes, byte for byte
    answered = [operation for operation, _, _ in answered_both_ways]
    assert {"RunInstances", "CreateFleet", "DescribeInstances", "DescribeSubnets"} <= set(answered)
    assert {"DescribeCapacityReservations", "DescribeImages"} <= set(answered)
    assert answered.count("DescribeInstanceTypes") == len(pages) == 3
    assert sum(ours[0] == 400 for _, ours, _ in answered_both_ways) == len(refused)
    assert len(pages[0]["body"]) > 1_000_000
    for operation, ours, theirs in answered_both_ways:
        assert ours == theirs, operation


@pytest.mark.parametrize(
    "tree",
    [
        {"R": {"a": None, "b": "", "c": [], "d": {}, "e": [None, "", {}], "f": ("x", 1)}},
        {"R": {"@xmlns": "http://ec2/", "#text": "tail", "k": [{"m": True}, {"m": False}]}},
        {"R": {"@a": "say \"hi\" & 'bye'\n", "@b": None, "@c": 3, "x": 1.5, "y": b"by\xfftes"}},
        {"R": {"t": "<&>\r\n", "#text": None, "n": [[1, 2], {"#text": ""}], "z": {"@q": "1"}}},
    ],
)
def test_a_tree_is_written_as_xmltodict_writes_it(tree: dict[str, Any]) -> None:
    # Given a tree with each kind of value moto's serializer may hold
    # When it is written directly, then by moto's own writer (xmltodict)
    operation = get_service_model("ec2").operation_model("DescribeInstances")
    serializer = serialize.EC2Serializer(operation)
    ours = serializer._serialize_body(tree)
    theirs = _moto_s_own(serialize.EC2Serializer, "_serialize_body")(serializer, tree)
    # Then the bytes are the same
    assert ours == xml_bodies.xml_document(tree)
    assert ours == theirs
