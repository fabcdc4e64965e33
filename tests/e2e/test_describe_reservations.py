"""`describe capacityreservation NAME` (and `clustercapacityreservation`): OME's reservations as
a page for people, as the other describes lay theirs out (issue 40: it was refused)."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.conftest import E2eCloud, apply_text, run_cli

RESERVATION = """\
apiVersion: ome.io/v1beta1
kind: CapacityReservation
metadata: {name: described-reservation, namespace: team-d}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: general
      resources:
      - {name: cpu, nominalQuota: 64}
  cohort: described-cohort
  compartmentID: ocid1.compartment.example
"""


def test_describe_shows_a_reservation_as_written_with_its_usage_and_conditions(
    e2e_cloud: E2eCloud, tmp_path: Path
) -> None:
    assert apply_text(tmp_path, "reservation.yaml", RESERVATION).code == 0
    try:
        described = run_cli("describe", "capacityreservation", "described-reservation")
        assert described.code == 0, described.err
        lines = described.out.splitlines()
        fields = {line.split(":", 1)[0]: line for line in lines if not line.startswith(" ")}
        assert fields["Name"].split() == ["Name:", "described-reservation"]
        assert fields["Kind"].split() == ["Kind:", "CapacityReservation"]
        assert fields["API Version"].split() == ["API", "Version:", "ome.io/v1beta1"]
        assert fields["Lifecycle State"].split()[-1] == "Active"
        assert fields["Cohort"].split()[-1] == "described-cohort"
        # Usage against the nominal quota, per flavor (a NodePool) and resource
        usage = lines.index("Usage:")
        assert lines[usage + 1].split() == [
            "NODEPOOL", "RESOURCE", "NOMINAL", "USED", "BORROWED", "LENT", "ALLOCATABLE",
        ]  # fmt: skip
        assert lines[usage + 2].split()[:3] == ["general", "cpu", "64"]
        assert "  - spec.compartmentID" in lines
        conditions = lines.index("Conditions:")
        rows = lines[conditions + 2 :]  # the last field: its table's rows, after its header
        types = {line.split()[0] for line in rows if line.startswith("  ")}
        assert {"Ready", "DACAssociationsHealthy"} <= types
        # The kind decides: a CapacityReservation is no ClusterCapacityReservation
        other = run_cli("describe", "clustercapacityreservation", "described-reservation")
        assert other.code == 1
        assert 'clustercapacityreservations "described-reservation" not found' in other.err
    finally:
        run_cli("delete", "capacityquota", "described-reservation")


def test_describe_of_a_reservation_that_does_not_exist_says_so(e2e_cloud: E2eCloud) -> None:
    missing = run_cli("describe", "capacityreservation", "no-such-reservation")
    assert (missing.code, missing.out) == (1, "")
    assert 'Error from server (NotFound): capacityreservations "no-such-reservation" not found' in (
        missing.err
    )
