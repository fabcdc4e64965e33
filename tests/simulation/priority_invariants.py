"""`scheduling.k8s.io/v1` PriorityClasses and the OME reservations naming them (docs/ome.md,
"Priority classes"), judged on the state table as moto holds it (no call, no fault):

- **A stored reservation names a stored PriorityClass and has its value, or waits for it**
  (every step; documents apply in any order): a CapacityQuota item whose kept
  `spec.priorityClassName` is a stored class has that class's value as its priority and is not
  marked waiting; one naming a class not stored is marked waiting for it, with priority 0. So a
  class's apply resolved every reservation applied before it.
- **A refused apply or delete changes nothing**: the PriorityClass and CapacityQuota partitions
  and their version items are the same after a refused operator action as before it.
- **The rules refuse what they say**: applying a stored class with another `value`, a second
  `globalDefault` and deleting a class a stored reservation names are refused; a reservation
  naming a class not stored is not (judged on what was stored just before; an allowed action
  that fails, say on a transaction conflict, is counted, not judged).
- **A reservation applies whatever class it names** (Kubernetes' order-free apply): its apply
  is never refused for naming a class not stored.
- **A reservation's priority is its class's value** (the global default's when it names none,
  else 0; 0 while its class is not stored), as stored in its hub at the apply.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from capacity_launcher.adapters.config_items import QUOTA_SET_KEY
from capacity_launcher.domain.errors import ConfigValidationError
from capacity_launcher_cli.config_commands import ApplyError

if TYPE_CHECKING:
    from tests.simulation.invariants import Invariants

PRIORITY_CLASS = "PriorityClass"
QUOTA = "CapacityQuota"
CLASS_PATH = "spec.priorityClassName"
NAMES_EXISTING = "a stored reservation has its PriorityClass's value, or waits for the class"
UNRESOLVED = "unresolvedPriorityClass"
UNCHANGED = "a refused PriorityClass or reservation change changes nothing"
REFUSED = "PriorityClass rules refuse what they say"
PRIORITY = "a reservation's priority is its PriorityClass's value"
ORDER_FREE = "a reservation applies whether or not the PriorityClass it names is stored"
VERSIONS = (("PriorityClasses", "Version"), QUOTA_SET_KEY)

Snapshot = dict[str, dict[str, dict[str, Any]]]


def named_class(item: dict[str, Any]) -> str | None:
    """The class a stored reservation item names (its kept fields, read as stored)."""
    try:
        kept = json.loads(str(item.get("kept") or "{}"))
    except ValueError:
        return None
    found = (kept.get("fields") or {}).get(CLASS_PATH)
    return found if isinstance(found, str) else None


def stored_classes(snapshot: Snapshot) -> dict[str, dict[str, Any]]:
    """name → the stored PriorityClass document."""
    return {
        name: json.loads(str(item["document"]))
        for name, item in snapshot[PRIORITY_CLASS].items()
        if "document" in item
    }


def users_of(snapshot: Snapshot, name: str) -> list[str]:
    return sorted(q for q, item in snapshot[QUOTA].items() if named_class(item) == name)


def why_refused(snapshot: Snapshot, *, document: dict[str, Any]) -> str | None:
    """Why applying ``document`` (a PriorityClass or an OME reservation) must be refused, given
    what was stored; None when nothing says it must."""
    classes = stored_classes(snapshot)
    if document["kind"] == PRIORITY_CLASS:
        name = document["metadata"]["name"]
        old = classes.get(name)
        if old is not None and old.get("value") != document["value"]:
            return f"value {old.get('value')} -> {document['value']}"
        others = [n for n, c in classes.items() if c.get("globalDefault") and n != name]
        if document.get("globalDefault") and others:
            return f"a second global default beside {others[0]}"
        return None
    return None  # a reservation naming a class not stored waits for it


def priority_meant(snapshot: Snapshot, named: str | None) -> int:
    classes = stored_classes(snapshot)
    if named is not None:
        return int(classes[named]["value"]) if named in classes else 0
    defaults = [c for c in classes.values() if c.get("globalDefault")]
    return int(defaults[0]["value"]) if defaults else 0


class PriorityInvariants:
    def __init__(self, invariants: Invariants) -> None:
        self.base = invariants
        self.world = invariants.world
        self.checks = invariants.checks
        # Classes applied since the last sync that finished every part: a reservation may still
        # wait for one when storing it failed during the class's apply (the apply warns); the
        # sync's minute resolves it (Configuration.resolve_waiting_reservations).
        self.resolving: set[str] = set()

    def synced(self) -> None:
        """A sync run finished every part: what waited for an applied class is resolved."""
        self.resolving.clear()

    def snapshot(self) -> Snapshot:
        found = {kind: self.world.partition(kind) for kind in (PRIORITY_CLASS, QUOTA)}
        for pk, sk in VERSIONS:
            found[f"{pk}/{sk}"] = {sk: self.world.partition(pk).get(sk, {})}
        return found

    def every_step(self) -> None:
        snapshot = self.snapshot()
        classes = stored_classes(snapshot)
        for quota, item in snapshot[QUOTA].items():
            named = named_class(item)
            if named is None:
                continue
            self.checks[NAMES_EXISTING] += 1
            stored = named in classes
            self.checks[f"seen: reservation {'resolved' if stored else 'waiting'}"] += 1
            waits = item.get(UNRESOLVED)
            priority = json.loads(str(item.get("document") or "{}"))["spec"].get("priority", 0)
            meant = (None, int(classes[named]["value"])) if stored else (named, 0)
            if stored and named in self.resolving and (waits, priority) == (named, 0):
                self.checks["seen: reservation resolved at the next sync"] += 1
                continue
            if (waits, priority) != meant:
                self.base._violate(
                    NAMES_EXISTING,
                    f"reservation {quota} names {named} (stored: {stored}): waits for {waits}, "
                    f"priority {priority}",
                )

    def judged(
        self, action: str, before: Snapshot, must_refuse: str | None, error: str | None
    ) -> None:
        """One operator action on classes or reservations: `error` is how it was refused."""
        words = action.split()
        if error is None and words[:2] == ["apply", "PriorityClass"] and len(words) > 2:
            self.resolving.add(words[2])
        self.checks[REFUSED] += must_refuse is not None
        if must_refuse is not None and error is None:
            self.base._violate(REFUSED, f"{action} was applied: {must_refuse}")
        if error is None:
            return
        self.checks[f"seen: refused: {' '.join(action.split()[:2])}"] += 1
        self.checks[UNCHANGED] += 1
        after = self.snapshot()
        changed = sorted(k for k in before if before[k] != after[k])
        if changed:
            self.base._violate(UNCHANGED, f"{action} refused ({error}), yet changed {changed}")

    def reservation_refused(self, action: str, error: Exception) -> None:
        """A reservation's apply failed: never for naming a class (invalid documents are not
        drawn, so a refusal of the document, the CLI's or the service's, is the class's), only
        on conflicts that say try again."""
        self.checks[ORDER_FREE] += 1
        if isinstance(error, ConfigValidationError | ApplyError):
            self.base._violate(ORDER_FREE, f"{action} was refused: {error}")

    def reservation_applied(self, name: str, before: Snapshot, named: str | None) -> None:
        self.checks[PRIORITY] += 1
        meant = priority_meant(before, named)
        stored = self.world.partition(QUOTA).get(name, {}).get("document")
        priority = json.loads(str(stored or "{}")).get("spec", {}).get("priority", 0)
        if priority != meant:
            self.base._violate(
                PRIORITY, f"reservation {name} (class {named}): priority {priority}, meant {meant}"
            )
