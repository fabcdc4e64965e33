"""Capacity Reservations as members of resource groups: EC2's side of GroupResources.

"Work with Capacity Reservation groups": only a reservation of the group's account and Region can
be added, and once it is, running instances whose group target names the group may run in it
("Launch instances into an existing Capacity Reservation"). resource-groups asks through
`resourcegroups.models.MEMBER_KINDS`, where the EC2 hooks register these two answers.
"""

from moto_capacity.resourcegroups.models import MemberKind

from .backend import CAPACITY_LOCK, capacity_backend


def _ec2_backend(account_id: str, region: str) -> object:
    from moto.ec2.models import ec2_backends

    return ec2_backends[account_id][region]


def reservation_exists(account_id: str, region: str, arn: str) -> bool:
    parts = arn.split(":")
    if parts[3] != region or parts[4] != account_id:
        return False
    reservation_id = arn.rsplit("/", 1)[-1]
    return reservation_id in capacity_backend(_ec2_backend(account_id, region)).reservations


def take_in_running_instances(account_id: str, region: str, reservation_arns: list[str]) -> None:
    """A reservation that joins a group takes in running instances whose group target names it."""
    backend = capacity_backend(_ec2_backend(account_id, region))
    with CAPACITY_LOCK:
        for arn in reservation_arns:
            reservation = backend.reservations.get(arn.rsplit("/", 1)[-1])
            if reservation is not None and reservation.is_active:
                backend.take_in_running_instances(reservation)


CAPACITY_RESERVATION_MEMBERS = MemberKind(reservation_exists, take_in_running_instances)
