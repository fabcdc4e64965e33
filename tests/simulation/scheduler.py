"""The run: one seeded generator decides every step (which operation, how long until the next,
which call a crash hits); the world's triggers run between steps as production's would, and the
invariants are checked after every step and at every quiescence.

Why a custom scheduler and not Hypothesis's RuleBasedStateMachine: a soak must run for minutes
with thousands of requests and one report, the triggers (queue mapping, schedule, late events)
are not rules a producer chooses but time passing, and shrinking a run over moto would cost more
than replaying its seed. The seed is the whole input: the same seed replays the same run.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from capacity_launcher.adapters.config_store import ConfigStore
from capacity_launcher.domain.apis.documents import parse_document
from capacity_launcher.service.configuration import Configuration
from capacity_launcher.settings import get_settings
from capacity_launcher.startup import system_clock
from tests.simulation.adversary import ADVERSARY
from tests.simulation.block_end_invariants import PoolLook, lineage, look, policy_of
from tests.simulation.cohort_operations import COHORT_OPERATIONS
from tests.simulation.determinism import code_digest
from tests.simulation.emulator import START, Fault
from tests.simulation.fair_share import CONTEND_OPERATIONS
from tests.simulation.group_operations import GROUP_OPERATIONS
from tests.simulation.hub_fields import HUB_FIELD_OPERATIONS
from tests.simulation.invariants import Disturbance, Invariants, Ledger, request_id_of
from tests.simulation.lease_operations import LEASE_OPERATIONS
from tests.simulation.operations import OPERATIONS, Catalog, Profile, _limit
from tests.simulation.priority_operations import bootstrap_priority_classes
from tests.simulation.queue_operations import QUEUE_OPERATIONS
from tests.simulation.quota_generations import QUOTA_GENERATION_OPERATIONS
from tests.simulation.reservation_operations import ROOM_OPERATIONS
from tests.simulation.static_invariants import static_target
from tests.simulation.static_operations import BLOCK_END_POOL, STATIC_POOL
from tests.simulation.versions import (
    VersionCounts,
    apply_as_written,
    version_stream,
    written_as,
)
from tests.simulation.world import TRANSACTION_CONFLICT_RATE, Invoked, World

REQUEST_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
SYNC_EVERY_SECONDS = 60.0
ROOT = Path(__file__).resolve().parents[2]
UNREADY_POOLS = ("pool-0", "pool-2")  # applied with limits.unready at the start


@dataclass
class Outcome:
    """What a run did and found; report.py turns it into text."""

    seed: int
    profile: str
    steps: int = 0
    code: str = ""  # the sources' digest at the start (determinism.code_digest)
    code_at_end: str = ""
    simulated_seconds: float = 0.0
    wall_seconds: float = 0.0
    operations: Counter[str] = field(default_factory=Counter)
    invocations: Counter[str] = field(default_factory=Counter)
    faults_fired: Counter[str] = field(default_factory=Counter)
    crashes: Counter[str] = field(default_factory=Counter)
    statuses: Counter[str] = field(default_factory=Counter)
    checks: Counter[str] = field(default_factory=Counter)
    latencies: list[float] = field(default_factory=list)
    latencies_after_clear: list[float] = field(default_factory=list)
    requests: int = 0
    instances: int = 0
    quiescences: int = 0
    jumps: int = 0
    violations: list[Any] = field(default_factory=list)
    dead_letters: int = 0
    trace: list[str] = field(default_factory=list)
    versions: VersionCounts = field(default_factory=VersionCounts)


class Simulation:
    def __init__(self, seed: int, profile: Profile, *, process_ends: bool = False) -> None:
        self.seed = seed
        self.profile = profile
        self.rng = random.Random(seed)
        self._versions = version_stream(seed)  # which served version each document is written in
        self.world = World(seed, process_ends=process_ends)
        self.ledger = Ledger()
        self.catalog = Catalog()
        self.invariants = Invariants(self.world, self.ledger, seed, self.catalog)
        self.world.call_watchers.append(self.invariants.unready)  # the lease writes, as made
        self.world.call_watchers.append(self.invariants.reserved)  # EC2's room and launches
        self.world.call_watchers.append(self.invariants.quota_generations)  # quotas and leases
        self.pending_crash: tuple[int, str] | None = None
        # An operation that wants what it set going judged at once (evacuation_at_quiescence).
        self.quiesce_after_step = False
        self.faults: dict[str, tuple[Fault, float, Disturbance]] = {}
        self.outcome = Outcome(seed, profile.name)
        self._next_sync = 0.0
        self._store: Configuration | None = None
        self._checked: set[str] = set()
        self._storm: tuple[float, Disturbance] | None = None  # transaction conflicts raised
        self._sync_paused_until = 0.0  # the minute's sync does not run before this
        self._sync_pause: Disturbance | None = None

    # -- what operations call -------------------------------------------------------------------

    @property
    def store(self) -> Configuration:
        """What an operator's apply and delete go through (the configuration use cases)."""
        if self._store is None:
            store = ConfigStore(
                get_settings().state_table_name, self.world.dynamodb, clock=system_clock
            )
            self._store = Configuration(store, store.priority_classes())
        return self._store

    def send(self, bodies: list[Any], *, via_bus: bool) -> None:
        texts = [b if isinstance(b, str) else json.dumps(b) for b in bodies]
        self.outcome.trace.append(
            f"step {self.invariants.step}   sent "
            + ", ".join(
                f"{b.get('requestId')}<{b.get('requester')} {b.get('nodePool')} x{b.get('count')}>"
                for b in bodies
                if isinstance(b, dict)
            )
        )
        for body in bodies:
            self._note_submitted(body)
        if via_bus and all(isinstance(b, dict) for b in bodies):
            self.world.put_launch_requested(texts)
        else:
            self.world.send(texts)
        self.catalog.submitted += [
            t for t, b in zip(texts, bodies, strict=True) if isinstance(b, dict)
        ]

    def send_keyed(self, request_id: str, text: str) -> None:
        """A body the simulation does not parse (nested too deep for it), under a valid id."""
        self.ledger.submitted(
            request_id, self.world.now, None, False, None, self.invariants.step, sent=text
        )
        self.outcome.trace.append(f"step {self.invariants.step}   sent {request_id}<hostile>")
        self.world.send([text])

    def send_raw(self, texts: list[str]) -> None:
        for text in texts:
            self._note_submitted(json.loads(text))
        self.world.send(texts)

    def _note_submitted(self, body: Any) -> None:
        if not isinstance(body, dict):
            return
        request_id = body.get("requestId")
        if not isinstance(request_id, str) or not re.match(REQUEST_ID_PATTERN, request_id):
            return
        count = body.get("count")
        valid = isinstance(count, int) and 1 <= count <= 500 and "imageId" not in body
        valid = valid and not any(k.startswith("capacity-launcher:") for k in body.get("tags", {}))
        valid = valid and body.get("minCount", 1) <= (count or 0)
        valid = valid and "padding" not in body
        valid = valid and all(len(str(v)) <= 256 for v in (body.get("tags") or {}).values())
        self.ledger.submitted(
            request_id,
            self.world.now,
            count if valid else None,
            valid,
            body if valid else None,
            self.invariants.step,
            sent=json.dumps(body, sort_keys=True),
        )

    def apply(self, document: dict[str, Any]) -> str:
        """Apply the hub ``document`` written in a served version of its kind (versions.py)."""
        kind, name = document["kind"], document["metadata"]["name"]
        written = written_as(document, self._versions)
        self.outcome.versions.note(written)
        try:
            apply_as_written(self.store, written.document)
        except Exception as error:
            return type(error).__name__
        self.invariants.stored_as_meant(
            document, written.label, self.world.stored_document(kind, name)
        )
        self.invariants.hub_fields.applied(kind, name, written.label, written.document)
        self.catalog.changed_at.append(self.world.now)
        self.catalog.last_changed[f"{kind}/{name}"] = self.world.now
        if kind == "CapacityQuota":
            self.catalog.quotas[name] = document
            self.invariants.quota_applied(name, document)
            return "applied"
        if kind == "NodeClass":
            self.catalog.classes[name] = document
        else:
            self.catalog.pools[name] = document
            # Also for a pool deleted and applied again: what it still runs was launched under
            # its old limit (its instances and usage outlive the deletion).
            committed = self.world.committed(name)
            self.invariants.lowered(name, _limit(document), committed)
            self.outcome.trace.append(
                f"step {self.invariants.step}   {name}: limit {_limit(document)},"
                f" unready {(document['spec'].get('limits') or {}).get('unready')},"
                f" class {document['spec']['nodeClassRef']}, committed {committed}"
            )
        return "applied"

    def delete(self, kind: str, name: str) -> str:
        try:
            self.store.delete(kind, name)  # type: ignore[arg-type]
        except Exception as error:
            return type(error).__name__
        self.catalog.changed_at.append(self.world.now)
        self.catalog.last_changed[f"{kind}/{name}"] = self.world.now
        if kind == "CapacityQuota":
            self.catalog.quotas.pop(name, None)
        elif kind == "NodeClass":
            self.catalog.classes.pop(name, None)
        else:
            self.catalog.pools.pop(name, None)
            self.invariants.deleted(name)
            self.outcome.trace.append(f"step {self.invariants.step}   {name}: deleted")
        return "deleted"

    def add_fault(self, fault: Fault, *, duration: float, permanent: bool) -> None:
        previous = self.faults.pop(fault.operation, None)
        if previous is not None:
            previous[2].cleared = self.world.now
        disturbance = Disturbance(
            f"{fault.operation} {fault.code}", self.world.now, None, permanent
        )
        self.ledger.disturbances.append(disturbance)
        self.faults[fault.operation] = (fault, self.world.now + duration, disturbance)
        self._arm_faults()

    def conflicts(self, rate: float, *, duration: float) -> None:
        """Transactions touching an item another touched cancelled at `rate` for a while."""
        if self._storm is not None:
            self._storm[1].cleared = self.world.now
        disturbance = Disturbance(f"transaction conflicts at {rate}", self.world.now)
        self.ledger.disturbances.append(disturbance)
        self._storm = (self.world.now + duration, disturbance)
        self.world.transaction_conflicts(rate)

    def _calm_conflicts(self, everything: bool) -> None:
        if self._storm is None or not (everything or self._storm[0] <= self.world.now):
            return
        self._storm[1].cleared = self.world.now
        self._storm = None
        self.world.transaction_conflicts(TRANSACTION_CONFLICT_RATE)

    def _arm_faults(self) -> None:
        self.world.active_faults = [f for f, _, _ in self.faults.values()]

    def _expire_faults(self, everything: bool = False) -> None:
        for operation, (_, until, disturbance) in list(self.faults.items()):
            if everything or until <= self.world.now:
                disturbance.cleared = self.world.now
                del self.faults[operation]
        self._calm_conflicts(everything)
        self._arm_faults()

    def outage(self, fault: Fault) -> None:
        """Hold a fault for longer than the queue's whole retry window, delivering meanwhile."""
        window = (self.world.max_receive_count + 1) * self.world.visibility_timeout + 60
        self.add_fault(fault, duration=window, permanent=True)
        ends = self.world.now + window
        while self.world.now < ends:
            self._mark_exposed()
            self._poll_everything()
            self._triggers()
            self._sleep_until_due(ends)
        self._expire_faults()

    def pause_sync(self, seconds: float) -> str:
        """The minute's sync does not run for `seconds` (a quiescence runs it, and ends this): a
        disturbance for requests open meanwhile (the sync also marks instances ready)."""
        self._sync_paused_until = max(self._sync_paused_until, self.world.now + seconds)
        if self._sync_pause is not None:
            self._sync_pause.cleared = self.world.now
        self._sync_pause = Disturbance("sync paused", self.world.now, self._sync_paused_until)
        self.ledger.disturbances.append(self._sync_pause)
        return f"until t={self._sync_paused_until - self._start_time():.0f}s"

    def pass_time(self, seconds: float) -> None:
        """`seconds` pass with the system at work: faults and conflict storms clearing when due,
        the mapping serving what is visible, the minute's sync (unless paused), EC2's events,
        the checks."""
        ends = self.world.now + seconds
        while self.world.now < ends:
            self._expire_faults()
            self._poll_everything()
            self._triggers()
            clears = [until for _, until, _ in self.faults.values()]
            clears += [self._storm[0]] if self._storm is not None else []
            self._sleep_until_due(min([ends, *clears]))

    def _resume_sync(self) -> None:
        if self._sync_pause is not None and self._sync_paused_until > self.world.now:
            self._sync_pause.cleared = self.world.now
        self._sync_paused_until, self._sync_pause = 0.0, None

    def jump(self) -> str:
        """Skip hours or days to the next moment a reservation changes (a block or future-dated
        reservation starts, a block's last launch window, its warning, its instances terminated
        30 minutes before its end, a reservation ends). First every fault is cleared and the
        queue drained, as the skipped hours would have done; requests still open count the jump
        as a disturbance."""
        now = self.world.now
        due = [
            m
            for view in self.world.reservations().values()
            for m in view.milestones
            if m > now + SYNC_EVERY_SECONDS
        ]
        if not due:
            return "nothing due"
        return self.jump_to(min(due) + 1.0)

    def jump_to(self, target: float) -> str:
        """`jump` to the moment `target` (epoch seconds): the queue drained first, the jump a
        disturbance for requests still open."""
        if not self._drain(events=False):
            return "queue not drained"
        start = self.world.now
        if target <= start:
            return "passed while draining"
        self.world.emulator.clock.advance(target - start)
        self.ledger.disturbances.append(Disturbance("clock jump", start, self.world.now))
        self.outcome.jumps += 1
        self.invariants.checks["seen: a clock jump"] += 1
        self._triggers()
        return f"jumped {(target - start) / 3600:.1f} h"

    def _sleep_until_due(self, limit: float) -> None:
        """Move the clock to the next moment something is due (a message visible again, a late
        event, the minute's sync), never past `limit`."""
        due = [self._next_sync, limit, self.world.next_wake() or limit]
        self.world.emulator.clock.advance(max(min(due) - self.world.now, 0.0) + 1.0)

    # -- the loop -------------------------------------------------------------------------------

    def run(self) -> Outcome:
        started = time.monotonic()
        self.outcome.code = code_digest(ROOT)
        with self.world:
            self.outcome.checks = self.invariants.checks
            self._next_sync = self.world.now + SYNC_EVERY_SECONDS
            self._bootstrap()
            # A run bounded by wall minutes counts them from its first step: its bootstrap (a
            # few seconds, more on a loaded machine) never leaves a short bound without a step.
            stepping = time.monotonic()
            step = 0
            while self._keep_going(step, stepping):
                step += 1
                self.invariants.step = step
                self._step()
                if step % self.profile.quiesce_every == 0 or self.quiesce_after_step:
                    self.quiesce_after_step = False
                    self.quiesce()
            self.quiesce()
            self._finish(step, started)
        return self.outcome

    def _keep_going(self, step: int, started: float) -> bool:
        if self.profile.wall_minutes is not None:
            return time.monotonic() - started < self.profile.wall_minutes * 60
        return step < self.profile.steps

    def _bootstrap(self) -> None:
        """A usable start: every NodeClass and two pools, as a new user would apply them."""
        from tests.simulation.operations import (
            FAIR_WEIGHTS,
            POOLS,
            QUOTAS,
            buy_capacity_block,
            gpu_documents,
            node_class_document,
            node_pool_document,
            quota_document,
        )

        for name in ("class-open", "class-selector", "class-none"):
            self.apply(node_class_document(self, name, self.rng))
        for name in POOLS:  # two with limits.unready: every run has them from the start
            self.apply(node_pool_document(self, name, self.rng, unready=name in UNREADY_POOLS))
        bootstrap_priority_classes(self, self.rng)
        for document in gpu_documents(self, self.rng):
            self.apply(document)
        # Drawn apart from the run's generator, so every other draw of a seed stays as it was.
        weights = random.Random(f"{self.seed}/fair-sharing")
        for name in QUOTAS:
            document = quota_document(name, weights.choice(FAIR_WEIGHTS))
            # The simulation's own client does not retry a transaction conflict (the emulator's
            # conflict mode cancels one now and then) as the service's clients do: apply again,
            # as an operator would; a third refusal is a finding.
            for _ in range(2):
                if self.apply(document) == "applied":
                    break
            else:
                self.store.apply(parse_document(document))  # raises: why it was refused
        self.outcome.trace.append(
            f"step 0 buy_capacity_block: {buy_capacity_block(self, self.rng)}"
        )

    def _step(self) -> None:
        names = [n for n, w in self.profile.weights.items() if w > 0]
        weights = [self.profile.weights[n] for n in names]
        name = self.rng.choices(names, weights)[0]
        try:
            every = {
                **OPERATIONS,
                **ROOM_OPERATIONS,
                **LEASE_OPERATIONS,
                **HUB_FIELD_OPERATIONS,
                **QUOTA_GENERATION_OPERATIONS,
                **QUEUE_OPERATIONS,
                **CONTEND_OPERATIONS,
                **COHORT_OPERATIONS,
                **GROUP_OPERATIONS,
                **ADVERSARY,
            }
            result = every[name](self, self.rng)
        except Exception as error:  # an operator's call the emulator refused: part of the run
            result = f"error {type(error).__name__}"
        self.outcome.operations[f"{name}: {result}"] += 1
        self.outcome.trace.append(
            f"step {self.invariants.step} t={self._elapsed():.0f}s {name}: {result}"
        )
        self.world.emulator.clock.advance(self.rng.uniform(*self.profile.tick))
        self._expire_faults()
        if self.rng.random() < self.profile.concurrent_poll:
            self._poll_at_once()
        else:
            self._poll_once()
        self._triggers()
        self._mark_exposed()
        self._fingerprint()

    def _fingerprint(self) -> None:
        """The step's AWS calls (every one, in order, with its parameters), the instances and the
        clock after it: two runs of a seed must print the same line at every step."""
        self.outcome.trace.append(
            f"step {self.invariants.step}   {self.world.digest.take()},"
            f" {len(self.world.instances)} instances, clock {self._elapsed():.3f}"
        )

    def _crash_for(self) -> tuple[int, str] | None:
        crash, self.pending_crash = self.pending_crash, None
        return crash

    def _note_deliveries(self, messages: list[dict[str, Any]], invoked: Invoked) -> None:
        for message in messages:
            request = self.ledger.requests.get(request_id_of(message["Body"]))
            if request is None:
                continue
            request.deliveries += 1
            request.handed_back += message["MessageId"] in invoked.handed_back
            request.crashed += invoked.crashed is not None

    def _note(self, invoked: Invoked) -> None:
        self.outcome.invocations[invoked.function] += 1
        if invoked.waiting is not None:  # a sync run that finished every part
            self.invariants.queues.counted_waiting(*invoked.waiting)
            self.invariants.priority.synced()
        if invoked.handed_back:
            self.outcome.invocations[f"{invoked.function} handed back"] += len(invoked.handed_back)
        if invoked.error:
            self.outcome.invocations[f"{invoked.function} error"] += 1
        for operation, fired in invoked.faults_fired.items():
            if fired:
                self.outcome.faults_fired[operation] += fired
        if invoked.crashed:
            self.outcome.crashes[f"{invoked.function}: {invoked.crashed}"] += 1
            visible_again = self.world.visibility_timeout if invoked.message_ids else 0
            self.ledger.disturbances.append(
                Disturbance(
                    f"crash {invoked.function}", self.world.now, self.world.now + visible_again
                )
            )

    def poll_batch(self, messages: list[dict[str, Any]]) -> None:
        """`messages`, received already, served now by one container (with the crash armed)."""
        invoked = self.world.invoke_launcher(0, messages, self._crash_for())
        self.note_invoked(invoked, messages)

    def note_invoked(self, invoked: Invoked, messages: list[dict[str, Any]] | None = None) -> None:
        """An invocation an operation made itself, counted as the loop counts its own."""
        if messages:
            self._note_deliveries(messages, invoked)
        self._note(invoked)

    def poll_once(self) -> None:
        """One batch served now, in the middle of an operation (a race with what follows)."""
        self._poll_once()

    def poll_at_once(self) -> None:
        """Two containers serving what is visible, at once, sharing one receive if need be."""
        self._poll_at_once(split=True)

    def _poll_once(self) -> bool:
        messages = self.world.receive_batch()
        if not messages:
            return False
        container = self.rng.randrange(len(self.world.launchers))
        invoked = self.world.invoke_launcher(container, messages, self._crash_for())
        self._note_deliveries(messages, invoked)
        self._note(invoked)
        return True

    def _poll_at_once(self, *, split: bool = False) -> None:
        batches = [b for b in (self.world.receive_batch(), self.world.receive_batch()) if b]
        split = split or self.profile.split_batches
        if split and len(batches) == 1 and len(batches[0]) > 1:
            # The mapping's pollers share what is visible: each container gets a part.
            cut = self.rng.randrange(1, len(batches[0]))
            batches = [batches[0][:cut], batches[0][cut:]]
        if len(batches) < 2:
            for batch in batches:
                invoked = self.world.invoke_launcher(0, batch, self._crash_for())
                self._note_deliveries(batch, invoked)
                self._note(invoked)
            return
        self.outcome.invocations["launcher concurrent pairs"] += 1
        answers = self.world.invoke_launchers_at_once(batches, self._crash_for())
        for batch, invoked in zip(batches, answers, strict=False):
            self._note_deliveries(batch, invoked)
            self._note(invoked)

    def poll_everything(self) -> None:
        """Serve the launch queue until nothing is visible (an operation that must see what it
        sent served before it goes on)."""
        self._poll_everything()

    def _poll_everything(self, limit: int = 50) -> None:
        while limit and self._poll_once():
            limit -= 1

    def _triggers(self) -> None:
        """Time's own work after a step: reservations changing on time, the minute's sync, EC2's
        events, and the checks."""
        self.world.emulator.settle()
        if self.world.now >= self._next_sync:
            self._next_sync = self.world.now + SYNC_EVERY_SECONDS
            if self.world.now >= self._sync_paused_until:
                self._note(self.world.run_sync(self._crash_for()))
            else:
                self.outcome.invocations["sync paused (runs skipped)"] += 1
        for invoked in self.world.deliver_due_events(self._crash_for):
            self._note(invoked)
        for instance_id, state in self.world.observe_instances():
            self._announce(instance_id, state)
        self.invariants.every_step(self.world.status_events())

    def _announce(self, instance_id: str, state: str) -> None:
        """EC2's state-change events: sometimes the intermediate one too, late and duplicated."""
        low, high = self.profile.event_delay
        states = [state]
        if state in ("stopped", "terminated") and self.rng.random() < 0.5:
            states.insert(0, "stopping" if state == "stopped" else "shutting-down")
        for announced in states:
            delay = self.rng.uniform(low, high) if self.rng.random() < 0.5 else 0.0
            self.world.schedule_event(instance_id, announced, delay)
            if self.rng.random() < self.profile.duplicate_events:
                self.world.schedule_event(instance_id, announced, self.rng.uniform(low, high))

    def _mark_exposed(self) -> None:
        if not self.ledger.permanent_active():
            return
        for request in self.ledger.requests.values():
            if request.ended_at is None:
                request.exposed_to_permanent_fault = True

    # -- quiescence -----------------------------------------------------------------------------

    def quiesce(self) -> None:
        """Faults off, queue drained, every EC2 event delivered, the clock past every lease, the
        sync run: then what is stored must be what EC2 shows."""
        self.outcome.quiescences += 1
        opening = self._block_end_looks()
        if not self._drain():
            visible, in_flight = self.world.queue_depth()
            self.invariants._violate(
                "queue drains",
                f"{visible} visible and {in_flight} in-flight messages after the whole retry"
                " window with every fault off",
            )
        self.world.emulator.clock.advance(get_settings().limit_lease_seconds + 1)
        self._resume_sync()
        self._note(self.world.run_sync())
        self._next_sync = self.world.now + SYNC_EVERY_SECONDS
        self._triggers()
        if self.world.pending_events:
            # What the sync itself ended (a static pool scaled down, a block evacuated, a
            # reclaim enforced) reaches instance events before what is stored is compared with
            # EC2, as the drain above delivered everything before the sync.
            self._drain()
        records: dict[str, dict[str, Any] | None] = {}
        for request_id in self.ledger.requests:
            if request_id not in self._checked:
                record = self.world.record(request_id)
                if record is not None and record.get("status") == "Waiting":
                    continue  # it waits (issue 37): checked at a quiescence after it ends
                records[request_id] = record
                self._checked.add(request_id)
        running_for = {
            o.request_id for o in self.world.instances.values() if o.state in ("pending", "running")
        }
        unnamed = {r: self.world.record(r) for r in running_for}
        self.invariants.after_quiescence(records, unnamed)
        self._static_converges(opening)
        self._fingerprint()

    def _block_end_looks(self) -> tuple[PoolLook, dict[str, PoolLook]]:
        """The block pool's live instances, and each opted-in request's lineage, now: what an
        evacuation within the quiescence is judged from (block_end_invariants.py)."""
        return look(self.world, BLOCK_END_POOL), {
            r: self._lineage_look(r) for r in self.catalog.opted_in
        }

    def _static_converges(self, opening: tuple[PoolLook, dict[str, PoolLook]]) -> None:
        """The static pool (static_invariants.py): at most its replicas after the quiescence's
        sync; its target after one more sync and drain; forged launches refused. An evacuation
        (the block pool's, an opted-in request's) is judged from `opening`, the quiescence's
        start, to after the last sync: every sync of the quiescence's drain included."""
        for request_id in self.catalog.forged:
            self.invariants.static.forged_refused(request_id, self.world.record(request_id))
        self.catalog.forged.clear()
        document = self.catalog.pools.get(STATIC_POOL)
        target = None if document is None else static_target(document)
        block_end = policy_of(self.catalog.pools.get(BLOCK_END_POOL))
        opted = self.catalog.opted_in
        if target is None and block_end is None and not opted:
            self.invariants.block_end.one_extension_per_end(self.world)
            return  # no static pool: no second sync (the other profiles' seeds replay as before)
        before = look(self.world, BLOCK_END_POOL)
        pool_opening, requests_opening = opening
        if block_end is not None:
            self.invariants.block_end.not_over(BLOCK_END_POOL, before, *block_end)
        if target is not None:
            self.invariants.static.at_most(STATIC_POOL, self._live(STATIC_POOL), target[0])
        self._drain()
        self._note(self.world.run_sync())
        self._drain()
        self.invariants.block_end.one_extension_per_end(self.world)
        if block_end is not None:
            after = look(self.world, BLOCK_END_POOL)
            self.invariants.block_end.no_drop(BLOCK_END_POOL, pool_opening, after, block_end[0])
        if target is not None:
            self.invariants.static.converged(STATIC_POOL, self._live(STATIC_POOL), target[1])
        for original, seen in requests_opening.items():
            held = int((self.world.record(original) or {}).get("launched", 0))
            self.invariants.opt_in.no_drop(original, seen, self._lineage_look(original), held)
        if opted:
            self.invariants.opt_in.replacements_once(self.world)

    def _lineage_look(self, original: str) -> PoolLook:
        """An opted-in request's live instances with its replacements', and the blocks' ends."""
        seen = look(self.world, BLOCK_END_POOL)
        return PoolLook(lineage(self.world, original), seen.ends, seen.now)

    def _live(self, pool: str) -> int:
        return self.world.live_by_pool().get(pool, 0)

    def _drain(self, *, events: bool = True) -> bool:
        """Faults off, no crash armed, the queue drained (the clock jumping to each redelivery)
        and (with `events`) every pending EC2 event delivered; False if the retry window was not
        enough. A clock jump leaves late EC2 events to be delivered after it, as during the
        skipped hours: waiting minutes for each would cost a sync a minute."""
        self._expire_faults(everything=True)
        self.pending_crash = None
        deadline = (
            self.world.now + (self.world.max_receive_count + 2) * self.world.visibility_timeout
        )
        while self.world.now < deadline:
            self._poll_everything()
            self._triggers()
            visible, in_flight = self.world.queue_depth()
            if visible + in_flight == 0 and not (events and self.world.pending_events):
                return True
            self._sleep_until_due(deadline)
        return False

    def _finish(self, step: int, started: float) -> None:
        outcome = self.outcome
        outcome.steps = step
        outcome.code_at_end = code_digest(ROOT)
        outcome.simulated_seconds = self.world.now - self._start_time()
        outcome.wall_seconds = time.monotonic() - started
        outcome.requests = len(self.ledger.requests)
        outcome.instances = len(self.world.instances)
        outcome.violations = list(self.invariants.violations)
        outcome.dead_letters = len(self.invariants.dead)
        for request in self.ledger.requests.values():
            outcome.statuses[request.status or "no status event"] += 1
            if request.ended_at is not None:
                outcome.latencies.append(request.ended_at - request.submitted_at)
                after = self.ledger.latency_after_clear(request)
                if after is not None:
                    outcome.latencies_after_clear.append(after)

    def _start_time(self) -> float:
        return START.timestamp()

    def _elapsed(self) -> float:
        return self.world.now - START.timestamp()
