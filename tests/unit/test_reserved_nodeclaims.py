"""The NodeClaim of an instance in reserved capacity: Karpenter's reservation labels, and the
conditions Karpenter sets while its reservation takes the capacity back (a Capacity Block about
to end, an interruptible reservation reclaimed), from the instance item and the reservation as
EC2 reports it (issue 40; docs/karpenter.md)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from capacity_launcher.domain.apis.karpenter.status import nodeclaim
from capacity_launcher.domain.capacity.reservations import ReservationSnapshot
from capacity_launcher.domain.records.instance_records import InstanceRecord

END = datetime(2026, 11, 27, 11, 30, tzinfo=UTC)
BLOCK = ReservationSnapshot(
    reservation_id="cr-0b10c",
    instance_type="p5.48xlarge",
    zone="us-east-1a",
    state="active",
    total=2,
    available=0,
    end_date=END,
    reservation_type="capacity-block",
)
LOAN = replace(
    BLOCK, reservation_id="cr-0l0a4", end_date=None, reservation_type="default", interruptible=True
)


def instance(reservation: ReservationSnapshot, state: str = "running") -> InstanceRecord:
    return InstanceRecord(
        instance_id="i-0123456789abcdef0",
        instance_type="p5.48xlarge",
        capacity_type="reserved",
        zone="us-east-1a",
        capacity_reservation_id=reservation.reservation_id,
        state=state,
    )


def conditions(claim: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {c["type"]: c for c in claim["status"]["conditions"]}


def test_a_block_s_nodeclaim_is_labelled_and_disrupted_from_40_minutes_before_its_end() -> None:
    # Well before the end: labelled as the block's, not disrupted
    early = nodeclaim(instance(BLOCK), None, BLOCK, END - timedelta(minutes=41))
    labels = early["metadata"]["labels"]
    assert labels["karpenter.k8s.aws/capacity-reservation-id"] == "cr-0b10c"
    assert labels["karpenter.k8s.aws/capacity-reservation-type"] == "capacity-block"
    assert labels["karpenter.k8s.aws/capacity-reservation-interruptible"] == "false"
    assert "DisruptionReason" not in conditions(early)
    # From 40 minutes before it (Karpenter drains then, 10 minutes before EC2 terminates)
    late = conditions(nodeclaim(instance(BLOCK), None, BLOCK, END - timedelta(minutes=40)))
    disrupted = late["DisruptionReason"]
    assert (disrupted["status"], disrupted["reason"]) == ("True", "CapacityBlockExpiring")
    assert disrupted["message"] == (
        "capacity block cr-0b10c ends at 2026-11-27T11:30:00+00:00; EC2 terminates its "
        "instances from 2026-11-27T11:00:00+00:00"
    )
    assert late["Ready"]["status"] == "True"  # still running meanwhile


def test_an_interrupted_instance_s_nodeclaim_says_its_reservation_is_taking_it_back() -> None:
    claim = nodeclaim(instance(LOAN, state="interrupted"), None, LOAN, END)
    assert claim["metadata"]["labels"]["karpenter.k8s.aws/capacity-reservation-interruptible"] == (
        "true"
    )
    found = conditions(claim)
    for kind in ("DisruptionReason", "InstanceTerminating"):
        assert (found[kind]["status"], found[kind]["reason"]) == (
            "True",
            "CapacityReservationInterrupted",
        )
    assert "cr-0l0a4" in found["InstanceTerminating"]["message"]
    assert found["Ready"]["status"] == "False"


def test_a_reserved_instance_whose_reservation_is_not_known_names_only_its_id() -> None:
    claim = nodeclaim(instance(BLOCK), None, None, END)
    labels = claim["metadata"]["labels"]
    assert labels["karpenter.k8s.aws/capacity-reservation-id"] == "cr-0b10c"
    assert "karpenter.k8s.aws/capacity-reservation-type" not in labels
    assert set(conditions(claim)) == {"Launched", "Ready"}
