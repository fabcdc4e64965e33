"""A CapacityQuota's status: capacity, allocatable, borrowed, lent, use by requester, conditions."""

from __future__ import annotations

from typing import Any

from capacity_launcher.domain.accounting.quota_status import quota_status
from capacity_launcher.domain.apis.quotas import CapacityQuota, parse_quota
from capacity_launcher.domain.quantities import GPU, MEMORY, Resources

POOL = "gpu-training"
GIB = 1024


def quota(name: str, requesters: list[str], gpus: str, memory: str, **spec: Any) -> CapacityQuota:
    return parse_quota(
        {
            "apiVersion": "capacity-launcher/v1",
            "kind": "CapacityQuota",
            "metadata": {"name": name},
            "spec": {
                "requesters": requesters,
                "cohort": "research",
                "allowBorrowing": True,
                "resourceGroups": [
                    {
                        "coveredResources": [GPU, MEMORY],
                        "flavors": [
                            {
                                "name": POOL,
                                "resources": [
                                    {"name": GPU, "nominalQuota": gpus},
                                    {"name": MEMORY, "nominalQuota": memory},
                                ],
                            }
                        ],
                    }
                ],
                **spec,
            },
        }
    )


def by_flavor(table: list[dict[str, Any]]) -> dict[str, str]:
    [flavor] = table
    assert flavor["name"] == POOL
    return {r["name"]: r["total"] for r in flavor["resources"]}


def test_a_borrower_and_its_lender_in_resource_units() -> None:
    # Given team-a (16 GPUs, 2Ti) lends to team-b (8 GPUs, 1Ti), which uses 12 GPUs and 1536Gi
    team_a = quota("team-a", ["team-a"], "16", "2Ti", priority=10)
    team_b = quota("team-b", ["team-b", "ci"], "8", "1Ti")
    usage = {
        ("team-b", POOL): Resources(gpu=8, memory_mib=1024 * GIB),
        ("ci", POOL): Resources(gpu=4, memory_mib=512 * GIB),
        ("team-a", POOL): Resources(gpu=2, memory_mib=256 * GIB),
    }
    quotas = [team_a, team_b]

    # When both statuses are computed
    borrower = quota_status(team_b, quotas, usage, {POOL})
    lender = quota_status(team_a, quotas, usage, {POOL})

    # Then amounts carry units and the borrowing shows on both sides
    assert by_flavor(borrower["capacity"]) == {GPU: "8", MEMORY: "1Ti"}
    assert by_flavor(borrower["usage"]) == {GPU: "12", MEMORY: "1536Gi"}
    assert by_flavor(borrower["borrowed"]) == {GPU: "4", MEMORY: "512Gi"}
    assert by_flavor(lender["lent"]) == {GPU: "4", MEMORY: "512Gi"}
    assert by_flavor(lender["borrowed"]) == {GPU: "0", MEMORY: "0"}
    # team-a may still use the cohort's free 24 - 14 = 10 GPUs
    assert by_flavor(lender["allocatable"]) == {GPU: "10", MEMORY: "1280Gi"}
    assert borrower["associationUsages"] == [
        {"name": "team-b", "usage": [{"name": POOL, "resources": [
            {"name": GPU, "total": "8"}, {"name": MEMORY, "total": "1Ti"}]}]},
        {"name": "ci", "usage": [{"name": POOL, "resources": [
            {"name": GPU, "total": "4"}, {"name": MEMORY, "total": "512Gi"}]}]},
    ]  # fmt: skip
    ready, sufficient = borrower["conditions"]
    assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "True", "QuotaActive")
    assert (sufficient["status"], sufficient["reason"]) == ("True", "CapacityAvailable")


def test_conditions_name_a_missing_pool_and_an_exhausted_resource() -> None:
    # Given a quota without borrowing, at its nominal GPUs, in a pool that does not exist
    team_a = quota("team-a", ["team-a"], "8", "1Ti", allowBorrowing=False)
    usage = {("team-a", POOL): Resources(gpu=8)}

    status = quota_status(team_a, [team_a], usage, set())

    ready, sufficient = status["conditions"]
    assert ready == {
        "type": "Ready",
        "status": "False",
        "reason": "FlavorNotFound",
        "message": f"NodePool(s) {POOL} do not exist: nothing is admitted there",
    }
    assert sufficient["status"] == "False"
    assert sufficient["reason"] == "QuotaExhausted"
    assert f"{POOL}/{GPU}" in sufficient["message"]
    assert by_flavor(status["allocatable"])[GPU] == "0"


def test_a_stored_conflict_makes_both_quotas_not_ready() -> None:
    team_a = quota("team-a", ["shared"], "8", "1Ti")
    team_b = quota("team-b", ["shared"], "8", "1Ti")

    for q in (team_a, team_b):
        ready = quota_status(q, [team_a, team_b], {}, {POOL})["conditions"][0]
        assert (ready["status"], ready["reason"]) == ("False", "RequesterConflict")


def test_allocatable_is_bounded_by_a_group_limit_across_pools() -> None:
    document = {
        "apiVersion": "capacity-launcher/v1",
        "kind": "CapacityQuota",
        "metadata": {"name": "team-a"},
        "spec": {
            "requesters": ["team-a"],
            "resourceGroups": [
                {
                    "coveredResources": [GPU],
                    "limits": {GPU: "16"},
                    "flavors": [
                        {"name": "pool-a", "resources": [{"name": GPU, "nominalQuota": "16"}]},
                        {"name": "pool-b", "resources": [{"name": GPU, "nominalQuota": "16"}]},
                    ],
                }
            ],
        },
    }
    budget = parse_quota(document)

    status = quota_status(budget, [budget], {("team-a", "pool-a"): Resources(gpu=12)}, set())

    allocatable = {f["name"]: f["resources"][0]["total"] for f in status["allocatable"]}
    assert allocatable == {"pool-a": "4", "pool-b": "4"}
