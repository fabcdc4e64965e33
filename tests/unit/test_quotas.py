"""CapacityQuota documents: every rule named by field and rule; coverage of requesters."""

from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any

import pytest

from capacity_launcher.domain.apis.documents import parse_document, to_document
from capacity_launcher.domain.apis.quota_preemption import ReclaimPolicy, parse_duration_seconds
from capacity_launcher.domain.apis.quota_sets import association_refusal, conflicts, quota_for
from capacity_launcher.domain.apis.quotas import CapacityQuota
from capacity_launcher.domain.errors import ConfigValidationError
from capacity_launcher.domain.field_errors import FieldError

RESOURCES = "spec.resourceGroups[0].flavors[0].resources"


def issue_sketch(**spec: Any) -> dict[str, Any]:
    """The document as issue 17 sketches it."""
    base: dict[str, Any] = {
        "requesters": ["team-a"],
        "cohort": "research",
        "priority": 100,
        "allowBorrowing": True,
        "resourceGroups": [
            {
                "coveredResources": ["nvidia.com/gpu", "cpu", "memory", "instances"],
                "flavors": [
                    {
                        "name": "gpu-training",
                        "resources": [
                            {
                                "name": "nvidia.com/gpu",
                                "nominalQuota": "32",
                                "borrowingLimit": "16",
                            },
                            {"name": "memory", "nominalQuota": "8Ti"},
                            {"name": "cpu", "nominalQuota": "1500m"},
                            {"name": "instances", "nominalQuota": 4, "lendingLimit": "2"},
                        ],
                    }
                ],
            }
        ],
        "preemption": {"reclaimWithinCohort": "LowerPriority", "gracePeriod": "10m"},
    }
    return {
        "apiVersion": "capacity-launcher/v1",
        "kind": "CapacityQuota",
        "metadata": {"name": "team-a"},
        "spec": base | spec,
    }


def errors_of(document: Any) -> list[FieldError]:
    with pytest.raises(ConfigValidationError) as caught:
        parse_document(document)
    return caught.value.errors


def test_the_issue_sketch_parses_with_amounts_in_resource_units() -> None:
    quota = parse_document(issue_sketch())

    assert isinstance(quota, CapacityQuota)
    flavor = quota.flavor("gpu-training")
    assert flavor is not None
    amounts = {r.name: r.nominal_quota for r in flavor.resources}
    assert amounts == {
        "nvidia.com/gpu": Decimal(32),
        "memory": Decimal(8 * 1024 * 1024),  # MiB
        "cpu": Decimal("1.5"),
        "instances": Decimal(4),
    }
    assert quota.spec.preemption.reclaim_within_cohort is ReclaimPolicy.LOWER_PRIORITY
    assert quota.spec.preemption.grace_seconds == 600


def test_the_stored_form_spells_amounts_with_units_and_parses_back_the_same() -> None:
    quota = parse_document(issue_sketch())

    stored = to_document(quota)

    resources = stored["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    assert resources[1] == {"name": "memory", "nominalQuota": "8Ti"}
    assert resources[2] == {"name": "cpu", "nominalQuota": "1500m"}
    assert parse_document(stored) == quota


@pytest.mark.parametrize(
    ("change", "field", "rule"),
    [
        (
            lambda d: d["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0].update(
                nominalQuota="32Gi"
            ),
            f"{RESOURCES}[0].nominalQuota",
            "must be a non-negative whole number",
        ),
        (
            lambda d: d["spec"]["resourceGroups"][0]["flavors"][0]["resources"][1].update(
                nominalQuota="8 TB"
            ),
            f"{RESOURCES}[1].nominalQuota",
            "must be a non-negative number of bytes",
        ),
        (
            lambda d: d["spec"]["resourceGroups"][0]["flavors"][0]["resources"][2].update(
                nominalQuota="0.0001"
            ),
            f"{RESOURCES}[2].nominalQuota",
            "must be a whole number of millicores",
        ),
        (
            lambda d: d["spec"]["resourceGroups"][0]["flavors"][0]["resources"][3].update(
                lendingLimit="5"
            ),
            f"{RESOURCES}[3].lendingLimit",
            "must be at most nominalQuota",
        ),
        (
            lambda d: d["spec"]["resourceGroups"][0]["flavors"][0]["resources"].append(
                {"name": "gpus", "nominalQuota": "1"}
            ),
            f"{RESOURCES}[4].name",
            "must be one of cpu, memory, nvidia.com/gpu, instances",
        ),
        (
            lambda d: d["spec"]["resourceGroups"][0].update(coveredResources=["nvidia.com/gpu"]),
            f"{RESOURCES}",
            "memory, cpu, instances: not in this group's coveredResources",
        ),
        (
            lambda d: d["spec"]["resourceGroups"][0]["flavors"][0]["resources"].pop(),
            f"{RESOURCES}",
            "must list every covered resource; missing instances",
        ),
        (
            lambda d: d["spec"]["resourceGroups"][0].update(
                coveredResources=["nvidia.com/gpu", "cpu", "memory", "instances", "disk"]
            ),
            "spec.resourceGroups[0].coveredResources",
            "'disk': must be one of",
        ),
        (
            lambda d: d["spec"].pop("cohort"),
            f"{RESOURCES}[0].borrowingLimit",
            "needs spec.cohort",
        ),
        (
            lambda d: d["spec"].update(allowBorrowing=False),
            f"{RESOURCES}[0].borrowingLimit",
            "needs spec.allowBorrowing: true",
        ),
        (
            lambda d: d["spec"]["preemption"].update(reclaimWithinCohort="Sometimes"),
            "spec.preemption.reclaimWithinCohort",
            "'Never', 'LowerPriority' or 'Any'",
        ),
        (
            lambda d: d["spec"]["preemption"].update(gracePeriod="2d"),
            "spec.preemption.gracePeriod",
            "must be a duration such as '30s', '10m' or '1h30m', at most 24h",
        ),
        (
            lambda d: d["spec"].update(requesters=[]),
            "spec.requesters",
            "must list at least one requester",
        ),
        (
            lambda d: d["spec"].update(requesters=["team-a", "team-a"]),
            "spec.requesters",
            "must not repeat team-a",
        ),
        (lambda d: d["spec"].update(priority="high"), "spec.priority", "valid integer"),
        (lambda d: d["spec"].update(cohort="Research!"), "spec.cohort", "lowercase letters"),
        (lambda d: d["spec"].update(queue="x"), "spec.queue", "is not an allowed field"),
        (
            lambda d: d["spec"]["resourceGroups"][0]["flavors"][0].update(name="GPU pool"),
            "spec.resourceGroups[0].flavors[0].name",
            "lowercase letters",
        ),
        (
            lambda d: d["spec"]["resourceGroups"][0].update(limits={"nvidia.com/gpu": "many"}),
            "spec.resourceGroups[0].limits[nvidia.com/gpu]",
            "must be a non-negative whole number",
        ),
    ],
)
def test_each_broken_rule_is_named_by_field_and_rule(change: Any, field: str, rule: str) -> None:
    document = copy.deepcopy(issue_sketch())
    change(document)

    errors = errors_of(document)

    assert any(e.field == field and rule in e.rule for e in errors), errors


def test_a_resource_in_two_groups_and_a_flavor_listed_twice_are_refused() -> None:
    group = issue_sketch()["spec"]["resourceGroups"][0]
    document = issue_sketch(resourceGroups=[group, copy.deepcopy(group)])

    errors = errors_of(document)

    fields = {e.field for e in errors}
    assert "spec.resourceGroups[1].coveredResources" in fields
    assert "spec.resourceGroups[1].flavors[0].name" in fields


def test_allow_borrowing_and_reclaim_need_a_cohort() -> None:
    document = issue_sketch()
    document["spec"].pop("cohort")
    document["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0].pop("borrowingLimit")
    document["spec"]["resourceGroups"][0]["flavors"][0]["resources"][3].pop("lendingLimit")

    errors = errors_of(document)

    assert {(e.field, e.rule) for e in errors} == {
        ("spec.allowBorrowing", "needs spec.cohort: quotas borrow within a cohort"),
        ("spec.preemption.reclaimWithinCohort", "needs spec.cohort"),
    }


def test_group_limits_may_cap_only_covered_resources() -> None:
    document = issue_sketch()
    group = document["spec"]["resourceGroups"][0]
    group["coveredResources"] = ["nvidia.com/gpu"]
    group["flavors"][0]["resources"] = group["flavors"][0]["resources"][:1]
    group["limits"] = {"cpu": "16"}

    errors = errors_of(document)

    assert FieldError("spec.resourceGroups[0].limits", "cpu: not in coveredResources") in errors


@pytest.mark.parametrize(("text", "seconds"), [("30s", 30), ("10m", 600), ("1h30m", 5400)])
def test_grace_periods(text: str, seconds: int) -> None:
    assert parse_duration_seconds(text) == seconds


def quota(name: str, requesters: list[str], pools: list[str]) -> CapacityQuota:
    flavors = [
        {"name": pool, "resources": [{"name": "instances", "nominalQuota": "4"}]} for pool in pools
    ]
    document = {
        "apiVersion": "capacity-launcher/v1",
        "kind": "CapacityQuota",
        "metadata": {"name": name},
        "spec": {
            "requesters": requesters,
            "resourceGroups": [{"coveredResources": ["instances"], "flavors": flavors}],
        },
    }
    parsed = parse_document(document)
    assert isinstance(parsed, CapacityQuota)
    return parsed


def test_a_requester_in_two_quotas_of_one_flavor_is_a_conflict_named_on_the_later_quota() -> None:
    quotas = [
        quota("team-b", ["team-b", "shared"], ["training"]),
        quota("team-a", ["team-a", "shared"], ["training", "batch"]),
        quota("team-c", ["team-a"], ["general"]),  # another flavor: no conflict
    ]

    found = conflicts(quotas)

    assert [str(e) for e in found] == [
        "CapacityQuota team-b: spec.requesters[1]: requester 'shared' is already covered in "
        "flavor training by CapacityQuota team-a; a requester has at most one quota per flavor"
    ]


def test_which_quota_governs_a_requester_in_a_pool() -> None:
    quotas = [quota("team-a", ["team-a"], ["training"]), quota("team-b", ["team-b"], ["training"])]

    # A covered requester gets its quota
    governing, naming = quota_for(quotas, "team-a", "training")
    assert governing is not None and governing.name == "team-a"
    # A pool no quota names: only the pool's limits apply
    assert quota_for(quotas, "team-a", "general") == (None, [])
    # A pool quotas cover, by a requester none covers (or none at all): refused
    for requester in ("team-z", None):
        governing, naming = quota_for(quotas, requester, "training")
        assert governing is None
        assert [q.name for q in naming] == ["team-a", "team-b"]


def test_an_unknown_resource_name_is_reported_once_not_again_on_its_amount() -> None:
    document = issue_sketch()
    document["spec"]["resourceGroups"][0]["flavors"][0]["resources"][1]["name"] = "ram"

    errors = errors_of(document)

    assert [e.field for e in errors] == [f"{RESOURCES}[1].name"]


def _reservation_quota(**spec: Any) -> dict[str, Any]:
    """A reservation's hub quota: it covers its associations by prefix (docs/ome.md)."""
    return issue_sketch(requesters=[], requesterPrefixes=["capacityreservation/r/"], **spec)


def test_a_reservation_may_list_who_associates_and_bind_where_they_come_from() -> None:
    document = _reservation_quota(
        associationRequesters=["training-cluster", "default"],
        requesterOrigins={"training-cluster": {"eventSources": ["capacity-launcher.team.a"]}},
    )

    parsed = parse_document(document)

    assert isinstance(parsed, CapacityQuota)
    assert parsed.spec.association_requesters == ["training-cluster", "default"]
    assert parsed.spec.reservations() == ["r"]
    assert to_document(parsed)["spec"]["associationRequesters"] == ["training-cluster", "default"]


@pytest.mark.parametrize(
    ("document", "field", "rule"),
    [
        (
            issue_sketch(associationRequesters=["training-cluster"]),
            "spec.associationRequesters",
            "needs a reservation's prefix in spec.requesterPrefixes (capacityreservation/NAME/)",
        ),
        (
            issue_sketch(requesterPrefixes=["capacityreservation/"], associationRequesters=["x"]),
            "spec.associationRequesters",
            "needs a reservation's prefix",
        ),
        (
            _reservation_quota(associationRequesters=["x", "x"]),
            "spec.associationRequesters",
            "must not repeat x",
        ),
        (
            _reservation_quota(requesterOrigins={"x": {"accounts": ["123456789012"]}}),
            "spec.requesterOrigins.x",
            "is not in spec.requesters or spec.associationRequesters",
        ),
    ],
)
def test_association_lists_break_rules_by_field(document: Any, field: str, rule: str) -> None:
    errors = errors_of(document)

    assert [e.field for e in errors] == [field], errors
    assert rule in errors[0].rule


def test_only_listed_requesters_associate_with_a_reservation_that_lists_them() -> None:
    listing = parse_document(_reservation_quota(associationRequesters=["training-cluster"]))
    open_ = parse_document(_reservation_quota() | {"metadata": {"name": "open"}})
    team = parse_document(issue_sketch())
    assert isinstance(listing, CapacityQuota) and isinstance(open_, CapacityQuota)
    assert isinstance(team, CapacityQuota)

    assert association_refusal([listing], "capacityreservation/r/training-cluster") is None
    assert association_refusal([listing], "capacityreservation/r/default") == (
        "requester: 'default' may not associate with capacityReservation 'r': CapacityQuota "
        "team-a spec.associationRequesters lists only training-cluster (a request without a "
        "requester associates as 'default')"
    )
    # another reservation's associations, a plain requester, and a quota listing none: as before
    assert association_refusal([listing], "capacityreservation/s/team-b") is None
    assert association_refusal([listing, team], "team-b") is None
    assert association_refusal([open_], "capacityreservation/r/team-b") is None
    assert association_refusal([open_, listing], "capacityreservation/r/team-b") is not None
