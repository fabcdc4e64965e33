"""PriorityClasses in the state table: value immutable, one global default, a class a stored
reservation names is not deleted, and a reservation applied before its class waits for it and
takes its value when the class is applied (docs/ome.md, "Applied in any order")."""

from __future__ import annotations

from typing import Any

import pytest

from capacity_launcher.adapters import aws
from capacity_launcher.adapters.config_store import ConfigStore
from capacity_launcher.domain.apis.priority_classes import parse_priority_class, priority_table
from capacity_launcher.domain.apis.served_versions import REGISTRY
from capacity_launcher.domain.errors import ConfigConflict, NotFound, Transient
from capacity_launcher.service.configuration import Configuration
from capacity_launcher.startup import system_clock
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


def test_a_reservation_whose_class_went_missing_is_stored_waiting_then_resolved(
    cloud: Cloud,
) -> None:
    """The class existed when the reservation was read, then was deleted before it was stored:
    the write reads the class itself, so the reservation is stored waiting for it (priority 0),
    not with the deleted class's value; the class applied again gives it its value."""
    store = cloud.adapters().config_store()
    classes = store.priority_classes()
    configuration = cloud.adapters().configuration()
    configuration.apply(_class("serving", 700))
    table = priority_table(classes.priority_classes())
    configuration.delete("PriorityClass", "serving")
    applied = REGISTRY.read(_reservation("inference", "serving"), table)

    waiting = configuration.apply(applied.conversion.hub, applied.conversion.kept)

    assert [w.field for w in waiting] == ["spec.resourceGroups[0].flavors[0].name", _CLASS]
    assert store.capacity_quota("inference").spec.priority == 0
    assert store.quota_set(fresh=True).unresolved == {"inference": "serving"}

    configuration.apply(_class("serving", 800))

    assert store.capacity_quota("inference").spec.priority == 800
    assert store.quota_set(fresh=True).unresolved == {}
    with pytest.raises(ConfigConflict, match=r"named by reservation\(s\) inference"):
        configuration.delete("PriorityClass", "serving")


def test_a_reservation_written_while_its_class_is_applied_is_resolved_either_way(
    cloud: Cloud,
) -> None:
    """The class's apply lands between the reservation's read (no class) and its write: the
    write is conditioned on the classes' version, so it reads again and takes the value."""
    db = aws.client("dynamodb")
    store = ConfigStore(cloud.names.state_table, db, clock=system_clock)
    configuration = Configuration(store, store.priority_classes())
    applied = REGISTRY.read(_reservation("inference", "serving"), priority_table([]))
    raced: list[str] = []

    def class_first(**kwargs: Any) -> None:
        writes_quota = _writes_a_quota(kwargs)
        if writes_quota and not raced:
            raced.append("class")
            other = cloud.adapters().configuration()
            other.apply(_class("serving", 700))

    db.meta.events.register("before-parameter-build.dynamodb.TransactWriteItems", class_first)
    waiting = configuration.apply(applied.conversion.hub, applied.conversion.kept)

    assert raced == ["class"]
    assert [w.field for w in waiting] == ["spec.resourceGroups[0].flavors[0].name"]
    assert store.capacity_quota("inference").spec.priority == 700
    assert store.quota_set(fresh=True).unresolved == {}


_CLASS = "spec.priorityClassName"


def _writes_a_quota(kwargs: dict[str, Any]) -> bool:
    """Whether a TransactWriteItems about to be sent puts a CapacityQuota item."""
    items = kwargs.get("params", {}).get("TransactItems", [])
    return any(
        i.get("Put", {}).get("Item", {}).get("pk", {}).get("S") == "CapacityQuota" for i in items
    )


def test_a_class_whose_reservations_could_not_be_resolved_is_applied_and_the_sync_resolves_them(
    cloud: Cloud,
) -> None:
    """The class is stored, then storing a reservation waiting for it fails (a transient
    DynamoDB failure, as the simulation's queue seed 4 drew at step 26): the apply answered
    ConfigConflict with the class stored (a refusal that changed something) and the reservation
    stayed waiting, its requests Rejected naming a class that exists, until someone applied
    again. Now the apply warns, and the sync's minute resolves it."""
    store = cloud.adapters().config_store()
    configuration = cloud.adapters().configuration()
    applied = REGISTRY.read(_reservation("inference", "serving"), priority_table([]))
    configuration.apply(applied.conversion.hub, applied.conversion.kept)
    assert store.quota_set(fresh=True).unresolved == {"inference": "serving"}
    db = aws.client("dynamodb")
    failed: list[str] = []

    def fail_the_reservation_once(**kwargs: Any) -> None:
        writes_quota = _writes_a_quota(kwargs)
        if writes_quota and not failed:
            failed.append("reservation")
            raise Transient("TransactWriteItems failed transiently (TransactionCanceledException)")

    db.meta.events.register(
        "before-parameter-build.dynamodb.TransactWriteItems", fail_the_reservation_once
    )
    warnings = configuration.apply(_class("serving", 700))
    db.meta.events.unregister(
        "before-parameter-build.dynamodb.TransactWriteItems", fail_the_reservation_once
    )

    assert failed == ["reservation"]
    assert [w.field for w in warnings] == ["metadata.name"]
    assert "the sync resolves them within a minute" in warnings[0].rule
    assert [c.name for c in store.priority_classes().priority_classes()] == ["serving"]
    assert store.quota_set(fresh=True).unresolved == {"inference": "serving"}
    # When the sync's minute runs
    report = cloud.adapters().reservation_sync().run()
    # Then the reservation takes the class's value
    assert "priority-classes" not in report.failed
    assert store.quota_set(fresh=True).unresolved == {}
    assert store.capacity_quota("inference").spec.priority == 700


def test_the_sync_s_minute_reads_the_classes_only_when_a_reservation_waits_for_one(
    cloud: Cloud,
) -> None:
    # Given two classes applied, and a reservation naming one, resolved at its apply
    configuration = cloud.adapters().configuration()
    configuration.apply(_class("serving", 700))
    configuration.apply(_class("batch", 100))
    applied = REGISTRY.read(_reservation("inference", "serving"), priority_table([]))
    configuration.apply(applied.conversion.hub, applied.conversion.kept)
    read: list[str] = []

    def note(params: dict[str, Any], **_: Any) -> None:
        read.append(params.get("ExpressionAttributeValues", {}).get(":kind", {}).get("S", "?"))

    aws.client("dynamodb").meta.events.register(
        "provide-client-params.dynamodb.Query", lambda params, **kw: note(params)
    )
    # When the sync's minute looks for reservations waiting for a class applied since
    assert cloud.adapters().configuration().resolve_waiting_reservations() == []
    # Then it read the quotas once and, none waiting, no class (issue 38: the classes and the
    # quotas once per class were read each minute)
    assert read == ["CapacityQuota"]
