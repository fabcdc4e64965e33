"""The integration suite's own support costs what it must and waits on nothing real: the image the
tests launch is asked for by id, and a faulted AWS call is retried as the layer configures it
without sleeping botocore's back-off between attempts (issue 38)."""

from __future__ import annotations

import time
from typing import Any

import pytest

import moto_capacity
from capacity_launcher.adapters import aws
from capacity_launcher.adapters.aws import _MAX_ATTEMPTS
from tests.support.cloud import Cloud, an_image


def test_an_image_is_the_first_linux_image_listed_asked_for_by_id(cloud: Cloud) -> None:
    # Given the DescribeImages calls the cloud's EC2 client sends
    asked: list[dict[str, Any]] = []
    cloud.ec2.meta.events.register(
        "provide-client-params.ec2.DescribeImages", lambda params, **_: asked.append(dict(params))
    )
    # When the tests' image is looked up
    image_id = an_image(cloud.ec2)
    # Then one image was asked for, by its id, not moto's whole catalogue
    assert asked == [{"ImageIds": [image_id]}]
    # ...and it is the image listing them all would pick: the first that is not Windows
    listed = cloud.ec2.describe_images(Owners=["amazon"])["Images"]
    assert image_id == next(i["ImageId"] for i in listed if i.get("Platform") != "windows")


def test_a_throttled_call_is_retried_as_configured_without_sleeping(
    cloud: Cloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given EC2 throttles the next four DescribeVpcs calls, and every sleep is recorded
    moto_capacity.inject_fault("ec2:DescribeVpcs", "RequestLimitExceeded", times=_MAX_ATTEMPTS - 1)
    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)
    # When the layer's EC2 client calls it once
    vpcs = aws.client("ec2").describe_vpcs()["Vpcs"]
    # Then botocore retried through every throttle, each attempt reaching the emulator...
    assert vpcs
    calls = moto_capacity.state()["operations"]["ec2:DescribeVpcs"]
    assert calls == {"calls": _MAX_ATTEMPTS, "failures": _MAX_ATTEMPTS - 1}
    # ...and its back-off between them was not slept
    assert slept and all(seconds == 0 for seconds in slept), slept
