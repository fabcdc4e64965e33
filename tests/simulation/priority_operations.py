"""What operators do with PriorityClasses and the OME reservations naming them: apply a class
(its value kept or changed, now and then as the global default), delete one (named by a
reservation or not), and apply or delete an OME `CapacityReservation` naming a class (applied,
not applied, or none). Each action is judged by priority_invariants.py.

The reservations are OME-shaped quotas (`requesterPrefixes`, no `requesters`), over a flavor no
NodePool is named after and in a cohort of their own: the team quotas' invariants
(capacity_invariants.py) know their pools and cohort by name, so these reservations govern no
launch here; what they exercise is the classes' rules and the store's transactions.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from capacity_launcher.adapters.priority_class_store import PriorityClassStore
from capacity_launcher.settings import get_settings
from capacity_launcher.startup import system_clock
from tests.simulation.priority_invariants import (
    PRIORITY_CLASS,
    Snapshot,
    stored_classes,
    users_of,
    why_refused,
)
from tests.simulation.versions import apply_as_written

if TYPE_CHECKING:
    from tests.simulation.scheduler import Simulation

CLASSES = ("sim-critical", "sim-normal", "sim-batch")
VALUES = (1000, 500, 100, 0, -10)
RESERVATIONS = ("resv-a", "resv-b")
OME_FLAVOR = "ome-flavor"  # no NodePool has this name
OME_COHORT = "sim-ome"
MISSING_CLASS = "sim-missing"


def class_document(name: str, value: int, global_default: bool, note: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        "globalDefault": global_default,
        "description": note,
    }


def reservation_document(name: str, named: str | None, gpus: int) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "resourceGroups": [
            {
                "coveredResources": ["nvidia.com/gpu"],
                "flavors": [
                    {
                        "name": OME_FLAVOR,
                        "resources": [{"name": "nvidia.com/gpu", "nominalQuota": gpus}],
                    }
                ],
            }
        ],
        "cohort": OME_COHORT,
    }
    if named is not None:
        spec["priorityClassName"] = named
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "CapacityReservation",
        "metadata": {"name": name},
        "spec": spec,
    }


def _gpus(count: int) -> dict[str, Any]:
    return {"name": "nvidia.com/gpu", "nominalQuota": count}


def classes_store(sim: Simulation) -> PriorityClassStore:
    return PriorityClassStore(
        get_settings().state_table_name, sim.world.dynamodb, clock=system_clock
    )


def _attempt(
    sim: Simulation,
    action: str,
    must_refuse: Callable[[Snapshot], str | None],
    run: Callable[[], Any],
    document: dict[str, Any] | None = None,
) -> str:
    """Run one operator action and judge it (`must_refuse`: why it must be refused, given what
    was stored before); returns its outcome."""
    priority = sim.invariants.priority
    before = priority.snapshot()
    must = must_refuse(before)
    try:
        run()
    except Exception as error:
        priority.judged(action, before, must, type(error).__name__)
        if document is not None and document["kind"] == "CapacityReservation":
            priority.reservation_refused(action, error)
        return type(error).__name__
    priority.judged(action, before, must, None)
    if document is not None and document["kind"] == "CapacityReservation":
        named = document["spec"].get("priorityClassName")
        priority.reservation_applied(document["metadata"]["name"], before, named)
    return "done"


def _apply(sim: Simulation, action: str, document: dict[str, Any]) -> str:
    """Apply as `capacity-launcher apply -f` does, the PriorityClasses resolved."""
    run = partial(apply_as_written, sim.store, document, classes_store(sim))
    return _attempt(sim, action, partial(why_refused, document=document), run, document)


def apply_priority_class(sim: Simulation, rng: random.Random) -> str:
    name = rng.choice(CLASSES)
    stored = stored_classes(sim.invariants.priority.snapshot()).get(name)
    old = None if stored is None else int(stored["value"])
    keep = old is not None and rng.random() < 0.4
    # Kept: its other fields change (allowed); drawn: a value other than the stored one.
    value = old if keep and old is not None else rng.choice([v for v in VALUES if v != old])
    document = class_document(name, value, rng.random() < 0.2, f"note {rng.randrange(100)}")
    outcome = _apply(sim, f"apply PriorityClass {name} value {value}", document)
    return f"{'same' if keep else 'drawn'} value: {outcome}"


def delete_priority_class(sim: Simulation, rng: random.Random) -> str:
    name = rng.choice(CLASSES)

    def named_by(before: Snapshot) -> str | None:
        users = users_of(before, name)
        return f"named by {', '.join(users)}" if users else None

    return _attempt(
        sim,
        f"delete PriorityClass {name}",
        named_by,
        partial(sim.store.delete, PRIORITY_CLASS, name),
    )


def apply_reservation(sim: Simulation, rng: random.Random) -> str:
    name = rng.choice(RESERVATIONS)
    named = rng.choice((*CLASSES, None, MISSING_CLASS))
    document = reservation_document(name, named, rng.randint(1, 8))
    outcome = _apply(sim, f"apply reservation {name} naming {named}", document)
    return f"naming {'a missing class' if named == MISSING_CLASS else named}: {outcome}"


def delete_reservation(sim: Simulation, rng: random.Random) -> str:
    name = rng.choice(RESERVATIONS)
    run = partial(sim.store.delete, "CapacityQuota", name)
    return _attempt(sim, f"delete reservation {name}", lambda _: None, run)


def bootstrap_priority_classes(sim: Simulation, rng: random.Random) -> None:
    """Every class applied with a value drawn (none the global default), and one reservation
    naming one of them: each judged as any other apply."""
    for name in CLASSES:
        document = class_document(name, rng.choice(VALUES), False, "bootstrap")
        _apply(sim, f"apply PriorityClass {name}", document)
    document = reservation_document(RESERVATIONS[0], rng.choice(CLASSES), rng.randint(1, 8))
    _apply(sim, f"apply reservation {RESERVATIONS[0]}", document)


PRIORITY_OPERATIONS = {
    "apply_priority_class": apply_priority_class,
    "delete_priority_class": delete_priority_class,
    "apply_reservation": apply_reservation,
    "delete_reservation": delete_reservation,
}
PRIORITY_WEIGHTS = {
    "apply_priority_class": 4,
    "delete_priority_class": 2,
    "apply_reservation": 3,
    "delete_reservation": 1,
}
