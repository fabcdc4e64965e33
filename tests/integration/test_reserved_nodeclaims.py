"""Reserved NodeClaims carry Karpenter's reservation labels, and follow their reservation: an
ODCR that ends leaves its instances On-Demand, and their NodeClaims say so, as Karpenter's
capacity-type controller relabels them (issue 40; docs/karpenter.md)."""

from __future__ import annotations

from capacity_launcher.domain.records.status import RequestStatus
from tests.integration.test_launch_into_reservations import targeted_pool
from tests.support.cloud import Cloud, launch_request

RESERVATION_ID = "karpenter.k8s.aws/capacity-reservation-id"
RESERVATION_TYPE = "karpenter.k8s.aws/capacity-reservation-type"
INTERRUPTIBLE = "karpenter.k8s.aws/capacity-reservation-interruptible"
CAPACITY_TYPE = "karpenter.sh/capacity-type"


def test_a_reserved_nodeclaim_names_its_reservation_until_the_reservation_ends(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given an instance launched into a targeted ODCR
    reservation = targeted_pool(cloud, subnets, image, 2)
    assert cloud.send(launch_request("reserved-claim", nodePool="general")) == []
    record = cloud.record("reserved-claim")
    assert record is not None and record.status is RequestStatus.FULFILLED
    (instance,) = record.instances
    # When its NodeClaim is read
    claims = cloud.adapters().queries().nodeclaims()
    labels = claims[instance.instance_id]["metadata"]["labels"]
    # Then it carries the reservation's id, type and interruptibility, as Karpenter's do
    assert labels[CAPACITY_TYPE] == "reserved"
    assert labels[RESERVATION_ID] == reservation
    assert labels[RESERVATION_TYPE] == "default"
    assert labels[INTERRUPTIBLE] == "false"
    # And once the reservation is cancelled (EC2 keeps the instance, On-Demand), it is on-demand
    cloud.ec2.cancel_capacity_reservation(CapacityReservationId=reservation)
    labels = cloud.adapters().queries().nodeclaims()[instance.instance_id]["metadata"]["labels"]
    assert labels[CAPACITY_TYPE] == "on-demand"
    assert not {RESERVATION_ID, RESERVATION_TYPE, INTERRUPTIBLE} & set(labels)
