"""Static NodePools on the local cloud (docs/static-capacity.md): the sync keeps `replicas`
instances running through the launch path, spread across zones, replaced when one ends, scaled
down (unreserved first, newest first) and to zero; producers may not launch into one; a pool
never switches between static and dynamic."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from capacity_launcher.adapters import aws
from capacity_launcher.domain.errors import ConfigConflict, ConfigValidationError
from capacity_launcher.domain.records.status import RequestStatus
from capacity_launcher.domain.records.tags import NODE_POOL
from capacity_launcher.settings import get_settings
from moto_capacity.core.clock import CLOCK
from tests.support.cloud import (
    Cloud,
    capacity_type,
    default_security_group,
    instance_type,
    launch_request,
    node_class,
    node_pool,
)

POOL = "static"
ZONES = ("us-east-1a", "us-east-1b")


@pytest.fixture
def static_sync(cloud: Cloud, monkeypatch: pytest.MonkeyPatch) -> Any:
    """One sync minute, as the deployed sync runs it (its LAUNCH_QUEUE_URL set), then the
    launcher's delivery of what the sync sent."""
    monkeypatch.setenv("LAUNCH_QUEUE_URL", cloud.names.launch_queue_url)
    get_settings.cache_clear()

    def minute() -> Any:
        report = cloud.adapters().reservation_sync().run()
        assert "static" not in report.failed
        while cloud.deliver_queued():
            pass
        return report.static

    yield minute
    get_settings.cache_clear()


def apply_static(cloud: Cloud, subnets: dict[str, str], image: str, **spec: Any) -> None:
    cloud.apply(
        node_class(
            "standard",
            [subnets[z] for z in ZONES],
            image,
            securityGroupIds=[default_security_group(cloud.ec2)],
        ),
        node_pool(
            POOL,
            "standard",
            requirements=[capacity_type("on-demand"), instance_type("m5.large")],
            **spec,
        ),
    )


def running(cloud: Cloud) -> list[dict[str, Any]]:
    return [
        i
        for i in cloud.managed_instances()
        if i["State"]["Name"] in ("pending", "running")
        and {"Key": NODE_POOL, "Value": POOL} in i.get("Tags", [])
    ]


def test_a_static_pool_is_filled_across_zones_and_kept_filled(
    cloud: Cloud, subnets: dict[str, str], image: str, static_sync: Any
) -> None:
    # Given a static pool of 3
    apply_static(cloud, subnets, image, replicas=3, limits={"instances": "4"})
    # When the sync runs
    report = static_sync()
    # Then it sent 3 launches, each an ordinary request with its record, across both zones
    assert len(report.launched[POOL]) == 3
    for request_id in report.launched[POOL]:
        record = cloud.record(request_id)
        assert record is not None and record.status is RequestStatus.FULFILLED
    zones = Counter(i["Placement"]["AvailabilityZone"] for i in running(cloud))
    assert sorted(zones.values()) == [1, 2] and set(zones) == set(ZONES)
    # And the next minute sends nothing: the pool holds its replicas, as its status says; the
    # records of its launches in flight are read together (one BatchGetItem, not one each)
    record_reads: list[tuple[str, int]] = []

    def note(params: dict[str, Any], model: Any, **_: Any) -> None:
        keys = [params.get("Key", {})]
        keys += [k for t in params.get("RequestItems", {}).values() for k in t.get("Keys", [])]
        ours = [k for k in keys if k.get("pk", {}).get("S", "").startswith("Request#static-")]
        if ours:
            record_reads.append((model.name, len(ours)))

    aws.client("dynamodb").meta.events.register("provide-client-params.dynamodb.*", note)
    assert static_sync().launched == {}
    assert record_reads == [("BatchGetItem", 3)]
    _, statuses = cloud.adapters().queries().pool_statuses()
    assert statuses[POOL]["nodes"] == 3
    # When one instance is terminated, the next minute replaces it
    gone = running(cloud)[0]["InstanceId"]
    cloud.ec2.terminate_instances(InstanceIds=[gone])
    CLOCK.advance(60)
    static_sync()
    assert len(running(cloud)) == 3 and gone not in {i["InstanceId"] for i in running(cloud)}


def test_a_static_pool_scales_down_newest_first_and_to_zero(
    cloud: Cloud, subnets: dict[str, str], image: str, static_sync: Any
) -> None:
    apply_static(cloud, subnets, image, replicas=2)
    static_sync()
    CLOCK.advance(120)
    apply_static(cloud, subnets, image, replicas=3)
    (third,) = static_sync().launched[POOL]
    record = cloud.record(third)
    assert record is not None
    newest = record.instances[0].instance_id
    # When replicas goes down to 2, the newest instance goes
    apply_static(cloud, subnets, image, replicas=2)
    report = static_sync()
    assert report.terminated == {POOL: [newest]}
    # And to 0, every instance
    apply_static(cloud, subnets, image, replicas=0)
    static_sync()
    CLOCK.advance(60)
    assert running(cloud) == []


def test_producers_cannot_launch_into_a_static_pool(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    apply_static(cloud, subnets, image, replicas=1)
    cloud.send(launch_request("mine", count=1, nodePool=POOL))
    record = cloud.record("mine")
    assert record is not None and record.status is RequestStatus.REJECTED
    assert record.errors[0].code == "StaticNodePool"
    assert "spec.replicas" in record.errors[0].message
    # And a request naming no pool never lands in it
    cloud.send(launch_request("any", count=1))
    other = cloud.record("any")
    assert other is not None and other.status is RequestStatus.REJECTED
    assert other.errors[0].code == "NoCompatibleNodePool"


def test_a_request_id_shaped_as_the_syncs_launches_does_not_open_a_static_pool(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    """Only a launch the sync recorded in flight for the pool may land in it: an id that merely
    looks like one (`static-<pool>-<minute>-<n>`) is Rejected as any producer's request."""
    apply_static(cloud, subnets, image, replicas=1)
    forged = f"static-{POOL}-1700000000-0"
    cloud.send(launch_request(forged, count=1, nodePool=POOL))
    record = cloud.record(forged)
    assert record is not None and record.status is RequestStatus.REJECTED
    assert record.errors[0].code == "StaticNodePool"
    assert running(cloud) == []


def test_a_pool_never_switches_between_static_and_dynamic(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    apply_static(cloud, subnets, image, replicas=1)
    with pytest.raises(ConfigConflict, match=r"spec\.replicas: cannot be removed"):
        apply_static(cloud, subnets, image)
    cloud.apply(node_pool("dynamic", "standard"))
    with pytest.raises(ConfigConflict, match=r"spec\.replicas: cannot be set"):
        cloud.apply(node_pool("dynamic", "standard", replicas=2))
    # And Karpenter's limits rule: a static pool is limited by its instance count only
    with pytest.raises(ConfigValidationError, match="limits cpu cannot be set with replicas"):
        apply_static(cloud, subnets, image, replicas=1, limits={"cpu": "8"})
