"""The fake reservations port (tests/fakes/ec2.FakeReservations) answers as the launcher's real
one (service/reservations.ReservationProvider over the shared snapshots and EC2 on moto_capacity):
the same scenario against each, the same observations: the sources a NodeClass's selection
reaches, slots claimed up to what is free, given back up to the total, marked exhausted and
taken by launches. A fake that drifts from the real port fails here, not in tests/unit/launch."""

from __future__ import annotations

from typing import Any

from capacity_launcher.domain.capacity.reservations import ReservationSnapshot
from capacity_launcher.service.ports import Reservations
from tests.fakes.ec2 import FakeReservations
from tests.fakes.world import a_node_class
from tests.support.cloud import Cloud, an_image, default_subnets
from tests.support.cloud import node_class as support_node_class

ZONE = "us-east-1a"


def _observed(port: Reservations, node_class: Any) -> list[tuple[str, int, int, bool]]:
    return [
        (r.reservation_id, r.available, r.total, r.exhausted)
        for source in port.sources(node_class)
        for r in source.reservations
    ]


def _scenario(port: Reservations, node_class: Any, reservation_id: str) -> list[Any]:
    seen: list[Any] = [_observed(port, node_class)]
    seen.append(port.claim(reservation_id, 2))
    seen.append(port.claim(reservation_id, 5))  # only one left
    seen.append(port.claim(reservation_id, 1))  # none left
    seen.append(port.claim("cr-0000000000000000f", 1))  # not a reservation it knows
    port.give_back(reservation_id, 2)
    seen.append(_observed(port, node_class))
    port.give_back(reservation_id, 9)  # never above the total
    seen.append(_observed(port, node_class))
    port.note_launched({reservation_id: 1})
    seen.append(_observed(port, node_class))
    port.mark_exhausted([reservation_id])
    # Only the flag: with every reachable reservation exhausted the real port looks at EC2's
    # own count (catch_up), which here never saw the noted launch; the fake does not model EC2.
    seen.append([(r[0], r[3]) for r in _observed(port, node_class)])
    return seen


def test_the_fake_reservations_answer_as_the_launchers_port_does(cloud: Cloud) -> None:
    created = cloud.ec2.create_capacity_reservation(
        InstanceType="m5.large",
        InstancePlatform="Linux/UNIX",
        AvailabilityZone=ZONE,
        InstanceCount=3,
        InstanceMatchCriteria="targeted",
    )["CapacityReservation"]
    reservation_id = created["CapacityReservationId"]
    cloud.wait_until_active(reservation_id)
    spec = {"capacityReservationTarget": {"capacityReservationId": reservation_id}}
    subnets = default_subnets(cloud.ec2)
    document = support_node_class("default", [subnets[ZONE]], an_image(cloud.ec2))
    document["spec"]["capacityReservationSpec"] = spec
    cloud.apply(document)
    adapters = cloud.adapters()
    adapters.reservation_sync().run()  # the shared snapshots the launcher's port reads
    node_class = a_node_class(capacityReservationSpec=spec)
    real = _scenario(adapters.reservations(), node_class, reservation_id)

    snapshot = ReservationSnapshot(reservation_id, "m5.large", ZONE, "active", 3, 3)
    fake = _scenario(FakeReservations([snapshot], lambda: 0.0), node_class, reservation_id)

    assert fake == real
    assert real[0] == [(reservation_id, 3, 3, False)]
