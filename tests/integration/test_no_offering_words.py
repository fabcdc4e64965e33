"""A request whose requirements match no offering of its pool is Rejected (NoOffering) naming the
requirement key that excluded everything and its rule (domain/capacity/offering_exclusions.py)."""

from __future__ import annotations

from capacity_launcher.domain.records.status import RequestStatus
from tests.integration.test_launch_into_reservations import setup_pool
from tests.support.cloud import Cloud, launch_request


def test_windows_on_a_linux_pool_is_rejected_naming_the_os_key(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given an on-demand pool of m5.large (Linux)
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    windows = {"key": "kubernetes.io/os", "operator": "In", "values": ["windows"]}

    # When a request asks for Windows there
    cloud.send(launch_request("r-windows", nodePool="general", requirements=[windows]))

    # Then it is Rejected with NoOffering, naming the key, what it allows and what is offered
    record = cloud.record("r-windows")
    assert record is not None and record.status is RequestStatus.REJECTED, record
    (error,) = record.errors
    assert error.code == "NoOffering"
    assert error.message.endswith(
        "requirements[kubernetes.io/os]: allows [windows], but the pool's offerings have [linux]"
    ), error.message
