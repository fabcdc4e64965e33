"""Kueue's Cohort served (issue 37): the document's rules at apply, each naming its field; what an
apply or delete decides against the stored cohorts (the tree's rules, the NodePools whose
admissions it governs); the status conditions a cohort is listed with; and what an apply says
it waits for (a parent not applied yet)."""

from __future__ import annotations

from typing import Any

import pytest

from capacity_launcher.domain.apis.kueue.cohort_changes import (
    MAX_POOL_BUMPS,
    CohortsRead,
    plan_apply,
    plan_delete,
)
from capacity_launcher.domain.apis.kueue.cohorts import cohort_status, parse_cohort
from capacity_launcher.domain.apis.quotas import CapacityQuota, parse_quota
from capacity_launcher.domain.errors import ConfigConflict, ConfigValidationError, NotFound
from capacity_launcher.domain.quantities import GPU
from capacity_launcher.service.configuration import parent_awaited
from tests.unit.test_cohort_tree import by_name, cohort
from tests.unit.test_quota_admission import POOL, quota


def document(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Cohort",
        "metadata": {"name": "org"},
        "spec": spec,
    }


def group(**resource: Any) -> list[dict[str, Any]]:
    return [
        {
            "coveredResources": [resource.get("name", GPU)],
            "flavors": [{"name": POOL, "resources": [{"name": GPU, **resource}]}],
        }
    ]


# The document's rules ---------------------------------------------------------------------


def test_a_limit_without_a_nominal_quota_is_refused_at_nominal_quota() -> None:
    with pytest.raises(ConfigValidationError) as refused:
        parse_cohort(document({"parentName": "root", "resourceGroups": group(borrowingLimit="2")}))
    assert str(refused.value) == (
        "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: is required with "
        'borrowingLimit (write "0" for a cohort with no quota of its own)'
    )


def test_a_root_cohorts_limits_are_refused_naming_each() -> None:
    spec = {"resourceGroups": group(nominalQuota="2", borrowingLimit="1", lendingLimit="1")}
    with pytest.raises(ConfigValidationError) as refused:
        parse_cohort(document(spec))
    where = "spec.resourceGroups[0].flavors[0].resources[0]"
    assert [(e.field, e.rule) for e in refused.value.errors] == [
        (f"{where}.{limit}", "needs spec.parentName: a cohort without a parent borrows from "
         "and lends to no one")
        for limit in ("borrowingLimit", "lendingLimit")
    ]  # fmt: skip
    # With a parent (applied or not), the same limits are the cohort's in its parent
    parse_cohort(document({"parentName": "root", **spec}))


def test_an_unknown_resource_name_is_refused_naming_the_field() -> None:
    spec = {
        "parentName": "root",
        "resourceGroups": [
            {
                "coveredResources": ["gpus"],
                "flavors": [{"name": POOL, "resources": [{"name": "gpus", "nominalQuota": "1"}]}],
            }
        ],
    }
    with pytest.raises(ConfigValidationError) as refused:
        parse_cohort(document(spec))
    fields = [e.field for e in refused.value.errors]
    assert fields == [
        "spec.resourceGroups[0].coveredResources",
        "spec.resourceGroups[0].flavors[0].resources[0].name",
    ]
    assert all("must be one of cpu, memory" in e.rule for e in refused.value.errors)


# What an apply or delete decides ----------------------------------------------------------


def on_pool(name: str, cohort_name: str, pool: str) -> CapacityQuota:
    """A quota of one GPU in ``cohort_name``, on ``pool``."""
    dumped = quota(name, 1, cohort=cohort_name).model_dump(
        mode="json", by_alias=True, exclude_none=True
    )
    dumped["spec"]["resourceGroups"][0]["flavors"][0]["name"] = pool
    return parse_quota(dumped)


def test_an_apply_governs_the_pools_of_its_whole_tree_before_and_after() -> None:
    # vision under org beside speech: team-v in vision on `train`, team-s in speech on `serve`
    quotas = (
        on_pool("team-v", "vision", "train"),
        on_pool("team-s", "speech", "serve"),
        on_pool("team-x", "elsewhere", "other"),
    )
    stored = (cohort("org"), cohort("speech", "org"))
    # When vision joins org: speech's pool is governed too (it may now lend to vision)
    write = plan_apply(cohort("vision", "org"), CohortsRead(3, 7, stored, quotas))
    assert (write.seen, write.quota_version) == (3, 7)
    assert write.pools == ("serve", "train")
    # A cohort alone, no tree: its own members' pools only
    assert plan_apply(cohort("vision"), CohortsRead(3, 7, (), quotas)).pools == ("train",)
    # Leaving the tree governs the tree it leaves, and so does deleting its root
    with_vision = CohortsRead(3, 7, (*stored, cohort("vision", "org")), quotas)
    assert plan_apply(cohort("vision"), with_vision).pools == ("serve", "train")
    assert plan_delete("org", with_vision).pools == ("serve", "train")
    # A cohort's own quota names its pool too
    assert plan_apply(cohort("org", nominal=1), CohortsRead(0, 0)).pools == (POOL,)


def test_an_apply_deep_in_a_tree_governs_the_pools_of_every_branch() -> None:
    # company <- org <- vision (team-v on `train`), speech (team-s on `serve`); ops (team-o on
    # `batch`) under company: a branch two levels away from vision
    quotas = (
        on_pool("team-v", "vision", "train"),
        on_pool("team-s", "speech", "serve"),
        on_pool("team-o", "ops", "batch"),
    )
    stored = (cohort("company"), cohort("org", "company"), cohort("speech", "org"))
    stored += (cohort("ops", "company"),)
    # When vision joins org, ops may lend to it through company: its pool is governed too
    write = plan_apply(cohort("vision", "org"), CohortsRead(3, 7, stored, quotas))
    assert write.pools == ("batch", "serve", "train")
    # and deleting the middle governs every branch it parted
    with_vision = CohortsRead(3, 7, (*stored, cohort("vision", "org")), quotas)
    assert plan_delete("org", with_vision).pools == ("batch", "serve", "train")


def test_an_unchanged_apply_governs_no_pool() -> None:
    # A GitOps loop re-applying the stored cohorts: no lease in the tree's pools decides again
    # (found by the simulation: queue seed 2, a lease refused by a pool generation that a
    # re-apply of the same Cohort had bumped)
    quotas = (on_pool("team-v", "vision", "train"),)
    stored = (cohort("org"), cohort("vision", "org"))
    read = CohortsRead(3, 7, stored, quotas)
    assert plan_apply(cohort("vision", "org"), read).pools == ()
    assert plan_apply(cohort("vision", "org", nominal=1), read).pools == (POOL, "train")


def test_an_apply_is_refused_when_its_tree_names_more_pools_than_one_transaction() -> None:
    many = tuple(on_pool(f"q{i}", "org", f"pool-{i}") for i in range(MAX_POOL_BUMPS + 1))
    with pytest.raises(ConfigConflict, match=f"name {MAX_POOL_BUMPS + 1} NodePools"):
        plan_apply(cohort("org"), CohortsRead(0, 0, (), many))


def test_a_cycle_through_the_stored_cohorts_is_refused_and_a_delete_needs_the_cohort() -> None:
    read = CohortsRead(1, 1, (cohort("vision", "org"),))
    with pytest.raises(ConfigConflict, match=r"Cohort org: spec\.parentName: makes a cycle"):
        plan_apply(cohort("org", "vision"), read)
    with pytest.raises(NotFound):
        plan_delete("org", read)


# Status and what an apply waits for --------------------------------------------------------


def test_a_cohort_whose_parent_is_not_applied_is_not_ready_saying_why() -> None:
    vision = cohort("vision", "org")
    members = [quota("team-v", 1, cohort="vision"), quota("team-x", 1, cohort="other")]
    status = cohort_status(by_name(vision), members, vision)
    assert status["memberQuotas"] == ["team-v"]
    assert status["conditions"] == [
        {
            "type": "Ready",
            "status": "False",
            "reason": "ParentNotFound",
            "message": "parent Cohort org is not applied; borrowing stays within this cohort "
            "until it is",
        }
    ]
    assert parent_awaited(vision, []) != []
    [awaited] = parent_awaited(vision, ["speech"])
    assert awaited.field == "spec.parentName"
    # When the parent arrives, both are ready
    cohorts = by_name(vision, cohort("org"))
    assert cohort_status(cohorts, members, vision)["conditions"][0]["reason"] == "CohortActive"
    root = cohort_status(cohorts, members, cohorts["org"])
    assert (root["childCohorts"], root["conditions"][0]["status"]) == (["vision"], "True")
    assert parent_awaited(vision, ["org"]) == []
