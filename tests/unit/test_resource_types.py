"""TYPE names of get/delete: plural, singular and short, in any case, from one table."""

from __future__ import annotations

import argparse

import pytest

from capacity_launcher_cli.main import parser
from capacity_launcher_cli.resource_types import TYPES, delete_type, get_type


@pytest.mark.parametrize(
    ("typed", "plural"),
    [
        ("np", "nodepools"),
        ("NodePool", "nodepools"),
        ("NODEPOOLS", "nodepools"),
        ("nc", "nodeclasses"),
        ("ec2nc", "ec2nodeclasses"),
        ("EC2NodeClass", "ec2nodeclasses"),
        ("cq", "capacityquotas"),
        ("quotas", "capacityquotas"),
        ("CapacityReservation", "capacityreservations"),
        ("nodeclaim", "nodeclaims"),
        ("req", "requests"),
        ("request", "requests"),
    ],
)
def test_get_reads_every_name_of_a_type_in_any_case(typed: str, plural: str) -> None:
    assert parser().parse_args(["get", typed]).resource == plural


def test_no_name_belongs_to_two_types() -> None:
    names = [name for t in TYPES for name in t.names]
    assert len(names) == len(set(names))


@pytest.mark.parametrize(
    ("typed", "kind"),
    [
        ("NP", "nodepool"),
        ("nodeclasses", "nodeclass"),
        ("ec2nc", "nodeclass"),
        ("cq", "capacityquota"),
    ],
)
def test_delete_reads_every_name_of_a_deletable_type(typed: str, kind: str) -> None:
    assert parser().parse_args(["delete", typed, "x"]).kind == kind


def test_an_unknown_or_undeletable_type_is_a_usage_error_naming_it() -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="unknown resource type 'nodes'"):
        get_type("nodes")
    with pytest.raises(argparse.ArgumentTypeError, match="'requests' cannot be deleted"):
        delete_type("requests")
    with pytest.raises(SystemExit) as exited:
        parser().parse_args(["get", "nodes"])
    assert exited.value.code == 2
