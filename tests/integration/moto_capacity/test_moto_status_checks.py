"""Status checks that are `initializing` for a while after a launch or a start.

EC2 User Guide, "Status checks for Amazon EC2 instances"
(https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/monitoring-system-instance-status-check.html):
DescribeInstanceStatus reports a system and an instance status check for a running instance;
while they are still in progress after it starts, each is `initializing`, then `ok`.
"""

from typing import Any

import pytest

import moto_capacity


def _launch(ec2: Any, ami: str) -> str:
    answer = ec2.run_instances(ImageId=ami, InstanceType="m5.large", MinCount=1, MaxCount=1)
    return str(answer["Instances"][0]["InstanceId"])


def _checks(ec2: Any, instance_id: str) -> tuple[str, str, str]:
    status = ec2.describe_instance_status(InstanceIds=[instance_id], IncludeAllInstances=True)[
        "InstanceStatuses"
    ][0]
    return (
        status["InstanceStatus"]["Status"],
        status["SystemStatus"]["Status"],
        status["InstanceStatus"]["Details"][0]["Status"],
    )


def test_a_launched_instance_reports_initializing_until_the_window_passes(
    ec2: Any, linux_ami: str
) -> None:
    moto_capacity.set_status_checks(120)
    instance_id = _launch(ec2, linux_ami)

    assert _checks(ec2, instance_id) == ("initializing", "initializing", "initializing")
    moto_capacity.advance_clock(119)
    assert _checks(ec2, instance_id)[:2] == ("initializing", "initializing")
    moto_capacity.advance_clock(1)
    assert _checks(ec2, instance_id) == ("ok", "ok", "passed")


def test_a_started_instance_runs_its_checks_again(ec2: Any, linux_ami: str) -> None:
    moto_capacity.set_status_checks(60)
    instance_id = _launch(ec2, linux_ami)
    moto_capacity.advance_clock(60)
    ec2.stop_instances(InstanceIds=[instance_id])
    ec2.start_instances(InstanceIds=[instance_id])

    assert _checks(ec2, instance_id)[:2] == ("initializing", "initializing")
    moto_capacity.advance_clock(60)
    assert _checks(ec2, instance_id)[:2] == ("ok", "ok")


def test_off_by_default_and_after_reset(ec2: Any, linux_ami: str) -> None:
    assert _checks(ec2, _launch(ec2, linux_ami))[:2] == ("ok", "ok")
    moto_capacity.set_status_checks(300)
    moto_capacity.reset()
    assert _checks(ec2, _launch(ec2, linux_ami))[:2] == ("ok", "ok")
    assert moto_capacity.state()["statusChecks"] == {"initializingSeconds": 0.0}


@pytest.mark.parametrize("bad", [-1, True, "60"])
def test_a_bad_window_is_refused_naming_the_field(bad: object) -> None:
    with pytest.raises(ValueError, match="initializingSeconds"):
        moto_capacity.set_status_checks(bad)  # type: ignore[arg-type]
