"""The whole system in one process: moto with moto_capacity, the template's resources, and the
template's three functions run as Lambda would run them (tests its handlers, cold starts and all),
fed by their triggers: the launch queue's event source mapping, the minute's schedule and the
default bus's EC2 state-change events. The simulated clock drives every timeout."""

from __future__ import annotations

import json
import random
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import boto3
from moto.dynamodb.models import dynamodb_backends
from moto.dynamodb.models.dynamo_type import DynamoType
from moto.ec2.models import ec2_backends
from moto.moto_api._internal import mock_random
from moto.sqs.models import sqs_backends

import moto_capacity
from capacity_launcher.adapters.launch_records import LaunchRecords
from capacity_launcher.adapters.pool_leases import PoolLeaseStore
from capacity_launcher.domain.records.tags import MANAGED
from capacity_launcher.settings import get_settings
from capacity_launcher.startup import Host
from local_cloud.cloud import LocalCloud, LocalCloudOptions
from local_cloud.event_sources import QueueMapping, sqs_event
from local_cloud.lambda_runtime import Invocation, LocalFunction
from local_cloud.status_events import capture_status_events
from moto_capacity.ec2.models.backend import capacity_backend
from tests.simulation.determinism import CallDigest, Interleaver, seeded_sources
from tests.simulation.emulator import (
    REGION,
    Capacity,
    Crash,
    CrashPlan,
    Emulator,
    Fault,
    InProcessFaults,
    SimulatedClock,
    crashing_calls,
    transaction_backups_once_per_table,
)
from tests.simulation.item_sizes import ItemSizes
from tests.support.process_caches import for_a_run
from tests.support.retries import retries_without_sleeping
from tests.support.signatures import placeholder_signatures
from tests.support.template import DeployedNames

ACCOUNT = "123456789012"
REQUEST_ID_TAG = "capacity-launcher:request-id"
POOL_TAG = "capacity-launcher:node-pool"
REQUESTER_TAG = "capacity-launcher:requester"
LIVE = frozenset({"pending", "running"})
# EC2's eventual consistency (fresh ids, pending reservations) and DynamoDB's transaction
# conflicts, as the emulator can produce them (docs/local-cloud.md).
CONSISTENCY_SECONDS = 3
# A launched or started instance's status checks stay `initializing` this long (EC2 User Guide,
# "Status checks for Amazon EC2 instances"; a few minutes): drawn once per run from the seed.
STATUS_CHECK_SECONDS = (60, 300)
TRANSACTION_CONFLICT_RATE = 0.05
STATE_CHANGE = "EC2 Instance State-change Notification"
FAKE_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
    "POWERTOOLS_METRICS_NAMESPACE": "CapacityLauncher",
    "POWERTOOLS_TRACE_DISABLED": "true",
    "MOTO_EC2_LOAD_DEFAULT_AMIS": "true",
}


@dataclass
class Invoked:
    """One function invocation as the trigger saw it."""

    function: str
    message_ids: tuple[str, ...] = ()
    handed_back: frozenset[str] = frozenset()
    crashed: str | None = None
    error: str | None = None
    faults_fired: dict[str, int] = field(default_factory=dict)
    # A sync's count of the requests Waiting, and the records Waiting in the table right after.
    waiting: tuple[int, int] | None = None


@dataclass(frozen=True)
class LiveAtCall:
    """A managed instance live when the sync called, as EC2 held it (its tags and type)."""

    instance_id: str
    pool: str
    requester: str
    instance_type: str


@dataclass(frozen=True)
class SyncTermination:
    """An instance the sync asked EC2 to terminate, with the reservation EC2 held it in when
    asked (read from the emulator before the call: a terminated instance is in none), and the
    managed instances live at that call, restarted ones left out (the world's state at
    enforcement, shared by the call's instances)."""

    instance_id: str
    reservation_id: str | None
    live: tuple[LiveAtCall, ...] = ()


@dataclass
class Observed:
    """One managed instance as EC2 shows it."""

    instance_id: str
    request_id: str
    pool: str
    state: str
    instance_type: str
    zone: str
    reservation_id: str | None
    requester: str = ""
    lifecycle: str | None = None  # EC2's InstanceLifecycle: the market it was launched in
    launched_at: float = 0.0


@dataclass(frozen=True)
class ReservationView:
    """One Capacity Reservation as the emulator holds it (read directly: no call, no fault)."""

    reservation_id: str
    kind: str  # "capacity-block", "future-dated" or "default"
    state: str
    active_from: float  # when it may first serve a launch
    end: float | None
    market: str
    instance_ids: frozenset[str]
    milestones: tuple[float, ...]  # moments the emulator will change it, from now on
    open: bool = False  # instance match criteria `open`: matching on-demand launches use it


@dataclass(frozen=True)
class Placement:
    """What a Capacity Reservation and an instance must share for the one to run in the other
    (the emulator's `mismatch`: EC2's instance type, platform, zone and tenancy)."""

    instance_type: str
    zone: str
    platform: str
    tenancy: str


@dataclass(frozen=True)
class ReservationFacts:
    """What does not change about one Capacity Reservation: what it holds, how a NodeClass
    selects it (tags, owner, match criteria), its kind and its end."""

    reservation_id: str
    placement: Placement
    tags: tuple[tuple[str, str], ...]
    owner_id: str
    match_criteria: str  # `open` or `targeted`
    kind: str  # "capacity-block", "future-dated" or "default"
    interruptible: bool
    end: float | None


@dataclass(frozen=True)
class Launch:
    """One instance as EC2 launched it: when (the simulated clock just after the call), where,
    in which market (`on-demand`, `spot`, `capacity-block`, ...) and in which reservation."""

    instance_id: str
    at: float
    placement: Placement
    market: str
    reservation_id: str | None


@dataclass(order=True)
class PendingEvent:
    deliver_at: float
    sequence: int
    detail: dict[str, Any] = field(compare=False)
    attempts: int = field(default=0, compare=False)
    # When the change happened: the envelope's `time`, kept by a late or retried delivery.
    happened_at: float = field(default=0.0, compare=False)


class World:
    """Start with `with World(seed) as world:`; everything is torn down and os.environ restored."""

    def __init__(self, seed: int, *, containers: int = 2, process_ends: bool = False) -> None:
        """`process_ends`: the process ends with the run (`python -m tests.simulation`, a fork
        server's child), so moto's state is not reset when the world closes."""
        self.seed = seed
        self._process_ends = process_ends
        self.emulator = Emulator(SimulatedClock(), InProcessFaults(), Capacity(), CrashPlan())
        # One thread decides every interleaving; every AWS call is folded into the step's digest.
        self.interleaver = Interleaver(seed)
        self.digest = CallDigest()
        self._seeded: Any = None
        self._containers_wanted = containers
        self.cloud: LocalCloud | None = None
        self.names: DeployedNames | None = None
        self.launchers: list[LocalFunction] = []
        self.cold_starts = 0
        self._sync: LocalFunction | None = None
        self._instance_events: LocalFunction | None = None
        self._crash_guard: Any = None
        self._session = boto3.session.Session()
        self._clients: dict[str, Any] = {}
        self._no_sleeps: Any = None
        self._backups: Any = None
        self._clients_once = ExitStack()
        self._item_sizes = ItemSizes()
        self.active_faults: list[Fault] = []
        self.pending_events: list[PendingEvent] = []
        self._event_sequence = 0
        self.known_states: dict[str, str] = {}
        self.instances: dict[str, Observed] = {}
        self.restarted: set[str] = set()
        self.events_dead_lettered: list[dict[str, Any]] = []
        self.visibility_timeout = 0
        self.max_receive_count = 0
        self.status_queue_url = ""
        self.subnets: dict[str, str] = {}
        self.image_id = ""
        self.security_group = ""
        self._types: dict[str, dict[str, int]] = {}
        self._offered: list[str] = []
        self._in_sync = False
        self._sync_terminations: list[SyncTermination] = []
        # Who watches the service's own calls as they happen (feature_invariants.py): each has
        # `before(operation, params)` and `after(operation, params)`.
        self.call_watchers: list[Any] = []

    # -- lifecycle ------------------------------------------------------------------------------

    def __enter__(self) -> World:
        # The local cloud in process (local_cloud.cloud), its functions loaded here: several
        # launcher containers, each crashed and cold-started again as the scheduler decides.
        self.cloud = LocalCloud(
            LocalCloudOptions(
                region=REGION,
                in_process=True,
                as_launcher=True,
                wire_functions=False,
                example_network=False,
                function_host=self.host,
                environment=FAKE_ENV,
                prepare=self._prepare,
                reset_on_stop=not self._process_ends,
            )
        )
        self.cloud.start()
        self.names = self.cloud.names
        self._read_queue_settings()
        self.status_queue_url = capture_status_events(
            self.sqs, self.client("events"), self.names.event_bus, "simulation-status-events"
        )
        self._network()
        self._sync = self._load("ReservationSyncFunction")
        self._instance_events = self._load("InstanceEventsFunction")
        self.launchers = [self._load("LauncherFunction") for _ in range(self._containers_wanted)]
        return self

    def _prepare(self) -> None:
        """Once moto is up, before the resources: every source of chance seeded, time simulated,
        and the emulator as strict as AWS documents: fresh instance ids unknown and new
        reservations pending for a moment, transactions on one item conflicting now and then."""
        mock_random.seed(self.seed)
        self.emulator.clock.__enter__()
        self._seeded = seeded_sources(self.seed, self.emulator.clock.now)
        self._seeded.__enter__()
        moto_capacity.set_consistency(CONSISTENCY_SECONDS, CONSISTENCY_SECONDS)
        moto_capacity.set_status_checks(status_check_seconds(self.seed))
        moto_capacity.set_transaction_conflicts(TRANSACTION_CONFLICT_RATE, self.seed)
        self._crash_guard = crashing_calls(
            self.emulator.crashes, self._before_call, self._after_call
        )
        self._crash_guard.__enter__()
        self._no_sleeps = retries_without_sleeping()
        self._no_sleeps.__enter__()
        self._backups = transaction_backups_once_per_table()
        self._backups.__enter__()
        # the region's instance-type catalogue (MBs of XML) is read again by nearly every sync
        # (the simulated clock jumps hours): parsed once; each cold container's new session:
        # botocore's data files read once, each service's model and client class made once,
        # botocore's derived names memoized (as the test session has them). Once a run, or once
        # for every run the fork server forks (tests/support/process_caches.py)
        self._clients_once = ExitStack()
        self._clients_once.enter_context(for_a_run())
        self._clients_once.enter_context(placeholder_signatures())
        # the stored items' sizes (edge_invariants.py), each measured again only once changed
        self._clients_once.enter_context(self._item_sizes.watching_updates())

    def __exit__(self, *_: object) -> None:
        if self._crash_guard is not None:
            self._crash_guard.__exit__(None, None, None)
            self._no_sleeps.__exit__(None, None, None)
            self._backups.__exit__(None, None, None)
            self._clients_once.close()
        if self._seeded is not None:
            self._seeded.__exit__(None, None, None)
            self.emulator.clock.__exit__()
        if self.cloud is not None:
            self.cloud.stop()

    def _load(self, function: str) -> LocalFunction:
        """A new container of `function` (a cold start), on the simulated clock."""
        assert self.cloud is not None
        self.cold_starts += 1
        return self.cloud.function(function)

    @property
    def host(self) -> Host:
        """The functions tell the simulated time (the system's clock, which stands still until
        the scheduler moves it) and wait by moving it: the fleet adapter on fresh ids, a launcher
        on another's claim of an offering (single flight), as they would wait on AWS."""
        return Host(pause=self.emulator.clock.advance)

    def _read_queue_settings(self) -> None:
        assert self.names is not None
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=self.names.launch_queue_url, AttributeNames=["All"]
        )["Attributes"]
        self.visibility_timeout = int(attributes["VisibilityTimeout"])
        self.max_receive_count = int(json.loads(attributes["RedrivePolicy"])["maxReceiveCount"])

    def _network(self) -> None:
        subnets = self.ec2.describe_subnets(
            Filters=[{"Name": "default-for-az", "Values": ["true"]}]
        )["Subnets"]
        self.subnets = {s["AvailabilityZone"]: s["SubnetId"] for s in subnets}
        images = self.ec2.describe_images(Owners=["amazon"])["Images"]
        self.image_id = next(i["ImageId"] for i in images if i.get("Platform") != "windows")
        groups = self.ec2.describe_security_groups(
            Filters=[{"Name": "group-name", "Values": ["default"]}]
        )["SecurityGroups"]
        self.security_group = groups[0]["GroupId"]

    # -- clients (the simulation's own: never faulted, never crashed) ----------------------------

    def client(self, service: str) -> Any:
        """One session for all of them: botocore loads each service model once."""
        if service not in self._clients:
            self._clients[service] = self._session.client(service, region_name=REGION)  # type: ignore[call-overload]
        return self._clients[service]

    @property
    def ec2(self) -> Any:
        return self.client("ec2")

    @property
    def sqs(self) -> Any:
        return self.client("sqs")

    @property
    def dynamodb(self) -> Any:
        return self.client("dynamodb")

    @property
    def now(self) -> float:
        return self.emulator.clock.now()

    # -- producers ------------------------------------------------------------------------------

    def send(self, bodies: Sequence[str]) -> None:
        """Producers' SendMessage straight to the launch queue."""
        assert self.names is not None
        for start in range(0, len(bodies), 10):
            self.sqs.send_message_batch(
                QueueUrl=self.names.launch_queue_url,
                Entries=[
                    {"Id": str(n), "MessageBody": body}
                    for n, body in enumerate(bodies[start : start + 10])
                ],
            )

    def put_launch_requested(self, details: Sequence[str]) -> None:
        """Producers' PutEvents `Launch Requested`; the bus's rule forwards them to the queue."""
        assert self.names is not None
        for start in range(0, len(details), 10):
            self.client("events").put_events(
                Entries=[
                    {
                        "Source": "simulation.producer",
                        "DetailType": "Launch Requested",
                        "Detail": detail,
                        "EventBusName": self.names.event_bus,
                    }
                    for detail in details[start : start + 10]
                ]
            )

    # -- invocations ----------------------------------------------------------------------------

    def _invoke(
        self,
        function: LocalFunction,
        event: Any,
        crash_at: tuple[int, str] | None,
        arm: bool = True,
    ) -> tuple[Invocation | None, str | None, dict[str, int]]:
        """One invocation with the current faults and crash plan armed (unless the caller armed
        them for several at once); a Crash ends it with nothing cleaned up."""
        if arm:
            self.emulator.faults.arm(self.active_faults)
            self.emulator.crashes.arm(crash_at)
        crashed: str | None = None
        invocation: Invocation | None = None
        fired: dict[str, int] = {}
        try:
            invocation = function.invoke(event)
        except Crash as crash:
            crashed = str(crash)
        finally:
            if arm:
                self.emulator.crashes.disarm()
                fired = self.emulator.faults.disarm()
        return invocation, crashed, fired

    def receive_batch(self) -> list[dict[str, Any]]:
        assert self.names is not None
        answer = self.sqs.receive_message(
            QueueUrl=self.names.launch_queue_url,
            MaxNumberOfMessages=10,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
        )
        return list(answer.get("Messages", []))

    def invoke_launcher(
        self,
        container: int,
        messages: list[dict[str, Any]],
        crash_at: tuple[int, str] | None = None,
        arm: bool = True,
    ) -> Invoked:
        """What the event source mapping does with one batch: invoke, delete what succeeded,
        leave the rest to reappear after the visibility timeout (or its shortened visibility)."""
        assert self.names is not None
        mapping = QueueMapping(
            self.names.launch_queue_url,
            self.names.launch_queue_arn,
            report_batch_item_failures=True,
        )
        function = self.launchers[container]
        invocation, crashed, fired = self._invoke(
            function, sqs_event(messages, mapping, REGION), crash_at, arm
        )
        everything = {m["MessageId"] for m in messages}
        if invocation is None or invocation.failed:
            failed = everything
        else:
            result = invocation.result if isinstance(invocation.result, Mapping) else {}
            named = {
                str(f.get("itemIdentifier") or "") for f in result.get("batchItemFailures") or []
            }
            failed = named if named <= everything else everything
        done = [m for m in messages if m["MessageId"] not in failed]
        if done:
            self.sqs.delete_message_batch(
                QueueUrl=self.names.launch_queue_url,
                Entries=[
                    {"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]} for n, m in enumerate(done)
                ],
            )
        if crashed and arm:
            # The runtime replaces a container whose process died.
            self.launchers[container] = self._load("LauncherFunction")
        return Invoked(
            "launcher",
            tuple(m["MessageId"] for m in messages),
            frozenset(failed),
            crashed,
            _error(invocation),
            fired,
        )

    def invoke_launchers_at_once(
        self, batches: list[list[dict[str, Any]]], crash_at: tuple[int, str] | None
    ) -> list[Invoked]:
        """Two containers serving two batches at once: the races that matter, interleaved call by
        call in the order the seed decides (`Interleaver`)."""
        self.emulator.faults.arm(self.active_faults)
        self.emulator.crashes.arm(crash_at)
        jobs = [
            lambda n=n: self.invoke_launcher(n % len(self.launchers), batches[n], arm=False)
            for n in range(len(batches))
        ]
        try:
            answers = self.interleaver.run(jobs)
        finally:
            self.emulator.crashes.disarm()
            fired = self.emulator.faults.disarm()
        for _, error in answers:
            if error is not None:
                raise error
        done = [result for result, _ in answers if result is not None]
        for n, result in enumerate(done):
            if result.crashed:
                self.launchers[n % len(self.launchers)] = self._load("LauncherFunction")
        if done:
            done[0].faults_fired = fired
        return done

    def _before_call(self, operation: str, params: Any) -> None:
        """Every AWS call, anyone's: a scheduled worker waits for its turn, then it is counted."""
        self.interleaver.checkpoint()
        self.digest.add(operation, params)
        if self._in_sync and operation == "ec2:TerminateInstances":
            live = self._live_at_call()
            self._sync_terminations += [
                SyncTermination(i, self._held_in(i), live) for i in params.get("InstanceIds") or []
            ]
        for watcher in self.call_watchers:
            watcher.before(operation, params)

    def _after_call(self, operation: str, params: Any) -> None:
        """A call that succeeded, its effect done (no other worker has run since `before`)."""
        for watcher in self.call_watchers:
            watcher.after(operation, params)

    def take_sync_terminations(self) -> list[SyncTermination]:
        """The instances the sync asked EC2 to terminate since the last look."""
        taken, self._sync_terminations = self._sync_terminations, []
        return taken

    def _live_at_call(self) -> tuple[LiveAtCall, ...]:
        """The managed instances live now, as EC2 holds them (no call, no fault), restarted
        ones left out (the service may count them otherwise: invariants.py)."""
        found = []
        for reservation in list(ec2_backends[ACCOUNT][REGION].reservations.values()):
            for instance in list(reservation.instances):
                tags = {t["key"]: t["value"] for t in instance.get_tags()}
                live = instance._state.name in LIVE and instance.id not in self.restarted
                if live and tags.get(MANAGED) == "true":
                    found.append(
                        LiveAtCall(
                            instance.id,
                            tags.get(POOL_TAG, ""),
                            tags.get(REQUESTER_TAG, ""),
                            instance.instance_type,
                        )
                    )
        return tuple(found)

    @staticmethod
    def _held_in(instance_id: str) -> str | None:
        """The reservation EC2 holds the instance in now (no call, no fault)."""
        instance = ec2_backends[ACCOUNT][REGION].get_instance_by_id(instance_id)
        return None if instance is None else getattr(instance, "capacity_reservation_id", None)

    def run_sync(self, crash_at: tuple[int, str] | None = None, arm: bool = True) -> Invoked:
        assert self._sync is not None
        event = {
            "version": "0",
            "id": str(uuid.uuid4()),
            "detail-type": "Scheduled Event",
            "source": "aws.events",
            "account": ACCOUNT,
            "time": _iso(self.now),
            "region": REGION,
            "resources": [f"arn:aws:events:{REGION}:{ACCOUNT}:rule/schedule"],
            "detail": {},
        }
        self._in_sync = True
        try:
            invocation, crashed, fired = self._invoke(self._sync, event, crash_at, arm)
        finally:
            self._in_sync = False
        if crashed:
            self._sync = self._load("ReservationSyncFunction")
        answer = invocation.result if invocation is not None else None
        counted = (
            (int(answer["waiting"]), self.records_waiting())
            if isinstance(answer, dict) and "waiting" in answer and not answer.get("failedParts")
            else None
        )
        return Invoked(
            "sync", crashed=crashed, error=_error(invocation), faults_fired=fired, waiting=counted
        )

    def records_waiting(self) -> int:
        """The request records Waiting in the state table now (moto's backend: no call)."""
        assert self.names is not None
        table = dynamodb_backends[ACCOUNT][REGION].tables[self.names.state_table]
        return sum(
            1
            for pk, items in list(table.items.items())
            if str(pk.value).startswith("Request#")
            for sk, item in list(items.items())
            if sk.value == "Record"
            and getattr(item.attrs.get("status"), "value", None) == "Waiting"
        )

    # -- EC2's state-change events, late, duplicated, retried ------------------------------------

    def schedule_event(self, instance_id: str, state: str, delay: float) -> None:
        self._event_sequence += 1
        self.pending_events.append(
            PendingEvent(
                self.now + delay,
                self._event_sequence,
                {"instance-id": instance_id, "state": state},
                happened_at=self.now,
            )
        )

    def deliver_due_events(
        self, crash_for: Callable[[], tuple[int, str] | None], limit: int = 50
    ) -> list[Invoked]:
        """Invoke InstanceEvents with each due event; a failed one is retried later, as
        EventBridge does (the rule's RetryPolicy), then dead-lettered."""
        assert self._instance_events is not None
        self.pending_events.sort()
        outcomes: list[Invoked] = []
        while self.pending_events and self.pending_events[0].deliver_at <= self.now and limit:
            limit -= 1
            pending = self.pending_events.pop(0)
            event = {
                "version": "0",
                "id": str(uuid.uuid4()),
                "detail-type": STATE_CHANGE,
                "source": "aws.ec2",
                "account": ACCOUNT,
                "time": _iso(pending.happened_at),
                "region": REGION,
                "resources": [
                    f"arn:aws:ec2:{REGION}:{ACCOUNT}:instance/{pending.detail['instance-id']}"
                ],
                "detail": pending.detail,
            }
            invocation, crashed, fired = self._invoke(self._instance_events, event, crash_for())
            if crashed:
                self._instance_events = self._load("InstanceEventsFunction")
            failed = crashed is not None or invocation is None or invocation.failed
            if failed:
                pending.attempts += 1
                if pending.attempts > 20:
                    self.events_dead_lettered.append(pending.detail)
                else:
                    pending.deliver_at = self.now + min(60.0 * pending.attempts, 600.0)
                    self.pending_events.append(pending)
            outcomes.append(
                Invoked(
                    "instance-events", crashed=crashed, error=_error(invocation), faults_fired=fired
                )
            )
        return outcomes

    # -- observation (moto's backend read directly: no API call, so no fault and no crash) ------

    def observe_instances(self) -> list[tuple[str, str]]:
        """Refresh `instances`; returns (instance id, new state) for every change since the last
        look, as EventBridge would announce them."""
        backend = ec2_backends[ACCOUNT][REGION]
        changes: list[tuple[str, str]] = []
        for reservation in list(backend.reservations.values()):
            for instance in list(reservation.instances):
                state = instance._state.name
                previous = self.known_states.get(instance.id)
                if previous == state:
                    self._retagged(instance)
                    continue
                tags = {t["key"]: t["value"] for t in instance.get_tags()}
                if tags.get(MANAGED) != "true" and instance.id not in self.instances:
                    self.known_states[instance.id] = state
                    continue
                self.known_states[instance.id] = state
                if previous in ("stopping", "stopped") and state in LIVE:
                    self.restarted.add(instance.id)
                self.instances[instance.id] = Observed(
                    instance.id,
                    tags.get(REQUEST_ID_TAG, ""),
                    tags.get(POOL_TAG, ""),
                    state,
                    instance.instance_type,
                    str(instance.placement.zone),
                    getattr(instance, "capacity_reservation_id", None),
                    tags.get(REQUESTER_TAG, ""),
                    getattr(instance, "lifecycle", None),
                    _epoch(instance.launch_time),
                )
                changes.append((instance.id, state))
        return changes

    def _retagged(self, instance: Any) -> None:
        """An instance seen before its tags (a shared fleet's: the launcher tags each request's
        instances after CreateFleet) is read again with them, its state unchanged: what names
        it is its tags now, not at its last state change."""
        observed = self.instances.get(instance.id)
        if observed is None or (observed.request_id and observed.requester):
            return
        tags = {t["key"]: t["value"] for t in instance.get_tags()}
        request_id, requester = tags.get(REQUEST_ID_TAG, ""), tags.get(REQUESTER_TAG, "")
        if (request_id, requester) != (observed.request_id, observed.requester):
            observed.request_id, observed.requester = request_id, requester

    def live_by_pool(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for observed in self.instances.values():
            if observed.state in LIVE:
                counts[observed.pool] = counts.get(observed.pool, 0) + 1
        return counts

    def status_events(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        while True:
            answer = self.sqs.receive_message(
                QueueUrl=self.status_queue_url, MaxNumberOfMessages=10, VisibilityTimeout=0
            )
            messages = answer.get("Messages", [])
            if not messages:
                return found
            found += [json.loads(m["Body"]) for m in messages]
            self.sqs.delete_message_batch(
                QueueUrl=self.status_queue_url,
                Entries=[
                    {"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]}
                    for n, m in enumerate(messages)
                ],
            )

    def queue_depth(self) -> tuple[int, int]:
        """(visible, in flight) messages in the launch queue."""
        assert self.names is not None
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=self.names.launch_queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return (
            int(attributes["ApproximateNumberOfMessages"]),
            int(attributes["ApproximateNumberOfMessagesNotVisible"]),
        )

    def next_wake(self) -> float | None:
        """When something next becomes due on its own: an in-flight launch message visible again
        (moto's queue read directly) or a late EC2 event."""
        assert self.names is not None
        queue = sqs_backends[ACCOUNT][REGION].queues[self.names.launch_queue_url.rsplit("/", 1)[1]]
        moments = [m.visible_at / 1000 for m in list(queue._messages) if not m.visible]
        moments += [e.deliver_at for e in self.pending_events]
        return min(moments) if moments else None

    def dead_letters(self) -> list[str]:
        """Bodies in the launch DLQ, left there: each is hidden for one simulated second (time
        stands still while we read, so no message is seen twice) and comes back after."""
        assert self.names is not None
        bodies: dict[str, str] = {}
        while True:
            answer = self.sqs.receive_message(
                QueueUrl=self.names.dlq_url, MaxNumberOfMessages=10, VisibilityTimeout=1
            )
            messages = answer.get("Messages", [])
            if not messages:
                return list(bodies.values())
            bodies.update({m["MessageId"]: m["Body"] for m in messages})

    # -- stored state, read as an operator would (own client, raw items: a malformed item is
    # reported, never fatal to the check) ---------------------------------------------------------

    def _pool_leases(self) -> PoolLeaseStore:
        settings = get_settings()
        return PoolLeaseStore(
            settings.state_table_name,
            settings.limit_lease_seconds,
            self.dynamodb,
            clock=self.emulator.clock.now,
        )

    def stored_usage(self) -> dict[str, int]:
        """pool → instances its usage item records."""
        assert self.names is not None
        found: dict[str, int] = {}
        pages = self.dynamodb.get_paginator("scan").paginate(
            TableName=self.names.state_table,
            FilterExpression="begins_with(pk, :limits) AND sk = :usage",
            ExpressionAttributeValues={":limits": {"S": "Limits#"}, ":usage": {"S": "Usage"}},
        )
        for page in pages:
            for item in page["Items"]:
                pool = item["pk"]["S"].removeprefix("Limits#")
                found[pool] = int(item.get("instances", {}).get("N", "0"))
        return found

    def counted_items(self, pool: str) -> list[dict[str, Any]]:
        """The pool's open leases and members as stored (raw attributes, for a violation's text:
        what each counts and which quota usage it holds)."""
        assert self.names is not None
        answer = self.dynamodb.query(
            TableName=self.names.state_table,
            KeyConditionExpression="pk = :pk AND sk BETWEEN :from AND :until",
            ExpressionAttributeValues={
                ":pk": {"S": f"Limits#{pool}"},
                ":from": {"S": "Lease#"},
                ":until": {"S": "Member$"},
            },
            ConsistentRead=True,
        )
        return [
            {name: next(iter(value.values())) for name, value in item.items()}
            for item in answer["Items"]
        ]

    def leased(self, pool: str) -> int:
        """Instances leased in the pool and not settled yet."""
        return sum(lease.count for lease in self._pool_leases().leases() if lease.pool == pool)

    def items_over(self, limit: int) -> tuple[int, list[tuple[str, str, int]]]:
        """How many items the template's tables hold, and (table, key, size in bytes as DynamoDB
        counts it) of each larger than `limit`, in key order: read from moto's backend (no call,
        no fault), an item unchanged since the last look not measured again (item_sizes.py)."""
        tables = dynamodb_backends[ACCOUNT][REGION].tables.values()
        held, over = self._item_sizes.over(tables, limit)
        return held, [
            (table.name, f"{item.hash_key.value}/{getattr(item.range_key, 'value', '')}", size)
            for table, item, size in over
        ]

    def stored_document(self, kind: str, name: str) -> str | None:
        """The `document` attribute of a stored configuration item, read from moto's backend
        (no call, no fault): the hub as the service will read it."""
        assert self.names is not None
        table = dynamodb_backends[ACCOUNT][REGION].tables[self.names.state_table]
        for hash_key, items in list(table.items.items()):
            if getattr(hash_key, "value", None) != kind:
                continue
            for range_key, item in list(items.items()):
                if range_key.value == name:
                    found = item.attrs.get("document")
                    return None if found is None else str(found.value)
        return None

    def partition(self, pk: str) -> dict[str, dict[str, Any]]:
        """sk → the item's attributes (plain values: numbers as text) of one state-table
        partition, read from moto's backend (no call, no fault, no turn taken)."""
        assert self.names is not None
        table = dynamodb_backends[ACCOUNT][REGION].tables[self.names.state_table]
        items = table.items.get(DynamoType({"S": pk})) or {}
        return {
            str(sk.value): {name: value.value for name, value in item.attrs.items()}
            for sk, item in list(items.items())
        }

    def left_live_at(self, instance_id: str) -> float | None:
        """When EC2 stopped or terminated the instance (moto's state-transition reason, to the
        second; usage_invariants.py), None if it says none."""
        try:
            reason = ec2_backends[ACCOUNT][REGION].get_instance(instance_id)._reason
        except Exception:
            return None
        found = re.search(r"\((\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC\)", reason or "")
        return _epoch(found.group(1).replace(" ", "T")) if found else None

    def status_checks_passed(self, instance_id: str) -> bool:
        """EC2's truth: the instance runs and its status checks are no longer initializing."""
        backend = ec2_backends[ACCOUNT][REGION]
        try:
            instance = backend.get_instance(instance_id)
        except Exception:
            return False
        return bool(
            instance.state_code == 16
            and instance.instance_status.get("Status") == "ok"
            and instance.system_status.get("Status") == "ok"
        )

    def committed(self, pool: str) -> int:
        """Live instances plus unsettled leases: what a pool holds or was promised. The instances
        as EC2 holds them now, not as last observed: a launch served in the middle of an
        operation (`poll_once`) is not observed before the step ends."""
        leased = sum(lease.count for lease in self._pool_leases().leases() if lease.pool == pool)
        return self._live_now(pool) + leased

    def _live_now(self, pool: str) -> int:
        backend = ec2_backends[ACCOUNT][REGION]
        live = 0
        for reservation in list(backend.reservations.values()):
            for instance in list(reservation.instances):
                tags = {t["key"]: t["value"] for t in instance.get_tags()}
                managed = tags.get(MANAGED) == "true" or instance.id in self.instances
                if managed and tags.get(POOL_TAG) == pool and instance._state.name in LIVE:
                    live += 1
        return live

    def snapshot_availability(self) -> dict[str, int]:
        assert self.names is not None
        answer = self.dynamodb.query(
            TableName=self.names.state_table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :cr)",
            ExpressionAttributeValues={":pk": {"S": "Reservation"}, ":cr": {"S": "cr-"}},
            ConsistentRead=True,
        )
        return {
            item["sk"]["S"]: int(item.get("available", {}).get("N", "-1"))
            for item in answer["Items"]
        }

    def stored_reservation_items(self) -> dict[str, str]:
        """sk → the stored item as moto holds it (read from its backend: no parsing on the way),
        to show what a snapshot that cannot be read contains."""
        assert self.names is not None
        table = dynamodb_backends[ACCOUNT][REGION].tables[self.names.state_table]
        found: dict[str, str] = {}
        for hash_key, items in list(table.items.items()):
            if getattr(hash_key, "value", None) != "Reservation":
                continue
            for range_key, item in list(items.items()):
                found[str(range_key.value)] = json.dumps(item.to_json())
        return found

    def reservations(self) -> dict[str, ReservationView]:
        backend = capacity_backend(ec2_backends[ACCOUNT][REGION])
        return {r.id: _reservation_view(r, self.now) for r in list(backend.reservations.values())}

    def block_extensions(self) -> list[tuple[str, datetime]]:
        """(block, the end it extends from) of every extension ever bought (no call)."""
        backend = capacity_backend(ec2_backends[ACCOUNT][REGION])
        return [
            (r.id, e.offering.start_date)
            for r in list(backend.reservations.values())
            for e in r.block_extensions
        ]

    def reservation_room(self) -> dict[str, int]:
        """Reservation id → the instances EC2 would launch into it now: its available count
        while `active` (other users' instances counted), 0 in any other state. Read from the
        emulator (no call, no fault)."""
        backend = capacity_backend(ec2_backends[ACCOUNT][REGION])
        return {
            r.id: r.available_instance_count if r.state == "active" else 0
            for r in list(backend.reservations.values())
        }

    def reservation_facts(self, reservation_id: str) -> ReservationFacts:
        backend = capacity_backend(ec2_backends[ACCOUNT][REGION])
        return _reservation_facts(backend.reservations[reservation_id])

    def launches_after(self, seen: int) -> list[Launch]:
        """The instances EC2 launched beyond the first `seen` it ever launched (the emulator
        keeps every instance it launched, in order), stamped with the clock now."""
        backend = capacity_backend(ec2_backends[ACCOUNT][REGION])
        found = []
        for instance_id, capacity in list(backend.instances.items())[seen:]:
            attributes, slot = capacity.attributes, capacity.slot
            placement = Placement(
                attributes.instance_type,
                attributes.availability_zone,
                attributes.platform,
                attributes.tenancy,
            )
            reservation_id = None if slot is None else slot.reservation_id
            found.append(
                Launch(instance_id, self.now, placement, capacity.capacity_type, reservation_id)
            )
        return found

    def stored_quota_usage(self) -> dict[tuple[str, str], float]:
        """(QuotaUsage partition, "<attribute>:<requester>") → the amount admission recorded."""
        assert self.names is not None
        found: dict[tuple[str, str], float] = {}
        pages = self.dynamodb.get_paginator("scan").paginate(
            TableName=self.names.state_table,
            FilterExpression="begins_with(pk, :quota)",
            ExpressionAttributeValues={":quota": {"S": "QuotaUsage#"}},
        )
        for page in pages:
            for item in page["Items"]:
                for name, value in item.items():
                    if name.startswith("u:"):
                        found[(item["pk"]["S"], name[2:])] = float(value["N"])
        return found

    def instance_resources(self, instance_type: str) -> dict[str, int]:
        """What one instance of a type counts against quotas: cpu, memory (MiB), gpu, 1."""
        if instance_type not in self._types:
            info = self.ec2.describe_instance_types(InstanceTypes=[instance_type])
            found = info["InstanceTypes"][0]
            gpus = found.get("GpuInfo", {}).get("Gpus", [])
            self._types[instance_type] = {
                "cpu": int(found["VCpuInfo"]["DefaultVCpus"]),
                "memory": int(found["MemoryInfo"]["SizeInMiB"]),
                "nvidia.com/gpu": sum(int(g.get("Count", 0)) for g in gpus),
                "instances": 1,
            }
        return self._types[instance_type]

    def all_instance_types(self) -> list[str]:
        """Every instance type offered in the simulation's zones, in a stable order."""
        if not self._offered:
            pages = self.ec2.get_paginator("describe_instance_type_offerings").paginate(
                LocationType="availability-zone"
            )
            found = {o["InstanceType"] for page in pages for o in page["InstanceTypeOfferings"]}
            self._offered = sorted(found)
        return self._offered

    def transaction_conflicts(self, rate: float) -> None:
        moto_capacity.set_transaction_conflicts(rate, self.seed)

    def ec2_availability(self) -> dict[str, int]:
        found = self.ec2.describe_capacity_reservations()["CapacityReservations"]
        return {
            r["CapacityReservationId"]: int(r["AvailableInstanceCount"])
            for r in found
            if r["State"] == "active"
        }

    def record(self, request_id: str) -> dict[str, Any] | None:
        assert self.names is not None
        item = self.dynamodb.get_item(
            TableName=self.names.state_table,
            Key={"pk": {"S": f"Request#{request_id}"}, "sk": {"S": "Record"}},
            ConsistentRead=True,
        ).get("Item")
        if item is None:
            return None
        try:
            record = LaunchRecords(
                self.names.state_table, self.dynamodb, clock=self.emulator.clock.now
            ).get_record(request_id)
        except Exception as error:
            return {"status": "<malformed>", "instances": [], "error": repr(error)}
        return None if record is None else record.to_detail()


def status_check_seconds(seed: int) -> int:
    """The run's status-check window, from a stream of its own (the run's draws stay the seed's)."""
    return random.Random(f"status-checks:{seed}").randint(*STATUS_CHECK_SECONDS)


def _epoch(moment: Any) -> float:
    """moto's naive-UTC datetimes (or ISO text) as epoch seconds."""
    if isinstance(moment, str):
        moment = datetime.fromisoformat(moment.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return float(moment.timestamp())


def _reservation_view(reservation: Any, now: float) -> ReservationView:
    block = reservation.reservation_type == "capacity-block"
    dated = block or reservation.is_future_dated
    start = _epoch(reservation.start_date if dated else reservation.active_from)
    end = None if reservation.end_date is None else _epoch(reservation.end_date)
    moments = [start]
    for due in (reservation.paid_at, reservation.assessed_at):
        if due is not None:
            moments.append(_epoch(due))
    if end is not None:
        moments.append(end)
        if block:  # EC2 warns 40 minutes before a block ends, and terminates 30 before;
            # 50 minutes before, the service may still launch into it (issue 27: not from 45).
            moments += [end - 50 * 60, end - 40 * 60, end - 30 * 60]
    return ReservationView(
        reservation.id,
        "capacity-block" if block else "future-dated" if dated else "default",
        reservation.state,
        start,
        end,
        reservation.market,
        frozenset(reservation.instance_ids),
        tuple(sorted(m for m in moments if m > now)),
        reservation.instance_match_criteria == "open",
    )


def _reservation_facts(reservation: Any) -> ReservationFacts:
    block = reservation.reservation_type == "capacity-block"
    return ReservationFacts(
        reservation.id,
        Placement(
            reservation.instance_type,
            reservation.availability_zone,
            reservation.instance_platform,
            reservation.tenancy,
        ),
        tuple(sorted((t["key"], t["value"]) for t in reservation.get_tags())),
        reservation.owner_id,
        reservation.instance_match_criteria,
        "capacity-block" if block else "future-dated" if reservation.is_future_dated else "default",
        bool(reservation.interruptible),
        None if reservation.end_date is None else _epoch(reservation.end_date),
    )


def _error(invocation: Invocation | None) -> str | None:
    if invocation is None or invocation.error is None:
        return None
    return f"{invocation.error['errorType']}: {invocation.error['errorMessage']}"[:300]


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
