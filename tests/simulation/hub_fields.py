"""The hub-fields annotation, drawn from the seed (issue 34, item 2): hostile applies that try to
set, through `metadata.annotations["capacity-launcher/hub-fields"]`, what the document's own
version expresses (a NodePool's limits or weight, a quota's priority or preemption, an object's
`metadata.name`), and legitimate ones: `get | apply` of a stored object in a served version,
whose annotation carries only what that version has no place for (docs/api-versions.md).

Before the fix the annotation set whatever it named: a NodePool applied as its visible document
with `spec.limits` in the annotation stored (and enforced) the annotation's limits. The
invariants (docs/simulation.md, "Served versions"):
- a hostile annotation is refused, and what is stored (and the limits a lease checks) is what
  the visible document says;
- a stored object applied as it reads back in a served version is accepted, stores the same
  object, and reads back in that version.
"""

from __future__ import annotations

import copy
import json
import random
from typing import TYPE_CHECKING, Any

from capacity_launcher.adapters.config_items import kept_of
from capacity_launcher.domain.apis.documents import parse_document
from capacity_launcher.domain.apis.kept_fields import HUB_FIELDS_ANNOTATION
from capacity_launcher.domain.apis.priority_classes import PriorityTable
from capacity_launcher.domain.apis.served_versions import REGISTRY
from capacity_launcher.domain.errors import ConfigValidationError
from capacity_launcher.domain.quantities import PoolLimits, limits_token
from capacity_launcher_cli.config_commands import ApplyError, SourceDocument, validate_steps
from tests.simulation.operations import POOLS, QUOTAS
from tests.simulation.priority_operations import classes_store
from tests.simulation.versions import SOURCE, apply_as_written, stored_as_meant, written_as

if TYPE_CHECKING:
    from tests.simulation.scheduler import Simulation

HOSTILE = "a hostile hub-fields annotation is refused"
VISIBLE = "stored == the visible document (hub-fields)"
ENFORCED = "limits enforced == the visible document's"
ROUND_TRIP = "get | apply stores the object unchanged"
READS_BACK = "an applied object reads back in its version"
POLICIES = ("Never", "LowerPriority", "Any")


def _hostile_field(kind: str, name: str, hub: dict[str, Any], rng: random.Random) -> Any:
    """(path, value): what the visible document says otherwise, which the annotation may not
    set (its version expresses it, or it is metadata)."""
    spec = hub["spec"]
    if kind == "NodePool":
        others = [p for p in POOLS if p != name]
        instances = int((spec.get("limits") or {}).get("instances", 4))
        choices: list[tuple[str, Any]] = [
            ("spec.limits", {"instances": str(instances + rng.randint(20, 80))}),
            ("spec.weight", int(spec.get("weight", 1)) % 100 + 1),
            ("metadata.name", rng.choice(others)),
            ("metadata", {"name": rng.choice(others)}),
        ]
    else:
        others = [q for q in QUOTAS if q != name]
        policy = (spec.get("preemption") or {}).get("reclaimWithinCohort")
        choices = [
            ("spec.priority", int(spec.get("priority", 0)) + rng.choice((-60, 60, 1000))),
            (
                "spec.preemption",
                {
                    "reclaimWithinCohort": rng.choice([p for p in POLICIES if p != policy]),
                    "gracePeriod": "30s",
                },
            ),
            ("metadata.name", rng.choice(others)),
        ]
    return rng.choice(choices)


def _targets(sim: Simulation) -> list[tuple[str, str, dict[str, Any]]]:
    pools = [("NodePool", n, d) for n, d in sim.catalog.pools.items() if n in POOLS]
    quotas = [("CapacityQuota", n, d) for n, d in sim.catalog.quotas.items() if n in QUOTAS]
    return pools + quotas


def hostile_hub_fields(sim: Simulation, rng: random.Random) -> str:
    """A stored NodePool or team quota applied again as its visible document (in a served
    version), with the annotation setting a field that version expresses, or metadata."""
    targets = _targets(sim)
    if not targets:
        return "nothing to apply"
    kind, name, hub = rng.choice(sorted(targets, key=lambda t: (t[0], t[1])))
    path, value = _hostile_field(kind, name, hub, rng)
    written = written_as(hub, rng)
    document = copy.deepcopy(written.document)
    annotations = document["metadata"].setdefault("annotations", {})
    carried = json.loads(annotations.get(HUB_FIELDS_ANNOTATION, "{}"))
    annotations[HUB_FIELDS_ANNOTATION] = json.dumps({**carried, path: value}, sort_keys=True)
    names = {name} | ({value} if path == "metadata.name" else set())
    names |= {value["name"]} if path == "metadata" else set()
    before = {n: sim.world.stored_document(kind, n) for n in sorted(names)}
    refused = _apply(sim, document)
    sim.invariants.hub_fields.hostile(kind, name, written.label, path, refused, before, hub)
    return f"{kind} {name} as {written.label}, {path}: {refused or 'accepted'}"


def _apply(sim: Simulation, document: dict[str, Any], classes: bool = False) -> str | None:
    """Why the apply was refused (the first line of what the CLI would say), None if it was
    not. `classes`: resolving the stored PriorityClasses, as `capacity-launcher apply` does."""
    try:
        apply_as_written(sim.store, document, classes_store(sim) if classes else None)
    except (ApplyError, ConfigValidationError) as error:
        return "refused: " + str(error).splitlines()[0][:160]
    except Exception as error:  # a fault on the simulation's own call
        return f"error {type(error).__name__}"
    return None


def reapply_as_read(sim: Simulation, rng: random.Random) -> str:
    """`get -o yaml --output-version V | apply -f -`: a stored object read in a served version
    of its kind (hub fields that version has no place for in the annotation) and applied back
    as it reads."""
    items = [
        (kind, name)
        for kind in ("NodeClass", "NodePool", "CapacityQuota")
        for name in sorted(sim.world.partition(kind))
    ]
    if not items:
        return "nothing stored"
    kind, name = rng.choice(items)
    stored = sim.world.partition(kind)[name]
    hub, kept = parse_document(json.loads(str(stored["document"]))), kept_of(stored)
    served = [v for v in REGISTRY.served_for(kind) if "Provisioner" not in v.label]
    version = rng.choice(served)
    # As `get` and `apply` do, a quota (an OME reservation's priorityClassName) resolves the
    # stored PriorityClasses.
    table = classes_store(sim).table() if kind == "CapacityQuota" else None
    try:
        document = REGISTRY.convert(hub, kept, version.api_version, version.kind, table)
    except ConfigValidationError as error:
        return f"{kind} {name}: {version.label} cannot say it ({error.errors[0].field})"
    carries = HUB_FIELDS_ANNOTATION in (document.get("metadata", {}).get("annotations") or {})
    refused = _apply(sim, document, classes=table is not None)
    sim.invariants.hub_fields.read_back(kind, name, version.label, refused, stored, carries)
    sim.invariants.hub_fields.reads_back(kind, name, version, document, table)
    with_fields = ", with hub fields" if carries else ""
    return f"{kind} {name} as {version.label}{with_fields}: {refused or 'applied'}"


class HubFieldsInvariants:
    """Judged around each hostile and read-back apply, on what moto stores (no call)."""

    def __init__(self, base: Any) -> None:
        self.base = base
        self.world = base.world
        self.checks = base.checks

    def hostile(
        self,
        kind: str,
        name: str,
        label: str,
        path: str,
        refused: str | None,
        before: dict[str, str | None],
        visible: dict[str, Any],
    ) -> None:
        self.checks[HOSTILE] += 1
        what = f"{kind} {name} written as {label} with {HUB_FIELDS_ANNOTATION} setting {path}"
        if refused is None:
            self.base._violate(HOSTILE, f"{what}: accepted")
        elif not refused.startswith("refused"):
            self.checks[f"seen: a hostile apply failed otherwise ({refused})"] += 1
        why = stored_as_meant(visible, self.world.stored_document(kind, name))
        self.checks[VISIBLE] += 1
        if why is not None:
            self.base._violate(VISIBLE, f"{what}: the stored {kind} {why}")
        for other, was in before.items():
            if other != name and self.world.stored_document(kind, other) != was:
                self.base._violate(VISIBLE, f"{what}: {kind} {other} was overwritten")
        if kind == "NodePool":
            self._enforced(name, visible, what)

    def _enforced(self, name: str, visible: dict[str, Any], what: str) -> None:
        """The limits a lease checks (the NodePool item's `limits`) are the visible ones."""
        self.checks[ENFORCED] += 1
        item = self.world.partition("NodePool").get(name) or {}
        limits = visible["spec"].get("limits")
        wanted = limits_token(None if limits is None else PoolLimits.model_validate(limits))
        if item.get("limits") is not None and str(item["limits"]) != wanted:
            self.base._violate(
                ENFORCED, f"{what}: enforced {item['limits']}, the document says {wanted}"
            )

    def read_back(
        self,
        kind: str,
        name: str,
        label: str,
        refused: str | None,
        stored: dict[str, Any],
        carries: bool,
    ) -> None:
        """`get | apply` is accepted and stores the same hub: a legitimate annotation sets only
        what the version could not say. The kept fields (what the version says that the hub has
        no place for) are the version's own: unchanged when it is the version they came from."""
        self.checks[ROUND_TRIP] += 1
        if carries:
            self.checks["seen: get | apply with hub fields"] += 1
        what = f"{kind} {name} applied as read in {label}"
        if refused is not None and refused.startswith("refused"):
            self.base._violate(ROUND_TRIP, f"{what}: {refused}")
            return
        now = self.world.partition(kind).get(name) or {}
        kept = json.loads(str(stored["kept"])) if stored.get("kept") is not None else None
        same_version = kept is not None and f"{kept['apiVersion']} {kept['kind']}" == label
        for attribute in ("document", "kept") if same_version else ("document",):
            if now.get(attribute) != stored.get(attribute):
                self.base._violate(
                    ROUND_TRIP,
                    f"{what}: its {attribute} changed from {stored.get(attribute)} to"
                    f" {now.get(attribute)}",
                )

    def applied(self, kind: str, name: str, label: str, document: dict[str, Any]) -> None:
        """Any apply the simulation makes whose document carries hub fields (a version with no
        place for them): the stored object reads back in that version as the document."""
        annotations = document.get("metadata", {}).get("annotations") or {}
        if HUB_FIELDS_ANNOTATION not in annotations:
            return
        version = next(v for v in REGISTRY.served_for(kind) if v.label == label)
        self.reads_back(kind, name, version, document)

    def reads_back(
        self,
        kind: str,
        name: str,
        version: Any,
        applied: dict[str, Any],
        classes: PriorityTable | None = None,
    ) -> None:
        """The stored object, read in the version it was applied in, is the document applied
        (what `get` prints then reads back as the stored hub); `classes`: the PriorityClasses
        both resolved in."""
        self.checks[READS_BACK] += 1
        what = f"{kind} {name} applied as {version.label}"
        stored = self.world.partition(kind).get(name)
        if stored is None:
            self.base._violate(READS_BACK, f"{what}: nothing stored")
            return
        hub = parse_document(json.loads(str(stored["document"])))
        try:
            read = REGISTRY.convert(
                hub, kept_of(stored), version.api_version, version.kind, classes
            )
            steps = validate_steps([SourceDocument(SOURCE, 1, read)], classes)
        except (ConfigValidationError, ApplyError) as error:
            self.base._violate(READS_BACK, f"{what}: does not read back ({error})")
            return
        if read != applied or [s.document for s in steps[:1]] != [hub]:
            self.base._violate(READS_BACK, f"{what}: reads back as another document")


HUB_FIELD_OPERATIONS = {
    "hostile_hub_fields": hostile_hub_fields,
    "reapply_as_read": reapply_as_read,
}
