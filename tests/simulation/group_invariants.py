"""What a launch into an ODCR group must keep (issue 38's path: a page of the members' snapshots
read, nothing claimed before CreateFleet, the member EC2 chose read from DescribeInstances and
its slots noted in the lease settle while the intent is pending), judged on the `groups`
profile's group (group_operations.py) from EC2's own launches (`RoomHistory.launches`: the
market and reservation each instance launched in), never from the service's view:

- every step, **a group pool's launch lands in a member of its group**: an instance launched
  for `pool-group` (reserved only) runs in a member, never on-demand or spot; one launched for
  `pool-group-spill` runs in a member or outside every reservation, never in another one;
- at each quiescence, **a group launch's record names the member it landed in**: each instance
  of a request the quiescence judges, in a group pool, is named with the reservation EC2
  launched it in (none when it launched outside; one that ended before its record was written,
  which EC2 no longer places in a member, is not judged), and, in a member, with the member's type
  (`default`) and end date, to the second (landed_in's read of a member the page missed);
- at each quiescence, **each group member's snapshot == EC2**: every member EC2 holds active
  has a snapshot whose available count is EC2's (no slot a launch took noted twice, or lost,
  whoever replayed its settle).

The group's other promises are the shared invariants': limits (`live <= limit`), one set of
instances per request, every request ending once, reserved first on the spill pool
(`selects` reaches a group's members), and every reservation's snapshot == EC2."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from tests.simulation.group_operations import GROUP_CLASS, GROUP_POOL, GROUP_POOLS
from tests.simulation.reserved_first import OUTSIDE
from tests.simulation.world import LIVE

if TYPE_CHECKING:
    from tests.simulation.invariants import Invariants
    from tests.simulation.world import Launch, Observed

INTO_THE_GROUP = "a group pool's launch lands in a member of its group"
NAMES_THE_MEMBER = "a group launch's record names the member it landed in"
MEMBER_SNAPSHOT = "each group member's snapshot == EC2 (quiescent)"


class GroupInvariants:
    def __init__(self, invariants: Invariants) -> None:
        self.base = invariants
        self.world = invariants.world
        self.checks = invariants.checks
        self._judged: set[str] = set()

    @property
    def _members(self) -> frozenset[str]:
        return frozenset(self.base.catalog.group_members)

    def _launch(self, instance_id: str) -> Launch | None:
        return self.base.reserved.history.launches.get(instance_id)

    def every_step(self) -> None:
        if self.base.catalog.group_arn is None:
            return
        for observed in list(self.world.instances.values()):
            if observed.pool not in GROUP_POOLS or observed.instance_id in self._judged:
                continue
            launch = self._launch(observed.instance_id)
            if launch is None:
                continue
            self._judged.add(observed.instance_id)
            self._lands_in_the_group(observed, launch)

    def _lands_in_the_group(self, observed: Observed, launch: Launch) -> None:
        self.checks[INTO_THE_GROUP] += 1
        member = launch.reservation_id in self._members
        where = "in a member" if member else "outside"
        self.checks[f"seen: a launch for {observed.pool} {where}"] += 1
        if member:
            return
        outside = launch.reservation_id is None and launch.market in OUTSIDE
        if observed.pool == GROUP_POOL or not outside:
            self.base._violate(
                INTO_THE_GROUP,
                f"{observed.instance_id} for {observed.request_id} in {observed.pool} launched"
                f" in market {launch.market}, reservation {launch.reservation_id}, not in a"
                f" member of {sorted(self._members)}",
            )

    def after_quiescence(self, records: dict[str, dict[str, Any] | None]) -> None:
        if self.base.catalog.group_arn is None:
            return
        for request_id, record in records.items():
            if record is not None and record.get("nodePool") in GROUP_POOLS:
                for instance in record.get("instances") or []:
                    self._names_the_member(request_id, instance)
        if GROUP_CLASS in self.base.catalog.classes:
            self._member_snapshots()

    def _names_the_member(self, request_id: str, instance: dict[str, Any]) -> None:
        launch = self._launch(instance["instanceId"])
        if launch is None:
            self.checks[f"{NAMES_THE_MEMBER}: not judged (launch not seen)"] += 1
            return
        self.checks[NAMES_THE_MEMBER] += 1
        named = instance.get("capacityReservationId")
        observed = self.world.instances.get(instance["instanceId"])
        ended = observed is None or observed.state not in LIVE
        if named is None and launch.reservation_id is not None and ended:
            # Ended before its record was written, EC2 no longer names the member it was in:
            # no record can (its capacity type is "instances fit pool and request"'s).
            self.checks[f"{NAMES_THE_MEMBER}: not judged (ended, no member named)"] += 1
            return
        wrong = []
        if named != launch.reservation_id:
            wrong.append(f"names {named}, EC2 launched it in {launch.reservation_id}")
        elif named is not None and named in self._members:
            self.checks[f"seen: {NAMES_THE_MEMBER} (a member)"] += 1
            facts = self.base.reserved.history.facts.get(named) or self.world.reservation_facts(
                named
            )
            if instance.get("capacityReservationType") != "default":
                wrong.append(f"type {instance.get('capacityReservationType')}, not default")
            end = _epoch(instance.get("capacityReservationEndDate"))
            if (end is None) != (facts.end is None) or abs((end or 0.0) - (facts.end or 0.0)) >= 1:
                wrong.append(f"end {instance.get('capacityReservationEndDate')}, EC2's {facts.end}")
        if wrong:
            self.base._violate(
                NAMES_THE_MEMBER,
                f"{request_id}: {instance['instanceId']} ({record_market(instance)}) "
                + "; ".join(wrong),
            )

    def _member_snapshots(self) -> None:
        ec2 = self.world.ec2_availability()
        snapshots = self.world.snapshot_availability()
        for member in sorted(self._members):
            if member not in ec2:
                continue  # cancelled or expired: the sync forgets it
            self.checks[MEMBER_SNAPSHOT] += 1
            if snapshots.get(member) != ec2[member]:
                self.base._violate(
                    MEMBER_SNAPSHOT,
                    f"{member}: snapshot available {snapshots.get(member)}, EC2 {ec2[member]}",
                )


def record_market(instance: dict[str, Any]) -> str:
    return f"{instance.get('capacityType')} {instance.get('instanceType')} {instance.get('zone')}"


def _epoch(text: str | None) -> float | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
