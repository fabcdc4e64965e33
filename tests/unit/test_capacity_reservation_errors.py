"""How the capacity-reservation adapter's AWS errors reach the service, without AWS: a throttle is
a throttle (the launcher hands the request back), a missing id is no reservation, the rest fails."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from capacity_launcher.adapters.capacity_reservations import CapacityReservations
from capacity_launcher.domain.errors import LaunchFailed, Throttled

GROUP = "arn:aws:resource-groups:us-east-1:123456789012:group/gpu"


class _Failing:
    """An EC2 or resource-groups client whose every listing fails with `code`."""

    def __init__(self, code: str) -> None:
        self.code = code

    def _fail(self, **_: Any) -> Any:
        error = {"Error": {"Code": self.code, "Message": f"{self.code} happened"}}
        raise ClientError(error, "Operation")  # type: ignore[arg-type]

    describe_capacity_reservations = list_group_resources = _fail


def test_a_throttled_describe_is_throttled_not_a_failed_launch():
    reservations = CapacityReservations(ec2=_Failing("RequestLimitExceeded"))
    with pytest.raises(Throttled) as raised:
        reservations.describe(ids=["cr-0123456789abcdef0"])
    assert raised.value.operation == "DescribeCapacityReservations"


def test_a_throttled_group_listing_is_throttled_not_a_failed_launch():
    reservations = CapacityReservations(
        ec2=_Failing("unused"), resource_groups=_Failing("ThrottlingException")
    )
    with pytest.raises(Throttled) as raised:
        reservations.group_members(GROUP)
    assert raised.value.operation == "ListGroupResources"


def test_an_id_ec2_does_not_have_is_no_reservation():
    reservations = CapacityReservations(ec2=_Failing("InvalidCapacityReservationId.NotFound"))
    assert reservations.describe(ids=["cr-0123456789abcdef0"]) == []


def test_a_refusal_fails_with_ec2s_code_and_message():
    reservations = CapacityReservations(ec2=_Failing("UnauthorizedOperation"))
    with pytest.raises(LaunchFailed) as raised:
        reservations.describe()
    assert (raised.value.code, raised.value.reason) == (
        "UnauthorizedOperation",
        "UnauthorizedOperation happened",
    )
