"""PriorityClasses in the state table: value immutable, one global default, and a class a stored
reservation names can be neither missing when the reservation is applied nor deleted after."""

from __future__ import annotations

from typing import Any

import pytest

from capacity_launcher.domain.apis.priority_classes import parse_priority_class, priority_table
from capacity_launcher.domain.apis.served_versions import REGISTRY
from capacity_launcher.domain.errors import ConfigConflict, ConfigValidationError, NotFound
from tests.support.cloud import Cloud


def _class(name: str, value: int, **fields: Any) -> Any:
    return parse_priority_class(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
            **fields,
        }
    )


def _reservation(name: str, priority_class: str) -> dict[str, Any]:
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "CapacityReservation",
        "metadata": {"name": name},
        "spec": {
            "priorityClassName": priority_class,
            "resourceGroups": [
                {
                    "coveredResources": ["nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": "h100",
                            "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}],
                        }
                    ],
                }
            ],
        },
    }


def test_a_class_is_stored_and_its_value_cannot_change(cloud: Cloud) -> None:
    classes = cloud.adapters().config_store().priority_classes()
    configuration = cloud.adapters().configuration()
    configuration.apply(_class("serving", 700))
    configuration.apply(_class("serving", 700, description="described now"))

    with pytest.raises(ConfigConflict, match="value: may not change"):
        configuration.apply(_class("serving", 800))

    assert classes.priority_class("serving").value == 700
    assert classes.priority_class("serving").description == "described now"


def test_a_second_global_default_is_refused(cloud: Cloud) -> None:
    classes = cloud.adapters().config_store().priority_classes()
    configuration = cloud.adapters().configuration()
    configuration.apply(_class("everyday", 250, globalDefault=True))

    with pytest.raises(ConfigConflict, match="globalDefault"):
        configuration.apply(_class("other", 10, globalDefault=True))

    assert classes.table().default_value == 250
    assert [c.name for c in classes.priority_classes()] == ["everyday"]


def test_a_class_named_by_a_reservation_is_not_deleted(cloud: Cloud) -> None:
    store = cloud.adapters().config_store()
    classes = store.priority_classes()
    configuration = cloud.adapters().configuration()
    configuration.apply(_class("serving", 700))
    applied = REGISTRY.read(_reservation("inference", "serving"), classes.table())
    configuration.apply(applied.conversion.hub, applied.conversion.kept)
    assert store.capacity_quota("inference").spec.priority == 700

    with pytest.raises(ConfigConflict, match=r"named by reservation\(s\) inference"):
        configuration.delete("PriorityClass", "serving")

    cloud.delete("CapacityQuota", "inference")
    configuration.delete("PriorityClass", "serving")
    with pytest.raises(NotFound):
        classes.priority_class("serving")


def test_a_reservation_whose_class_went_missing_is_refused_by_the_store(cloud: Cloud) -> None:
    """The class existed when the reservation was read, then was deleted before it was stored:
    the store's transaction checks the class, so nothing names a missing class."""
    store = cloud.adapters().config_store()
    classes = store.priority_classes()
    configuration = cloud.adapters().configuration()
    configuration.apply(_class("serving", 700))
    table = priority_table(classes.priority_classes())
    configuration.delete("PriorityClass", "serving")
    applied = REGISTRY.read(_reservation("inference", "serving"), table)

    with pytest.raises(ConfigValidationError, match=r"spec.priorityClassName: .*'serving' is not"):
        cloud.adapters().configuration().apply(applied.conversion.hub, applied.conversion.kept)

    with pytest.raises(NotFound):
        store.capacity_quota("inference")
