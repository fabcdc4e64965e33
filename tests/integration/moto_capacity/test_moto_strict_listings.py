"""Listings and ids as strict as EC2's, where moto alone is lenient.

Each behaviour follows an AWS documentation page, named in its test:
- EC2 API Reference, DescribeInstanceTypes (`InstanceTypes`: at most 100 items)
  (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeInstanceTypes.html)
- EC2 API Reference, DescribeLaunchTemplates (`MaxResults` 1 to 200; `NextToken` for the rest)
  (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeLaunchTemplates.html)
- EC2 API Reference, DescribeInstanceStatus, and "Eventual consistency in the Amazon EC2 API"
  (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeInstanceStatus.html,
  https://docs.aws.amazon.com/ec2/latest/devguide/eventual-consistency.html)
- EC2 API Reference, "Error codes for the Amazon EC2 API" (`InvalidAMIID.Malformed`,
  `InvalidAMIID.NotFound`) (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html)
"""

from typing import Any

import pytest
from botocore.exceptions import ClientError
from moto.core.responses import ActionResult
from moto.ec2.models.instance_types import INSTANCE_TYPE_OFFERINGS
from moto.ec2.responses.instances import InstanceResponse

import moto_capacity
from moto_capacity.ec2.responses import listings


def _code(error: pytest.ExceptionInfo[ClientError]) -> str:
    return str(error.value.response["Error"]["Code"])


def _type_names(ec2: Any, count: int) -> list[str]:
    pages = ec2.get_paginator("describe_instance_types").paginate()
    return sorted(t["InstanceType"] for p in pages for t in p["InstanceTypes"])[:count]


def test_describe_instance_types_takes_at_most_100_names(ec2: Any) -> None:
    """DescribeInstanceTypes: `InstanceTypes`, "Maximum number of 100 items"."""
    names = _type_names(ec2, 101)
    found = ec2.describe_instance_types(InstanceTypes=names[:100])["InstanceTypes"]
    assert len(found) == 100


@pytest.mark.beyond_aws_limits
def test_describe_instance_types_refuses_more_than_100_names(ec2: Any) -> None:
    """DescribeInstanceTypes: `InstanceTypes`, "Maximum number of 100 items"; more is refused."""
    with pytest.raises(ClientError) as refused:
        ec2.describe_instance_types(InstanceTypes=_type_names(ec2, 101))
    assert _code(refused) == "InvalidParameterValue"
    assert "InstanceTypes" in refused.value.response["Error"]["Message"]


def _serializations(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every answer moto serializes from now on (none kept by earlier tests)."""
    monkeypatch.setattr(listings, "_CATALOGUE_ANSWERS", {})
    serialized: list[object] = []
    original = ActionResult.execute_result

    def counting(self: ActionResult, context: Any) -> Any:
        serialized.append(self.result)
        return original(self, context)

    monkeypatch.setattr(ActionResult, "execute_result", counting)
    return serialized


def test_describe_instance_types_serializes_each_distinct_request_once(
    ec2: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """moto's catalogue is the same for every backend: a repeated request is answered as before,
    without serializing the region's every type again (1.5 s of CPU a call); another request,
    other names or filters, gets its own answer."""
    serialized = _serializations(monkeypatch)

    def listed(**kwargs: Any) -> list[str]:
        return [t["InstanceType"] for t in ec2.describe_instance_types(**kwargs)["InstanceTypes"]]

    # Given every type listed once
    everything = listed()
    # When the same listing is asked twice more
    again = [listed(), listed()]
    # Then the answers are the first one's, serialized once
    assert again == [everything, everything] and len(everything) > 100
    assert len(serialized) == 1
    # and other requests get answers of their own (each serialized once, then kept)
    m5 = listed(Filters=[{"Name": "instance-type", "Values": ["m5.*"]}])
    c5 = listed(Filters=[{"Name": "instance-type", "Values": ["c5.*"]}])
    named = listed(InstanceTypes=["c5.large", "m5.large"])
    assert m5 and {n.split(".")[0] for n in m5} == {"m5"}
    assert c5 and {n.split(".")[0] for n in c5} == {"c5"}
    assert sorted(named) == ["c5.large", "m5.large"]
    assert listed(Filters=[{"Name": "instance-type", "Values": ["m5.*"]}]) == m5
    assert len(serialized) == 4


def test_the_whole_listing_serialized_ahead_is_the_answer_a_call_would_serialize(
    ec2: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The simulation's fork server serializes every type's listing before it forks its runs:
    the answer kept is the one a call serializes (status, headers, body), and the call then
    serializes nothing."""
    serialized = _serializations(monkeypatch)
    # Given the whole listing as a call serializes it
    everything = ec2.describe_instance_types()["InstanceTypes"]
    at_call = dict(listings._CATALOGUE_ANSWERS)
    assert len(serialized) == 1 and len(at_call) == 1 and len(everything) > 100
    # When it is serialized ahead instead, before any call
    monkeypatch.setattr(listings, "_CATALOGUE_ANSWERS", {})
    listings.serialize_catalogue_ahead()
    # Then the same answer is kept under the same request
    assert at_call == listings._CATALOGUE_ANSWERS
    # and a call answers it without serializing again
    assert ec2.describe_instance_types()["InstanceTypes"] == everything
    assert len(serialized) == 2


def test_describe_instance_type_offerings_serializes_each_distinct_request_once(
    ec2: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """moto's offerings are a table no backend changes: a repeated request is answered as before
    (each cold launcher lists two zones' offerings); another request gets its own answer, and a
    table put in place of moto's is answered from it, as moto does."""
    serialized = _serializations(monkeypatch)

    def offered(*zones: str, **filters: list[str]) -> list[tuple[str, str]]:
        pages = ec2.get_paginator("describe_instance_type_offerings").paginate(
            LocationType="availability-zone",
            Filters=[
                {"Name": "location", "Values": list(zones)},
                *({"Name": name, "Values": values} for name, values in filters.items()),
            ],
        )
        return [
            (o["InstanceType"], o["Location"]) for p in pages for o in p["InstanceTypeOfferings"]
        ]

    # Given two zones' offerings listed once
    both = offered("us-east-1a", "us-east-1b")
    # When the same listing is asked twice more
    again = [offered("us-east-1a", "us-east-1b"), offered("us-east-1a", "us-east-1b")]
    # Then the answers are the first one's, serialized once
    assert again == [both, both] and len(both) > 100
    assert {zone for _, zone in both} == {"us-east-1a", "us-east-1b"}
    assert len(serialized) == 1
    # and other requests get answers of their own (each serialized once, then kept)
    one = offered("us-east-1a")
    m5 = offered("us-east-1a", "us-east-1b", **{"instance-type": ["m5.large"]})
    assert one and {zone for _, zone in one} == {"us-east-1a"}
    assert sorted(m5) == [("m5.large", "us-east-1a"), ("m5.large", "us-east-1b")]
    assert offered("us-east-1a") == one
    assert len(serialized) == 3
    # and a table in place of moto's is answered from, each time
    table = [
        {"InstanceType": "m5.large", "Location": "us-east-1a", "LocationType": "availability-zone"}
    ]
    monkeypatch.setitem(INSTANCE_TYPE_OFFERINGS["availability-zone"], "us-east-1", table)
    assert offered("us-east-1a") == offered("us-east-1a") == [("m5.large", "us-east-1a")]
    assert len(serialized) == 5


def test_a_kept_answer_is_not_worked_out_by_moto_again(
    ec2: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """moto filters its whole offerings table for each call: a request whose answer is kept is
    given it without moto working it out again; a request moto refuses is refused each time, as
    moto refuses it."""
    monkeypatch.setattr(listings, "_CATALOGUE_ANSWERS", {})
    worked: list[str] = []
    for method in ("describe_instance_types", "describe_instance_type_offerings"):
        original = getattr(InstanceResponse, method)

        def counted(self: Any, _original: Any = original, _name: str = method) -> Any:
            worked.append(_name)
            return _original(self)

        monkeypatch.setattr(InstanceResponse, method, counted)

    def offered() -> list[dict[str, Any]]:
        return ec2.describe_instance_type_offerings(
            LocationType="availability-zone",
            Filters=[{"Name": "location", "Values": ["us-east-1a"]}],
        )["InstanceTypeOfferings"]

    # Given each listing answered once
    types, offerings = ec2.describe_instance_types()["InstanceTypes"], offered()
    assert worked == ["describe_instance_types", "describe_instance_type_offerings"]
    # When each is asked again
    again = (ec2.describe_instance_types()["InstanceTypes"], offered())
    # Then the answers are the same, and moto worked neither out again
    assert again == (types, offerings) and len(offerings) > 100
    assert len(worked) == 2
    # and a name moto does not know is refused each time, as moto refuses it
    for _ in range(2):
        with pytest.raises(ClientError) as refused:
            ec2.describe_instance_types(InstanceTypes=["m5.nonesuch"])
        assert _code(refused) == "InvalidInstanceType"
    assert worked[2:] == ["describe_instance_types"] * 2


def _templates(ec2: Any, count: int) -> list[str]:
    names = [f"lt-{i:03d}" for i in range(count)]
    for name in names:
        ec2.create_launch_template(
            LaunchTemplateName=name, LaunchTemplateData={"InstanceType": "m5.large"}
        )
    return names


def test_describe_launch_templates_pages_by_max_results_and_next_token(ec2: Any) -> None:
    """DescribeLaunchTemplates: `MaxResults` per call, the rest after the `NextToken` answered."""
    names = _templates(ec2, 5)
    seen: list[str] = []
    pages = 0
    request: dict[str, Any] = {"MaxResults": 2}
    while True:
        page = ec2.describe_launch_templates(**request)
        pages += 1
        assert len(page["LaunchTemplates"]) <= 2
        seen += [t["LaunchTemplateName"] for t in page["LaunchTemplates"]]
        if not page.get("NextToken"):
            break
        request["NextToken"] = page["NextToken"]
    assert pages == 3
    assert sorted(seen) == names


def test_describe_launch_templates_without_max_results_lists_every_template(ec2: Any) -> None:
    """moto alone cut the listing at 15 templates without saying there were more."""
    names = _templates(ec2, 20)
    page = ec2.describe_launch_templates()
    assert sorted(t["LaunchTemplateName"] for t in page["LaunchTemplates"]) == names
    assert not page.get("NextToken")


def test_describe_launch_templates_refuses_a_token_it_did_not_hand_out(ec2: Any) -> None:
    _templates(ec2, 3)
    with pytest.raises(ClientError) as refused:
        ec2.describe_launch_templates(MaxResults=2, NextToken="not-a-token")
    assert _code(refused) == "InvalidNextToken"


@pytest.mark.beyond_aws_limits
def test_describe_launch_templates_refuses_a_page_over_200(ec2: Any) -> None:
    """DescribeLaunchTemplates: "This value can be between 1 and 200"."""
    with pytest.raises(ClientError) as refused:
        ec2.describe_launch_templates(MaxResults=201)
    assert _code(refused) == "InvalidParameterValue"


def test_fresh_instance_ids_are_unknown_to_describe_instance_status(
    ec2: Any, linux_ami: str
) -> None:
    """Eventual consistency: a Describe call on a just-launched id can answer
    `InvalidInstanceID.NotFound`, as DescribeInstances already did here; a listing without ids
    does not list it yet."""
    moto_capacity.set_consistency(instance_visibility_seconds=5)
    launched = ec2.run_instances(ImageId=linux_ami, InstanceType="m5.large", MinCount=1, MaxCount=1)
    instance_id = launched["Instances"][0]["InstanceId"]
    with pytest.raises(ClientError) as refused:
        ec2.describe_instance_status(InstanceIds=[instance_id], IncludeAllInstances=True)
    assert _code(refused) == "InvalidInstanceID.NotFound"
    assert instance_id in refused.value.response["Error"]["Message"]
    listed = ec2.describe_instance_status(IncludeAllInstances=True)["InstanceStatuses"]
    assert instance_id not in {s["InstanceId"] for s in listed}
    moto_capacity.advance_clock(6)
    (status,) = ec2.describe_instance_status(InstanceIds=[instance_id], IncludeAllInstances=True)[
        "InstanceStatuses"
    ]
    assert status["InstanceId"] == instance_id


@pytest.mark.parametrize("image_id", ["ami-foo", "ami-1234567", "ami-0123456789abcdef", "image-1"])
def test_a_malformed_image_id_is_malformed_not_missing(ec2: Any, image_id: str) -> None:
    """Error codes: `InvalidAMIID.Malformed` for an id not in the form ami- and 8 or 17 hex
    digits; `InvalidAMIID.NotFound` only for a well-formed id that does not exist."""
    with pytest.raises(ClientError) as refused:
        ec2.describe_images(ImageIds=[image_id])
    assert _code(refused) == "InvalidAMIID.Malformed"
    with pytest.raises(ClientError) as launched:
        ec2.run_instances(ImageId=image_id, InstanceType="m5.large", MinCount=1, MaxCount=1)
    assert _code(launched) == "InvalidAMIID.Malformed"


@pytest.mark.parametrize("image_id", ["ami-12345678", "ami-0123456789abcdef0"])
def test_a_well_formed_unknown_image_id_is_not_found(ec2: Any, image_id: str) -> None:
    with pytest.raises(ClientError) as refused:
        ec2.describe_images(ImageIds=[image_id])
    assert _code(refused) == "InvalidAMIID.NotFound"
