"""The reservation sync's groups: one ListGroupResources per reservation group a NodeClass
targets, each group's coverage from what it lists (the members EC2 described). A group that
cannot be listed (missing, refused or throttled) is skipped this run: launchers ask EC2 for it
themselves (docs/operations.md, "The reservation sync")."""

from __future__ import annotations

from collections.abc import Mapping

from capacity_launcher.domain.capacity.reservation_state import Coverage
from capacity_launcher.domain.capacity.reservations import ReservationSnapshot, target_key
from capacity_launcher.domain.errors import LaunchFailed, Transient
from capacity_launcher.observability import logger
from capacity_launcher.service.ports import Ec2Reservations


def group_coverage_of(
    ec2: Ec2Reservations,
    group_arns: set[str],
    everything: Mapping[str, ReservationSnapshot],
    at: float,
) -> tuple[list[Coverage], dict[str, list[str]]]:
    """Coverage of each readable reservation group, and the groups of each member."""
    coverage: list[Coverage] = []
    groups_of: dict[str, list[str]] = {}
    for arn in sorted(group_arns):
        try:
            listed = ec2.group_members(arn)
        except (LaunchFailed, Transient) as error:
            # One NodeClass naming a missing group must not stop the sync for every other;
            # without coverage, launchers ask EC2 themselves and report its error.
            logger.warning(
                "reservation group not readable; skipped",
                extra={
                    "group": arn,
                    "code": error.code,
                    "reason": error.reason if isinstance(error, LaunchFailed) else str(error),
                },
            )
            continue
        members = tuple(m for m in listed if m in everything)
        coverage.append(Coverage(target_key(arn), at, members))
        for member in members:
            groups_of.setdefault(member, []).append(arn)
    return coverage, groups_of
