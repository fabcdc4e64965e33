"""OME CapacityReservation / ClusterCapacityReservation <-> the CapacityQuota hub (docs/ome.md)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from capacity_launcher.domain.accounting.quota_status import quota_status
from capacity_launcher.domain.apis.kept_fields import KEPT_ANNOTATION
from capacity_launcher.domain.apis.ome.associations import association_requester
from capacity_launcher.domain.apis.ome.reservations import (
    OME_API_VERSION,
    RESERVATION_KINDS,
    from_hub,
    parse_reservation,
    to_hub,
)
from capacity_launcher.domain.apis.ome.status import reservation_status
from capacity_launcher.domain.apis.priority_classes import PriorityTable
from capacity_launcher.domain.apis.quota_sets import conflicts, quota_for
from capacity_launcher.domain.apis.quotas import parse_quota
from capacity_launcher.domain.apis.served_versions import REGISTRY
from capacity_launcher.domain.errors import ConfigValidationError
from capacity_launcher.domain.launch_request import LaunchRequest
from capacity_launcher.domain.quantities import Resources

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "ome"


def _seed_reservations() -> list[dict[str, Any]]:
    return [
        document
        for path in sorted(EXAMPLES.glob("*.yaml"))
        for document in yaml.safe_load_all(path.read_text())
        if document and document.get("kind") in RESERVATION_KINDS
    ]


def test_the_seven_seed_examples_are_all_there() -> None:
    assert len(_seed_reservations()) == 7


@pytest.mark.parametrize("document", _seed_reservations(), ids=lambda d: d["metadata"]["name"])
def test_each_seed_example_converts_and_comes_back_as_written(document: dict[str, Any]) -> None:
    reservation = parse_reservation(document)

    converted = to_hub(reservation)

    back = from_hub(converted.quota, reservation)
    assert back.model_dump(by_alias=True, exclude_none=True) == document


def test_amounts_cohort_borrowing_and_reclaim_reach_the_hub() -> None:
    (inference,) = [
        d for d in _seed_reservations() if d["metadata"]["name"] == "inference-serving-reservation"
    ]

    quota = to_hub(parse_reservation(inference), {"production-workloads": 500}).quota

    assert quota.name == "inference-serving-reservation"
    assert quota.spec.cohort == "production-cohort"
    assert quota.spec.allow_borrowing is True
    assert quota.spec.priority == 500
    assert quota.spec.preemption.reclaim_within_cohort.value == "LowerPriority"
    gpu = quota.flavor("serving-a100-flavor").resource("nvidia.com/gpu")  # type: ignore[union-attr]
    assert (gpu.nominal_quota, gpu.borrowing_limit) == (Decimal(32), Decimal(16))
    memory = quota.flavor("serving-a100-flavor").resource("memory")  # type: ignore[union-attr]
    assert memory.nominal_quota == 8 * 1024 * 1024  # 8Ti in MiB
    assert quota.covers(association_requester("inference-serving-reservation", "llm"))
    assert not quota.covers("llm")
    assert not quota.covers(association_requester("other-reservation", "llm"))


def test_fields_without_meaning_are_kept_and_reported_by_path() -> None:
    (team_a,) = [d for d in _seed_reservations() if d["metadata"]["name"] == "team-a-reservation"]

    unacted = {e.field: e.rule for e in to_hub(parse_reservation(team_a)).not_acted_on}

    assert set(unacted) == {
        "spec.priorityClassName",
        "metadata.namespace",
        "metadata.labels",
        "spec.resourceGroups[0].coveredResources[1]",
        "spec.resourceGroups[0].coveredResources[2]",
    }
    assert "no flavor lists memory" in unacted["spec.resourceGroups[0].coveredResources[1]"]
    assert "team-a-workloads" in unacted["spec.priorityClassName"]
    known = to_hub(parse_reservation(team_a), {"team-a-workloads": 10}).not_acted_on
    assert "spec.priorityClassName" not in {e.field for e in known}


def _reservation(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "CapacityReservation",
        "metadata": {"name": "r"},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["nvidia.com/gpu"],
                    "flavors": [
                        {"name": "h100", "resources": [{"name": "nvidia.com/gpu", **spec}]}
                    ],
                }
            ]
        },
    }


@pytest.mark.parametrize(
    ("document", "field", "rule"),
    [
        (
            _reservation(nominalQuota=8, borrowingLimit=4),
            "spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit",
            "needs spec.cohort",
        ),
        (
            _reservation(nominalQuota="8Ti"),
            "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota",
            "whole number",
        ),
        (
            {
                **_reservation(nominalQuota=8),
                "spec": {
                    **_reservation(nominalQuota=8)["spec"],
                    "preemptionRule": {"reclaimWithinCohort": "Any"},
                },
            },
            "spec.preemptionRule.reclaimWithinCohort",
            "needs spec.cohort",
        ),
        ({**_reservation(nominalQuota=8), "kind": "Reservation"}, "kind", "Capacity"),
    ],
)
def test_broken_rules_are_named_at_the_reservations_own_paths(
    document: dict[str, Any], field: str, rule: str
) -> None:
    with pytest.raises(ConfigValidationError) as raised:
        to_hub(parse_reservation(document))

    assert any(e.field == field and rule in e.rule for e in raised.value.errors), raised.value


def test_a_reservation_and_a_quota_covering_its_associations_in_one_pool_conflict() -> None:
    quota = to_hub(parse_reservation(_reservation(nominalQuota=8))).quota
    squatter = parse_quota(
        {
            "apiVersion": "capacity-launcher/v1",
            "kind": "CapacityQuota",
            "metadata": {"name": "squatter"},
            "spec": {
                "requesters": [association_requester("r", "team-b")],
                "resourceGroups": [
                    {
                        "coveredResources": ["nvidia.com/gpu"],
                        "flavors": [
                            {
                                "name": "h100",
                                "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 1}],
                            }
                        ],
                    }
                ],
            },
        }
    )

    found = conflicts([quota, squatter])

    assert [e.field for e in found] == ["CapacityQuota r: spec.requesterPrefixes[0]"]
    assert "by CapacityQuota squatter" in found[0].rule
    governing, _ = quota_for([quota], association_requester("r", "dac-1"), "h100")
    assert governing is quota


def test_status_reads_in_omes_shape_with_associations_by_name() -> None:
    quota = to_hub(parse_reservation(_reservation(nominalQuota=8))).quota
    usage = {(association_requester("r", "training-dac-1"), "h100"): Resources(gpu=3)}

    status = reservation_status("r", quota_status(quota, [quota], usage, {"h100"}))

    assert status["capacityReservationLifecycleState"] == "Active"
    assert status["capacity"] == [
        {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "total": "8"}]}
    ]
    assert status["allocatable"][0]["resources"][0]["total"] == "5"
    assert status["associationUsages"] == [
        {
            "name": "training-dac-1",
            "usage": [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "total": "3"}]}],
        }
    ]
    assert [c["type"] for c in status["conditions"]] == [
        "Ready",
        "ResourcesSufficient",
        "DACAssociationsHealthy",
    ]
    missing = reservation_status("r", quota_status(quota, [quota], usage, set()))
    assert missing["capacityReservationLifecycleState"] == "Creating"


def test_a_launch_request_naming_a_reservation_counts_as_its_association() -> None:
    request = LaunchRequest.model_validate(
        {"requestId": "r-1", "count": 1, "capacityReservation": "r", "requester": "dac-1"}
    )

    associated = request.associated()

    assert associated.requester == "capacityreservation/r/dac-1"
    assert associated.associated() == associated
    plain = LaunchRequest.model_validate({"requestId": "r-2", "count": 1, "requester": "dac-1"})
    assert plain.associated() is plain
    alone = LaunchRequest.model_validate(
        {"requestId": "r-3", "count": 1, "capacityReservation": "r"}
    )
    assert alone.associated().requester == "capacityreservation/r/default"


# --- round trips, over generated documents --------------------------------------------------

_names = st.from_regex(r"\A[a-z][a-z0-9]{0,8}\Z")
_gpus = st.one_of(st.integers(0, 10_000), st.integers(0, 10_000).map(str))
_memory = st.sampled_from(["512Mi", "8Gi", "8Ti", "16Ti", 1024, "1536Gi"])
_cpu = st.sampled_from([512, "500m", "1.5", 2048, "2"])
_AMOUNTS = {"nvidia.com/gpu": _gpus, "memory": _memory, "cpu": _cpu}


@st.composite
def reservations(draw: st.DrawFn) -> dict[str, Any]:
    cohort = draw(st.one_of(st.none(), _names))
    borrowing = draw(st.sampled_from([None, False, True] if cohort else [None, False]))
    listed = draw(st.lists(st.sampled_from(list(_AMOUNTS)), min_size=1, max_size=3, unique=True))
    covered = listed + draw(st.lists(st.sampled_from(["ephemeral-storage", "pods"]), unique=True))
    flavors = []
    for flavor in draw(st.lists(_names, min_size=1, max_size=3, unique=True)):
        resources = []
        for name in listed:
            resource: dict[str, Any] = {"name": name, "nominalQuota": draw(_AMOUNTS[name])}
            if borrowing and draw(st.booleans()):
                resource["borrowingLimit"] = draw(_AMOUNTS[name])
            resources.append(resource)
        flavors.append({"name": flavor, "resources": resources})
    spec: dict[str, Any] = {"resourceGroups": [{"coveredResources": covered, "flavors": flavors}]}
    optional = {
        "cohort": cohort,
        "allowBorrowing": borrowing,
        "priorityClassName": draw(st.one_of(st.none(), st.sampled_from(["high", "low"]))),
        "compartmentID": draw(st.one_of(st.none(), st.just("ocid1.compartment.oc1..x"))),
    }
    spec |= {key: value for key, value in optional.items() if value is not None}
    rule: dict[str, Any] = {}
    if cohort and draw(st.booleans()):
        rule["reclaimWithinCohort"] = draw(st.sampled_from(["Never", "LowerPriority", "Any"]))
    if draw(st.booleans()):
        rule["borrowWithinCohort"] = {"policy": "LowerPriority", "maxPriorityThreshold": 100}
    if draw(st.booleans()):
        rule["withinClusterQueue"] = "LowerPriority"
    if rule or draw(st.booleans()):
        spec["preemptionRule"] = rule
    metadata: dict[str, Any] = {"name": draw(_names)}
    if draw(st.booleans()):
        metadata["namespace"] = draw(_names)
    if draw(st.booleans()):
        metadata["labels"] = {"team": draw(_names)}
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": draw(st.sampled_from(list(RESERVATION_KINDS))),
        "metadata": metadata,
        "spec": spec,
    }


PRIORITIES = {"high": 100, "low": -5}


@settings(max_examples=150, deadline=None)
@given(document=reservations())
def test_version_to_hub_and_back_is_the_document_as_written(document: dict[str, Any]) -> None:
    reservation = parse_reservation(document)

    back = from_hub(to_hub(reservation, PRIORITIES).quota, reservation, PRIORITIES)

    assert back.model_dump(by_alias=True, exclude_none=True) == document


@settings(max_examples=150, deadline=None)
@given(document=reservations(), data=st.data())
def test_hub_to_version_and_back_is_the_hub(document: dict[str, Any], data: st.DataObject) -> None:
    """Any hub quota a reservation can spell (here: the kept one's amounts changed) comes back."""
    kept = parse_reservation(document)
    hub = to_hub(kept, PRIORITIES).quota.model_dump(by_alias=True, exclude_none=True)
    for group in hub["spec"]["resourceGroups"]:
        for flavor in group["flavors"]:
            for resource in flavor["resources"]:
                resource["nominalQuota"] = data.draw(_AMOUNTS[resource["name"]])
    if "cohort" in hub["spec"]:
        hub["spec"]["preemption"]["reclaimWithinCohort"] = data.draw(
            st.sampled_from(["Never", "LowerPriority", "Any"])
        )
    quota = parse_quota(hub)

    again = to_hub(from_hub(quota, kept, PRIORITIES), PRIORITIES).quota

    assert again == quota


def test_hub_fields_ome_cannot_spell_are_refused_by_path() -> None:
    kept = parse_reservation(_reservation(nominalQuota=8))
    hub = to_hub(kept).quota.model_dump(by_alias=True, exclude_none=True)
    hub["spec"]["cohort"] = "c"
    hub["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["lendingLimit"] = "2"
    hub["spec"]["preemption"]["gracePeriod"] = "1m"
    hub["spec"]["associationRequesters"] = ["training-cluster"]

    with pytest.raises(ConfigValidationError) as raised:
        from_hub(parse_quota(hub), kept)

    assert {e.field for e in raised.value.errors} == {
        "spec.resourceGroups[0].flavors[0].resources[0].lendingLimit",
        "spec.preemption.gracePeriod",
        "spec.associationRequesters",
    }


@pytest.mark.parametrize("named", [None, "high"])
@pytest.mark.parametrize(("applied_as", "read_as"), [RESERVATION_KINDS, RESERVATION_KINDS[::-1]])
def test_a_reservation_read_as_the_other_kind_applies_and_reads_back_as_that_document(
    applied_as: str, read_as: str, named: str | None
) -> None:
    """`get <the other kind> -o yaml | apply -f -`: the simulation's seed 3 (soak) read a
    CapacityReservation as a ClusterCapacityReservation whose visible document had lost its
    priorityClassName (carried instead in the kept-fields annotation, which the apply then
    dropped): read back, it was another document. The two kinds have the same fields."""
    table = PriorityTable({"high": 100}, global_default="high")
    document = _reservation(nominalQuota=8)
    document["kind"] = applied_as
    document["spec"]["cohort"] = "c"
    if named is not None:
        document["spec"]["priorityClassName"] = named
    stored = REGISTRY.read(document, table).conversion

    read = REGISTRY.convert(stored.hub, stored.kept, OME_API_VERSION, read_as, table)
    again = REGISTRY.read(read, table).conversion

    assert KEPT_ANNOTATION not in read["metadata"].get("annotations", {})
    assert read["spec"].get("priorityClassName") == named
    assert again.hub == stored.hub
    assert REGISTRY.convert(again.hub, again.kept, OME_API_VERSION, read_as, table) == read
