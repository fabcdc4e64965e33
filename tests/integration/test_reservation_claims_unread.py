"""Issue 38: a claim of slots a reservation's snapshot has room for is one conditional write.

`ReservationProvider.claim` takes the whole count with one UpdateItem conditioned on what a read
would have checked (that many available, not exhausted); only a claim that condition refuses
reads the snapshot, and then takes what is left (or nothing of an exhausted one)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from capacity_launcher.adapters import aws
from tests.support.cloud import Cloud, an_image, default_subnets
from tests.support.cloud import node_class as support_node_class

ZONE = "us-east-1a"


def _synced(cloud: Cloud, count: int) -> str:
    created = cloud.ec2.create_capacity_reservation(
        InstanceType="m5.large",
        InstancePlatform="Linux/UNIX",
        AvailabilityZone=ZONE,
        InstanceCount=count,
        InstanceMatchCriteria="targeted",
    )["CapacityReservation"]
    reservation_id = str(created["CapacityReservationId"])
    cloud.wait_until_active(reservation_id)
    document = support_node_class(
        "default", [default_subnets(cloud.ec2)[ZONE]], an_image(cloud.ec2)
    )
    document["spec"]["capacityReservationSpec"] = {
        "capacityReservationTarget": {"capacityReservationId": reservation_id}
    }
    cloud.apply(document)
    cloud.adapters().reservation_sync().run()
    return reservation_id


def _dynamodb_calls() -> Counter[str]:
    calls: Counter[str] = Counter()

    def note(model: Any, **_: Any) -> None:
        calls[model.name] += 1

    aws.client("dynamodb").meta.events.register("provide-client-params.dynamodb.*", note)
    return calls


def test_a_claim_the_snapshot_has_room_for_reads_nothing(cloud: Cloud) -> None:
    reservation_id = _synced(cloud, 3)
    port = cloud.adapters().reservations()
    calls = _dynamodb_calls()
    assert port.claim(reservation_id, 2) == 2
    assert calls == {"UpdateItem": 1}


def test_a_claim_beyond_the_room_takes_what_is_left_and_an_exhausted_one_nothing(
    cloud: Cloud,
) -> None:
    reservation_id = _synced(cloud, 3)
    port = cloud.adapters().reservations()
    assert port.claim(reservation_id, 2) == 2
    calls = _dynamodb_calls()
    assert port.claim(reservation_id, 5) == 1  # only one left: read, then taken
    assert calls["GetItem"] == 1
    port.give_back(reservation_id, 3)
    port.mark_exhausted([reservation_id])
    assert port.claim(reservation_id, 1) == 0  # room, but exhausted
    assert port.claim("cr-0000000000000000f", 1) is None  # no snapshot
