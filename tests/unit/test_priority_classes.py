"""scheduling.k8s.io/v1 PriorityClass and how an OME reservation's priorityClassName becomes its
priority in the CapacityQuota hub (docs/ome.md, "Priority classes")."""

from __future__ import annotations

import json
from typing import Any

import pytest

from capacity_launcher.domain.accounting.reclaim_policy import reclaim_refusal
from capacity_launcher.domain.apis.kept_fields import HUB_FIELDS_ANNOTATION
from capacity_launcher.domain.apis.priority_classes import (
    PriorityTable,
    check_change,
    check_global_default,
    parse_priority_class,
    priority_table,
)
from capacity_launcher.domain.apis.quotas import CapacityQuota
from capacity_launcher.domain.apis.served_versions import REGISTRY
from capacity_launcher.domain.errors import ConfigConflict, ConfigValidationError


def _class(name: str, value: Any, **fields: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        **fields,
    }


def _reservation(priority_class: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "resourceGroups": [
            {
                "coveredResources": ["nvidia.com/gpu"],
                "flavors": [
                    {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}
                ],
            }
        ]
    }
    if priority_class is not None:
        spec["priorityClassName"] = priority_class
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "CapacityReservation",
        "metadata": {"name": "serving"},
        "spec": spec,
    }


def _fields(error: pytest.ExceptionInfo[ConfigValidationError]) -> dict[str, str]:
    return {e.field: e.rule for e in error.value.errors}


def test_a_priority_class_applies_as_written_and_reads_back_the_same() -> None:
    document = _class(
        "serving",
        1_000_000_000,
        globalDefault=False,
        description="serving traffic",
        preemptionPolicy="Never",
    )

    applied = REGISTRY.read(document)

    assert applied.conversion.hub.value == 1_000_000_000
    assert applied.conversion.kept.not_acted_on == ("preemptionPolicy",)
    assert REGISTRY.convert(applied.conversion.hub, None, *document_key(document)) == document


def document_key(document: dict[str, Any]) -> tuple[str, str]:
    return document["apiVersion"], document["kind"]


@pytest.mark.parametrize(
    ("document", "field"),
    [
        (_class("big", 1_000_000_001), "value"),
        (_class("small", -(2**31) - 1), "value"),
        (_class("text", "100"), "value"),
        (_class("system-node-critical", 10), "metadata.name"),
        (_class("p", 1, preemptionPolicy="Sometimes"), "preemptionPolicy"),
        (_class("p", 1, globalDefault="yes"), "globalDefault"),
    ],
)
def test_a_class_outside_kubernetes_rules_is_refused_naming_the_field(
    document: dict[str, Any], field: str
) -> None:
    with pytest.raises(ConfigValidationError) as error:
        parse_priority_class(document)

    assert field in _fields(error)


def test_the_least_int32_is_a_value() -> None:
    assert parse_priority_class(_class("lowest", -(2**31))).value == -(2**31)


def test_a_reservation_gets_the_value_of_the_class_it_names() -> None:
    table = priority_table([parse_priority_class(_class("serving", 1_000_000_000))])

    applied = REGISTRY.read(_reservation("serving"), table)

    assert applied.conversion.hub.spec.priority == 1_000_000_000
    assert "spec.priorityClassName" not in applied.conversion.kept.not_acted_on


def test_a_reservation_naming_a_class_not_applied_converts_to_wait_for_it() -> None:
    """Applied in any order, as Kubernetes does: the conversion gives priority 0 and does not
    call the class not acted on (the apply stores the reservation waiting for the class, whose
    apply gives it the value: service/configuration.py)."""
    table = priority_table([parse_priority_class(_class("batch", 10))])

    applied = REGISTRY.read(_reservation("serving"), table)

    assert applied.conversion.hub.spec.priority == 0
    assert applied.conversion.kept is not None
    assert "spec.priorityClassName" not in applied.conversion.kept.not_acted_on
    assert applied.conversion.kept.fields["spec.priorityClassName"] == "serving"


def test_a_reservation_naming_no_class_gets_the_global_default_else_zero() -> None:
    default = parse_priority_class(_class("everyday", 250, globalDefault=True))
    other = parse_priority_class(_class("batch", 10))

    with_default = REGISTRY.read(_reservation(), priority_table([other, default]))
    without = REGISTRY.read(_reservation(), priority_table([other]))

    assert with_default.conversion.hub.spec.priority == 250
    assert without.conversion.hub.spec.priority == 0


def test_a_resolved_reservation_reads_back_as_written_without_hub_fields() -> None:
    table = priority_table([parse_priority_class(_class("serving", 700))])
    applied = REGISTRY.read(_reservation("serving"), table)
    hub, kept = applied.conversion.hub, applied.conversion.kept

    back = REGISTRY.convert(hub, kept, "ome.io/v1beta1", "CapacityReservation", table)

    assert back == _reservation("serving")


def test_a_priority_the_document_does_not_give_back_travels_in_the_hub_fields() -> None:
    """A reservation naming no class keeps the default's value it was applied with: read after
    that default is gone, the priority rides in the hub-fields annotation and applies back."""
    default = priority_table([parse_priority_class(_class("everyday", 250, globalDefault=True))])
    applied = REGISTRY.read(_reservation(), default)
    hub, kept = applied.conversion.hub, applied.conversion.kept

    back = REGISTRY.convert(hub, kept, "ome.io/v1beta1", "CapacityReservation", PriorityTable())
    again = REGISTRY.read(back, PriorityTable()).conversion.hub

    assert json.loads(back["metadata"]["annotations"][HUB_FIELDS_ANNOTATION]) == {
        "spec.priority": 250
    }
    assert isinstance(again, CapacityQuota)
    assert again.spec.priority == 250


def test_a_class_value_never_changes() -> None:
    stored = parse_priority_class(_class("serving", 700))

    check_change(stored, parse_priority_class(_class("serving", 700, description="same value")))
    with pytest.raises(ConfigConflict, match=r"PriorityClass serving: value: may not change"):
        check_change(stored, parse_priority_class(_class("serving", 800)))


def test_at_most_one_class_is_the_global_default() -> None:
    stored = [parse_priority_class(_class("everyday", 250, globalDefault=True))]

    check_global_default(stored, parse_priority_class(_class("everyday", 250, globalDefault=True)))
    check_global_default(stored, parse_priority_class(_class("batch", 10, globalDefault=False)))
    with pytest.raises(ConfigConflict, match=r"globalDefault: .*PriorityClass everyday is"):
        check_global_default(stored, parse_priority_class(_class("b", 10, globalDefault=True)))


def test_reclaim_between_reservations_follows_their_classes_values() -> None:
    """The resolved number is the hub priority reclaim compares (quota_admission.py)."""
    table = priority_table(
        [
            parse_priority_class(_class("serving", 1_000_000_000)),
            parse_priority_class(_class("research", -10)),
        ]
    )

    def member(name: str, priority_class: str) -> CapacityQuota:
        document = _reservation(priority_class)
        document["metadata"]["name"] = name
        document["spec"] |= {
            "cohort": "gpus",
            "allowBorrowing": True,
            "preemptionRule": {"reclaimWithinCohort": "LowerPriority"},
        }
        hub = REGISTRY.read(document, table).conversion.hub
        assert isinstance(hub, CapacityQuota)
        return hub

    serving, research = member("serving", "serving"), member("research", "research")

    assert reclaim_refusal(serving, research) is None
    refused = reclaim_refusal(research, serving)
    assert refused is not None
    assert "priority 1000000000 is not lower than research's -10" in refused
