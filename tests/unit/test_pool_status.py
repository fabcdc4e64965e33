"""Issue 17: NodePools show the conditions quotas show (Ready, ResourcesSufficient) and their use
in units (memory in Gi, cores), from the pure rules of domain/accounting/pool_status.py."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from capacity_launcher.domain.accounting.pool_status import pool_status
from capacity_launcher.domain.accounting.pool_usage import Readiness
from capacity_launcher.domain.apis.config import NodePool
from capacity_launcher.domain.apis.documents import parse_document
from capacity_launcher.domain.quantities import Resources

M5_XLARGE = Resources(cpu=Decimal(4), memory_mib=16384, gpu=0, instances=1)


def pool(limits: dict[str, str] | None = None, node_class: str = "general") -> NodePool:
    spec: dict[str, Any] = {"nodeClassRef": node_class}
    if limits is not None:
        spec["limits"] = limits
    document = {
        "apiVersion": "capacity-launcher/v1",
        "kind": "NodePool",
        "metadata": {"name": "training"},
        "spec": spec,
    }
    parsed = parse_document(document)
    assert isinstance(parsed, NodePool)
    return parsed


def conditions(status: dict[str, Any]) -> dict[str, tuple[str, str, str]]:
    return {c["type"]: (c["status"], c["reason"], c["message"]) for c in status["conditions"]}


def test_use_is_shown_in_units_and_a_pool_with_room_is_sufficient() -> None:
    status = pool_status(pool({"cpu": "64", "memory": "256Gi"}), {"general"}, M5_XLARGE * 3)
    assert status["used"] == {"cpu": "12", "memory": "48Gi", "instances": "3"}
    found = conditions(status)
    assert found["Ready"][:2] == ("True", "NodeClassFound")
    assert found["ResourcesSufficient"][:2] == ("True", "CapacityAvailable")


def test_a_pool_at_a_limit_names_the_resource_and_both_amounts() -> None:
    status = pool_status(pool({"cpu": "64", "memory": "32Gi"}), {"general"}, M5_XLARGE * 2)
    state, reason, message = conditions(status)["ResourcesSufficient"]
    assert (state, reason) == ("False", "LimitReached")
    assert "memory 32Gi of 32Gi" in message
    assert "cpu" not in message  # 8 of 64 cores still has room


def test_a_pool_whose_node_class_is_missing_is_not_ready() -> None:
    status = pool_status(pool(node_class="gone"), {"general"}, Resources.ZERO)
    state, reason, message = conditions(status)["Ready"]
    assert (state, reason) == ("False", "NodeClassNotFound")
    assert "NodeClass gone" in message
    assert status["used"] == {}


@pytest.mark.parametrize("limits", [None, {}])
def test_a_pool_without_limits_is_sufficient_as_unlimited(limits: dict[str, str] | None) -> None:
    status = pool_status(pool(limits), {"general"}, M5_XLARGE * 100)
    assert conditions(status)["ResourcesSufficient"][:2] == ("True", "Unlimited")


def test_a_pool_over_limits_unready_says_new_launches_are_held_and_counts_them() -> None:
    # seed-003's limits: room in cpu and memory, and at most 20% of its instances unready
    seed = pool({"cpu": "1000", "memory": "1000Gi", "unready": "20%"})
    # Two instances launched (a live lease counts whole), neither ready yet
    status = pool_status(seed, {"general"}, M5_XLARGE * 2, Readiness(unready=2, instances=2))

    assert status["used"]["unready"] == "2"
    state, reason, message = conditions(status)["ResourcesSufficient"]
    assert (state, reason) == ("False", "UnreadyLimitReached")
    assert message.startswith("new launches are held by limits.unready: ")
    assert "limits.unready 20%: 2 of its instances" in message
    assert "more than the 0 it allows" in message


def test_a_pool_within_limits_unready_has_room_and_ready_instances_are_not_counted() -> None:
    seed = pool({"cpu": "1000", "unready": 1})

    status = pool_status(seed, {"general"}, M5_XLARGE * 5, Readiness(unready=1, instances=5))
    ready = pool_status(seed, {"general"}, M5_XLARGE * 5, Readiness(unready=0, instances=5))

    assert status["used"]["unready"] == "1"
    assert conditions(status)["ResourcesSufficient"][:2] == ("True", "CapacityAvailable")
    assert "unready" not in ready["used"]
