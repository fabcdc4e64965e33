"""CapacityQuota generations, drawn from the seed (issue 34, item 4): a GitOps loop re-applying
the stored quotas unchanged, between launches and under them, and applies that change a quota
naming no pool anyone launches in (`quota-other`, over the flavor `pool-other`, in a cohort of
its own).

Before the fix every apply bumped the quotas' one generation and every lease in every pool
conditioned on it: each re-apply failed the lease transactions decided before it, and four lost
races in a row handed the request back (`QuotaUsageContended`). The invariants
(docs/simulation.md, "Quota generations"):
- an unchanged re-apply moves no quota generation (the `CapacityQuotas` partition: the
  quota-set version and every pool's), judged on what moto stores before and after it;
- a lease is refused by a quota generation only for a change to a quota naming its pool: every
  lease transaction's generation check that will fail (read from moto just before the call) is
  judged against the changes the simulation saw the stored quota documents go through since that
  generation was current (`QuotaGenerations`, a call watcher).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from typing import TYPE_CHECKING, Any

from capacity_launcher.adapters.config_items import MEMBERS_HELD, QUOTA_SET_KEY
from capacity_launcher.domain.apis.documents import parse_document
from capacity_launcher.domain.apis.quotas import CapacityQuota
from capacity_launcher.domain.errors import ConfigValidationError
from capacity_launcher.service.admission import QUOTA_TRIES  # lost races: QuotaUsageContended
from tests.simulation.versions import apply_as_written

if TYPE_CHECKING:
    from tests.simulation.scheduler import Simulation

GENERATIONS = QUOTA_SET_KEY[0]  # the partition of the quota-set version and the pools'
UNCHANGED = "an unchanged quota re-apply moves no generation"
NOT_MINE = "a lease is refused by a quota generation only for its own pool's quotas"
HELD = "seen: an admission held its pool's members after an apply (pools noted)"
OTHER_QUOTA, OTHER_POOL, OTHER_COHORT = "quota-other", "pool-other", "sim-other"


def other_quota(priority: int, nominal: int) -> dict[str, Any]:
    """A quota over a flavor no NodePool is named after: it governs no launch, so a change to
    it must cost no lease in the team quotas' pools anything."""
    return {
        "apiVersion": "capacity-launcher/v1",
        "kind": "CapacityQuota",
        "metadata": {"name": OTHER_QUOTA},
        "spec": {
            "cohort": OTHER_COHORT,
            "requesters": ["team-other"],
            "priority": priority,
            "resourceGroups": [
                {
                    "coveredResources": ["instances"],
                    "flavors": [
                        {
                            "name": OTHER_POOL,
                            "resources": [{"name": "instances", "nominalQuota": str(nominal)}],
                        }
                    ],
                }
            ],
        },
    }


def _reapply_stored(sim: Simulation) -> str:
    """Every stored quota applied again as stored (what a GitOps loop does each round), each
    judged: the generations as moto stores them are the same after it as before."""
    done = []
    for name, item in sorted(sim.world.partition("CapacityQuota").items()):
        document = json.loads(str(item["document"]))
        if item.get("kept") is not None:
            continue  # applied in another version: its kept fields are the version's
        before = sim.world.partition(GENERATIONS)
        try:
            apply_as_written(sim.store, document)
            done.append(name)
        except Exception as error:  # a fault on the simulation's own call
            done.append(f"{name} {type(error).__name__}")
        sim.invariants.quota_generations.unchanged(name, before, sim.world.partition(GENERATIONS))
    return ", ".join(done) or "no quota stored"


def gitops_reapply(sim: Simulation, rng: random.Random) -> str:
    """The stored quotas re-applied unchanged; half the time also under a launch: before each
    of the next lease transactions a served batch makes (up to 5), another round."""
    if rng.random() < 0.5:
        return f"between launches: {_reapply_stored(sim)}"
    return _under_the_launch(sim, rng, lambda: _reapply_stored(sim), "re-applied")


def change_other_quota(sim: Simulation, rng: random.Random) -> str:
    """`quota-other` (over `pool-other` only) applied with a drawn priority and nominal quota,
    or deleted; half the time under a launch, before each of its lease transactions."""

    def change() -> str:
        if OTHER_QUOTA in sim.world.partition("CapacityQuota") and rng.random() < 0.25:
            action = lambda: sim.store.delete("CapacityQuota", OTHER_QUOTA)  # noqa: E731
        else:
            document = other_quota(rng.choice((5, 20, 40, 60)), rng.randint(1, 9))
            action = lambda: apply_as_written(sim.store, document)  # noqa: E731
        try:
            action()
        except Exception as error:
            return type(error).__name__
        return "changed"

    if rng.random() < 0.5:
        return f"between launches: {change()}"
    return _under_the_launch(sim, rng, change, "changed")


def _under_the_launch(sim: Simulation, rng: random.Random, act: Any, what: str) -> str:
    """A few requests into the team quotas' pools (and elsewhere), served by one container;
    before each of its next lease transactions (up to 5), `act` runs."""
    from tests.simulation.operations import POOLS, QUOTA_POOLS, REQUESTERS, request_body

    bodies = []
    for _ in range(rng.randint(1, 3)):
        body = request_body(sim, rng)
        body.update(nodePool=rng.choice([*QUOTA_POOLS, *POOLS]), count=1)
        body["requester"] = rng.choice(REQUESTERS[:3])
        for key in ("requirements", "minCount", "singleZone"):
            body.pop(key, None)
        bodies.append(body)
    sim.send(bodies, via_bus=False)
    messages = sim.world.receive_batch()
    if not messages:
        return "nothing visible"
    watcher = _BeforeLeases(act, rounds=5)
    # First: the lease transaction's own watchers (this module's judgement) see what it did.
    sim.world.call_watchers.insert(0, watcher)
    try:
        sim.poll_batch(messages)
    finally:
        sim.world.call_watchers.remove(watcher)
    return f"under the launch: {what} before {watcher.fired} lease transactions"


class _BeforeLeases:
    """A call watcher: `act` before each lease transaction (up to `rounds`), never from inside
    what it runs itself."""

    def __init__(self, act: Any, rounds: int) -> None:
        self._act, self._rounds = act, rounds
        self._busy = False
        self.fired = 0

    def before(self, operation: str, params: Any) -> None:
        if self._busy or self.fired >= self._rounds or _lease_pool(operation, params) is None:
            return
        self._busy = True
        try:
            self._act()
            self.fired += 1
        finally:
            self._busy = False

    def after(self, _operation: str, _params: Any) -> None:
        return


def _lease_pool(operation: str, params: Any) -> str | None:
    """The pool of a lease transaction (one that puts a `Lease#` item), else None."""
    if operation != "dynamodb:TransactWriteItems":
        return None
    for entry in params.get("TransactItems") or []:
        item = (entry.get("Put") or {}).get("Item") or {}
        pk, sk = item.get("pk", {}).get("S", ""), item.get("sk", {}).get("S", "")
        if pk.startswith("Limits#") and sk.startswith("Lease#"):
            return pk.removeprefix("Limits#")
    return None


def _notes_members_held(params: Any) -> bool:
    """Whether a write notes a pool's members held at its quota generation (an admission's,
    after an apply or delete naming the pool: docs/quotas.md, "Members held after an apply")."""
    for entry in params.get("TransactItems") or []:
        names = (entry.get("Update") or {}).get("ExpressionAttributeNames") or {}
        if MEMBERS_HELD in names.values():
            return True
    return False


def _touches_quotas(params: Any) -> bool:
    entries = params.get("TransactItems") or [params]
    for entry in entries:
        for part in (entry, *(entry.get(k) or {} for k in ("Put", "Update", "Delete"))):
            found = (part.get("Item") or part.get("Key") or {}).get("pk", {}).get("S")
            if found in ("CapacityQuota", GENERATIONS):
                return True
    return False


def _pools_of(document: str | None) -> set[str]:
    if document is None:
        return set()
    try:
        quota = parse_document(json.loads(document))
    except (ValueError, ConfigValidationError):
        return set()
    return {f.name for f in quota.flavors()} if isinstance(quota, CapacityQuota) else set()


def _cohort_pools(document: str | None) -> set[str]:
    if document is None:
        return set()
    groups = json.loads(document).get("spec", {}).get("resourceGroups", [])
    return {f["name"] for g in groups for f in g["flavors"]}


class QuotaGenerations:
    """Watches every call: the changes the stored quota documents go through (pools named by
    each changed quota, before or after), the generation each change left, and every lease
    transaction's generation checks."""

    def __init__(self, base: Any) -> None:
        self.base = base
        self.world = base.world
        self.checks = base.checks
        self._documents: dict[str, tuple[Any, Any]] = {}  # name -> (document, kept) last seen
        self._cohorts: dict[str, Any] = {}  # "Cohort#<name>" -> its document last seen
        self.changes: Counter[str] = Counter()  # pool -> changes to quotas naming it
        # (generation item, version) -> the changes seen when it became current
        self._at: dict[tuple[str, int], Counter[str]] = {}
        self._refused: Counter[str] = Counter()  # lease item -> refusals not its pool's
        self.attributable = 0  # leases refused QUOTA_TRIES times so: handed back

    def before(self, operation: str, params: Any) -> None:
        pool = _lease_pool(operation, params)
        if pool is None:
            return
        generations = self.world.partition(GENERATIONS)
        for entry in params["TransactItems"]:
            check = entry.get("ConditionCheck") or {}
            if check.get("Key", {}).get("pk", {}).get("S") != GENERATIONS:
                continue
            sk = check["Key"]["sk"]["S"]
            expected = int(check["ExpressionAttributeValues"][":seen"]["N"])
            stored = int((generations.get(sk) or {}).get("version", 0))
            self.checks[NOT_MINE] += 1
            if stored == expected:
                continue
            self.checks["seen: a lease's quota generation moved under it"] += 1
            # A generation never bumped (0) was current before any quota was stored.
            seen = self._at.get((sk, expected), Counter() if expected == 0 else None)
            if seen is None or self.changes[pool] != seen[pool]:
                continue  # a quota naming the pool changed since (or before the watch began)
            lease = _lease_item(params)
            self._refused[lease] += 1
            if self._refused[lease] == QUOTA_TRIES:
                self.attributable += 1
                self.checks["seen: a hand-back (QuotaUsageContended) for others' quotas"] += 1
            self.base._violate(
                NOT_MINE,
                f"a lease in {pool} ({lease}) checks {GENERATIONS}/{sk} at {expected}, stored"
                f" {stored}, though no quota naming {pool} changed since (refused"
                f" {self._refused[lease]}x; {QUOTA_TRIES}x hands the request back:"
                f" {self.attributable} so far)",
            )

    def after(self, operation: str, params: Any) -> None:
        if operation.startswith("dynamodb:") and _touches_quotas(params):
            self._observe()
            if _notes_members_held(params):
                self.checks[HELD] += 1

    def _observe(self) -> None:
        stored = {
            name: (item.get("document"), item.get("kept"))
            for name, item in self.world.partition("CapacityQuota").items()
        }
        for name in sorted({*stored, *self._documents}):
            old, new = self._documents.get(name), stored.get(name)
            if old != new:
                for pool in _pools_of(old and old[0]) | _pools_of(new and new[0]):
                    self.changes[pool] += 1
        self._documents = stored
        # A Kueue Cohort's change governs the pools of its tree's quotas and its own: counted,
        # over-approximated, for every pool a stored quota or the cohort names.
        generations = self.world.partition(GENERATIONS)
        cohorts = {
            sk: i.get("document") for sk, i in generations.items() if sk.startswith("Cohort#")
        }
        for sk in sorted({*cohorts, *self._cohorts}):
            old_cohort, new_cohort = self._cohorts.get(sk), cohorts.get(sk)
            if old_cohort != new_cohort:
                named = set().union(*(_pools_of(d) for d, _ in stored.values()))
                for document in (old_cohort, new_cohort):
                    named |= _cohort_pools(document)
                for pool in named:
                    self.changes[pool] += 1
        self._cohorts = cohorts
        for sk, item in generations.items():
            self._at.setdefault((sk, int(item.get("version", 0))), Counter(self.changes))

    def unchanged(self, name: str, before: dict[str, Any], after: dict[str, Any]) -> None:
        self.checks[UNCHANGED] += 1
        moved = sorted(
            f"{sk} {(before.get(sk) or {}).get('version', 0)} -> {item.get('version', 0)}"
            for sk, item in after.items()
            if (before.get(sk) or {}).get("version") != item.get("version")
        )
        if moved:
            self.base._violate(UNCHANGED, f"CapacityQuota {name} re-applied: {', '.join(moved)}")


def _lease_item(params: Any) -> str:
    for entry in params["TransactItems"]:
        item = (entry.get("Put") or {}).get("Item") or {}
        if item.get("sk", {}).get("S", "").startswith("Lease#"):
            return f"{item['pk']['S']}/{item['sk']['S']}"
    return "?"


QUOTA_GENERATION_OPERATIONS = {
    "gitops_reapply": gitops_reapply,
    "change_other_quota": change_other_quota,
}
