"""Issue 35: a request member the running botocore's model lacks is never sent, and never an
uncaught error: CreateFleet's ReservedCapacityOptions (interruptible reservations) came with
botocore 1.42.72, and an older SDK (the runtime's own, were the layer not to ship its pinned one)
refuses it with ParamValidationError before sending anything."""

from __future__ import annotations

from typing import Any

import boto3
import botocore
import botocore.loaders
import botocore.session
import pytest
from botocore.stub import Stubber

from capacity_launcher.adapters.aws import SDK_INVALID_PARAMETER, SDK_UNKNOWN_PARAMETER
from capacity_launcher.adapters.fleet import Fleet
from capacity_launcher.domain.capacity.fleet import INTERRUPTIBLE_RESERVATION_TYPE, PRIORITIZED
from capacity_launcher.domain.errors import LaunchFailed

# An interruptible reservation's fleet, as domain.fleet builds it (its market options).
INTERRUPTIBLE_FLEET: dict[str, Any] = {
    "ClientToken": "token-1",
    "Type": "instant",
    "LaunchTemplateConfigs": [
        {
            "LaunchTemplateSpecification": {
                "LaunchTemplateName": "capacity-launcher",
                "Version": "$Latest",
            }
        }
    ],
    "TargetCapacitySpecification": {
        "TotalTargetCapacity": 1,
        "DefaultTargetCapacityType": "reserved-capacity",
    },
    "ReservedCapacityOptions": {
        "ReservationTypes": [INTERRUPTIBLE_RESERVATION_TYPE],
        "AllocationStrategy": PRIORITIZED,
    },
}


@pytest.fixture
def ec2(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    # Its own loader, so its own model: these tests edit the model, and a session with the
    # test process's shared loader would share it with every other EC2 client
    # (tests/support/process_caches.py).
    session = botocore.session.Session()
    session.register_component("data_loader", botocore.loaders.Loader())
    made = boto3.session.Session(botocore_session=session).client("ec2", region_name="us-east-1")
    sent: list[str] = []
    made.meta.events.register("before-send", lambda request, **_: sent.append(request.url))
    made.sent = sent
    return made


def _older_sdk(ec2: Any, *missing: str) -> None:
    """The client's model as a botocore from before `missing` were added to CreateFleet."""
    members = ec2.meta.service_model.operation_model("CreateFleet").input_shape.members
    for member in missing:
        members.pop(member)


def test_the_pinned_sdk_sends_an_interruptible_fleet(ec2: Any) -> None:
    # Given the botocore the layer pins (the dev lock's), whose model knows the member
    with Stubber(ec2) as stub:
        stub.add_response("create_fleet", {"Instances": [], "Errors": []}, INTERRUPTIBLE_FLEET)
        # When the interruptible fleet is created, then it goes out as given
        assert Fleet(ec2).create(INTERRUPTIBLE_FLEET).instance_ids == ()
        stub.assert_no_pending_responses()


def test_a_member_the_running_sdk_lacks_is_a_launch_failure_naming_it(ec2: Any) -> None:
    # Given a botocore whose CreateFleet has no ReservedCapacityOptions
    _older_sdk(ec2, "ReservedCapacityOptions")
    # When the interruptible fleet is created
    with pytest.raises(LaunchFailed) as refused:
        Fleet(ec2).create(INTERRUPTIBLE_FLEET)
    # Then it is a launch failure (recorded on the intent, not an uncaught error) naming the
    # member, the botocore that lacks it and the fix; and nothing was sent
    assert refused.value.code == SDK_UNKNOWN_PARAMETER
    assert "ReservedCapacityOptions" in refused.value.reason
    assert f"botocore {botocore.__version__}" in refused.value.reason
    assert "layers/core/requirements.txt" in refused.value.reason
    assert ec2.sent == []


def test_a_value_the_running_sdk_refuses_is_a_launch_failure_too(ec2: Any) -> None:
    # Given a botocore whose model lacks a member nested in the request
    fleet = ec2.meta.service_model.operation_model("CreateFleet").input_shape
    fleet.members["ReservedCapacityOptions"].members.pop("ReservationTypes")
    with pytest.raises(LaunchFailed) as refused:
        Fleet(ec2).create(INTERRUPTIBLE_FLEET)
    assert refused.value.code == SDK_INVALID_PARAMETER
    assert "ReservationTypes" in refused.value.reason
    assert ec2.sent == []
