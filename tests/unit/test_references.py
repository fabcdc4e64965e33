"""Documents applied in any order (issue 40), in the pure rules: what a document waits for
(domain/apis/references.py), the conditions that say so (pool_status.py, quota_status.py) and
the refusal of a request associated with a reservation waiting for its PriorityClass
(quota_sets.py)."""

from __future__ import annotations

from typing import Any

from capacity_launcher.domain.accounting.pool_status import pool_status
from capacity_launcher.domain.accounting.quota_status import (
    reference_conditions,
    with_conditions,
)
from capacity_launcher.domain.apis.quota_sets import QuotaSet, unresolved_refusal
from capacity_launcher.domain.apis.quotas import CapacityQuota, parse_quota
from capacity_launcher.domain.apis.references import waiting_for
from capacity_launcher.domain.quantities import Resources
from tests.unit.test_pool_status import conditions, pool


def _reservation(name: str, *flavors: str) -> CapacityQuota:
    return parse_quota(
        {
            "apiVersion": "capacity-launcher/v1",
            "kind": "CapacityQuota",
            "metadata": {"name": name},
            "spec": {
                "requesterPrefixes": [f"capacityreservation/{name}/"],
                "resourceGroups": [
                    {
                        "coveredResources": ["nvidia.com/gpu"],
                        "flavors": [
                            {
                                "name": f,
                                "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}],
                            }
                            for f in flavors
                        ],
                    }
                ],
            },
        }
    )


def test_a_pool_before_its_class_waits_for_it_at_its_field_and_says_so_as_karpenter() -> None:
    early = pool(node_class="later")
    [missing] = waiting_for(early, node_classes={"general"})
    assert missing.field == "spec.nodeClassRef"
    assert "NodeClass 'later' is not applied yet" in missing.rule
    assert waiting_for(early, node_classes={"later"}) == []
    before = conditions(pool_status(early, {"general"}, Resources.ZERO))
    after = conditions(pool_status(early, {"later"}, Resources.ZERO))
    assert before["NodeClassReady"][:2] == ("False", "NodeClassNotFound")
    assert after["NodeClassReady"][:2] == ("True", "NodeClassFound")


def test_a_quota_waits_for_each_pool_and_for_its_class_at_their_fields() -> None:
    quota = _reservation("serving", "h100", "a100")
    found = waiting_for(quota, node_pools={"h100"}, unresolved_class="high")
    assert [f.field for f in found] == [
        "spec.resourceGroups[0].flavors[1].name",
        "spec.priorityClassName",
    ]
    assert "NodePool 'a100'" in found[0].rule and "PriorityClass 'high'" in found[1].rule
    assert waiting_for(quota, node_pools={"h100", "a100"}) == []


def _types(found: list[Any]) -> dict[str, tuple[bool, str]]:
    return {c.type: (c.status, c.reason) for c in found}


def test_a_quota_s_reference_conditions_name_the_first_missing_and_turn_true() -> None:
    quota = _reservation("serving", "h100")
    waiting = _types(reference_conditions(quota, [quota], {"h100"}, "high", "high"))
    assert waiting == {
        "Ready": (False, "PriorityClassNotFound"),
        "PriorityClassReady": (False, "PriorityClassNotFound"),
    }
    no_pool = _types(reference_conditions(quota, [quota], set(), "high", "high"))
    assert no_pool["Ready"] == (False, "FlavorNotFound")
    resolved = _types(reference_conditions(quota, [quota], {"h100"}, "high", None))
    assert resolved == {
        "Ready": (True, "QuotaActive"),
        "PriorityClassReady": (True, "PriorityClassFound"),
    }
    # Naming no class: no PriorityClassReady at all
    assert set(_types(reference_conditions(quota, [quota], {"h100"}))) == {"Ready"}


def test_conditions_read_now_replace_the_stored_ones_of_their_type_and_keep_the_rest() -> None:
    stored = {
        "conditions": [
            {"type": "Ready", "status": "False", "reason": "FlavorNotFound", "message": "old"},
            {"type": "ResourcesSufficient", "status": "True", "reason": "x", "message": "y"},
        ],
        "cohort": "c",
    }
    quota = _reservation("serving", "h100")
    fresh = with_conditions(stored, reference_conditions(quota, [quota], {"h100"}, "high"))
    assert [(c["type"], c["status"]) for c in fresh["conditions"]] == [
        ("Ready", "True"),
        ("ResourcesSufficient", "True"),
        ("PriorityClassReady", "True"),
    ]
    assert fresh["cohort"] == "c"


def test_a_request_associated_with_a_waiting_reservation_is_refused_naming_the_class() -> None:
    serving, other = _reservation("serving", "h100"), _reservation("other", "h100")
    waiting = QuotaSet(1, (serving, other), {}, {"serving": "high"})
    refusal = unresolved_refusal(waiting, "capacityreservation/serving/train")
    assert refusal is not None
    assert refusal.startswith("capacityReservation: 'serving' is not ready")
    assert "PriorityClass 'high' (spec.priorityClassName)" in refusal
    assert unresolved_refusal(waiting, "capacityreservation/other/train") is None
    assert unresolved_refusal(waiting, "team-a") is None
    assert unresolved_refusal(QuotaSet(2, (serving,)), "capacityreservation/serving/x") is None
