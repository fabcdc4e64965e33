"""`capacity-launcher demo` (`make run`): the whole story on an embedded local cloud.

Reservations are filled first, a group of reservations is used, a dry on-demand offering is
cached and skipped, a gang request that cannot be met fails (its instances terminated), and an
invalid request is rejected. Two teams share a pool's quota: one borrows, the other takes its
quota back; a request over its quota waits and is admitted when an instance ends. Then a
Capacity Block is bought: a request waits for it, the demo
advances the emulator's clock to its start (the sync announces it Activated, the request is
launched into it), then close to its end (Capacity Block Expiring names the request's instances)
and past it (Expired). Last, a static GPU pool fills another block and is evacuated 2 hours
before its end (Capacity Block Evacuating: replacements off the block first, then the block's
instances terminated before EC2 would). Each outcome is checked against what the story expects.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.live import Live
from rich.spinner import Spinner

import moto_capacity
from capacity_launcher.adapters.launch_records import LaunchRecords
from capacity_launcher.domain.apis.documents import parse_document
from capacity_launcher.domain.apis.priority_classes import PriorityClass
from capacity_launcher.domain.records.status import (
    ALL_DETAIL_TYPES,
    BLOCK_EVACUATING,
    BLOCK_EXPIRING,
    EVENT_SOURCE,
    RECLAIM_REQUESTED,
    RESERVATION_ACTIVATED,
    RESERVATION_EXPIRED,
    LaunchedInstance,
    RequestRecord,
    RequestStatus,
    format_timestamp,
)
from capacity_launcher.domain.records.tags import NODE_POOL
from capacity_launcher_cli import views
from capacity_launcher_cli.capacity_commands import reservation_snapshots, unavailable_offerings
from capacity_launcher_cli.config_commands import (
    priority_references,
    read_documents,
    validate,
    validate_steps,
)
from capacity_launcher_cli.deployment import Deployment
from capacity_launcher_cli.request_commands import PRODUCER_SOURCE, instance_states, send
from capacity_launcher_cli.service import configuration
from capacity_launcher_client.client import LaunchClient, WaitTimedOut
from local_cloud.cloud import LocalCloud, LocalCloudOptions
from local_cloud.documents import capacity_quota
from local_cloud.example_capacity import DEMO_ZONE, GROUP_NAME, OTHER_ZONE, create_reservations
from moto_capacity.core.clock import CLOCK

if TYPE_CHECKING:
    from capacity_launcher.service.configuration import Configuration

DRY_OFFERING = ("m5.large", DEMO_ZONE, "on-demand")
LOG_FILE = Path(".capacity-launcher") / "demo-functions.log"
WAIT_SECONDS = 60.0
# The story looks at a record as often as it polls the rest (every 0.2 s), in flight or Waiting:
# what it waits for comes within a second or two of its cause (`submit --wait` backs off, and
# looks at a Waiting request every 30 s, as it may wait for hours).
LOOK_SECONDS = 0.2
# The GPU chapter: a Capacity Block, and the NodeClass and NodePool that select it by tag.
SYNC_FUNCTION = "ReservationSyncFunction"
GPU_TYPE = "p4d.24xlarge"
GPU_POOL = "gpu-blocks"
BLOCK_TAG = {"reservation": "gpu-block"}
GPU_DOCUMENTS: tuple[dict[str, Any], ...] = (
    {
        "apiVersion": "capacity-launcher/v1",
        "kind": "NodeClass",
        "metadata": {"name": GPU_POOL},
        "spec": {
            "imageSsmParameter": (
                "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-x86_64"
            ),
            "subnetSelectorTerms": [{"tags": {"tier": "private"}}],
            "securityGroupIds": ["sg-0a1b2c3d4e5f67890"],
            "capacityReservationSelectorTerms": [{"tags": BLOCK_TAG}],
        },
    },
    {
        "apiVersion": "capacity-launcher/v1",
        "kind": "NodePool",
        "metadata": {"name": GPU_POOL},
        "spec": {
            "nodeClassRef": GPU_POOL,
            "requirements": [
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved"]},
                {
                    "key": "karpenter.k8s.aws/capacity-reservation-type",
                    "operator": "In",
                    "values": ["capacity-block"],
                },
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [GPU_TYPE]},
            ],
            "limits": {"instances": "4"},
        },
    },
)


QUOTA_POOL = "training"
QUOTA_GRACE = "5m"


def quota_documents(account_id: str) -> tuple[dict[str, Any], ...]:
    """Two teams sharing the training pool in one cohort (examples/quotas has the full form).

    team-ml is bound to where the demo's requests come from (the CLI's source on the bus, this
    account), so a request claiming it from anywhere else would be Rejected."""

    return (
        capacity_quota(
            "team-ml",
            QUOTA_POOL,
            {"instances": "6"},
            priority=100,
            preemption={"reclaimWithinCohort": "LowerPriority", "gracePeriod": QUOTA_GRACE},
            requesterOrigins={
                "team-ml": {"eventSources": [PRODUCER_SOURCE], "accounts": [account_id]}
            },
        ),
        capacity_quota(
            "team-research",
            QUOTA_POOL,
            {"instances": "2"},
            borrowing={"instances": "3"},
            priority=10,
        ),
    )


@dataclass(frozen=True)
class Scene:
    """One request of the story, and what must be true of its record afterwards."""

    title: str
    request: dict[str, Any]
    expect: Callable[[RequestRecord], bool]
    expected: str
    # CreateFleet calls the request may make: shows the ICE cache sparing EC2 a doomed call.
    max_fleet_calls: int | None = None


def _kinds(record: RequestRecord) -> list[str]:
    return [i.capacity_type for i in record.instances]


SCENES = (
    Scene(
        "reserved first: 3 x m5.xlarge, 2 fit the targeted reservation, 1 goes on-demand",
        {"requestId": "train-1", "nodePool": "training", "count": 3, "requester": "team-ml"},
        lambda r: r.status == "Fulfilled" and sorted(_kinds(r)) == ["on-demand", *["reserved"] * 2],
        "Fulfilled: 2 reserved + 1 on-demand",
    ),
    Scene(
        "a reservation group: 3 x c5.large into the group's two reservations",
        {"requestId": "batch-1", "nodePool": "batch", "count": 3, "requester": "team-batch"},
        lambda r: r.status == "Fulfilled" and _kinds(r) == ["reserved"] * 3,
        "Fulfilled: 3 reserved",
    ),
    Scene(
        "a gang of 3 that only 1 reservation slot can take: all or nothing",
        {"requestId": "gang-1", "nodePool": "batch", "count": 3, "minCount": 3},
        lambda r: r.status == "Failed" and r.launched == 0,
        "Failed, nothing left running",
    ),
    Scene(
        f"insufficient capacity: on-demand m5.large is dry in {DEMO_ZONE}",
        {"requestId": "web-1", "nodePool": "general", "count": 2, "singleZone": True},
        lambda r: (
            r.status == "Fulfilled"
            and {i.zone for i in r.instances} == {OTHER_ZONE}
            and any(o.zone == DEMO_ZONE for o in r.unavailable_offerings)
        ),
        f"Fulfilled in {OTHER_ZONE}; {DEMO_ZONE} cached as unavailable",
    ),
    Scene(
        "the cache at work: the next request skips the dry offering without asking EC2",
        {"requestId": "web-2", "nodePool": "general", "count": 1},
        lambda r: r.status == "Fulfilled" and {i.zone for i in r.instances} == {OTHER_ZONE},
        f"Fulfilled in {OTHER_ZONE} with a single CreateFleet call",
        max_fleet_calls=1,
    ),
    Scene(
        "an invalid request: asks for spot from a pool that allows only reserved",
        {
            "requestId": "bad-1",
            "nodePool": "batch",
            "count": 1,
            "requirements": [
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}
            ],
        },
        lambda r: r.status == "Rejected",
        "Rejected, never retried",
    ),
)


def _apply_ome(out: Console, store: Configuration, folder: Path) -> None:
    """OME's reservations as written, after the PriorityClasses they name (docs/ome.md). Their
    flavors name pools the story does not apply, so they admit nothing here; `get
    capacityreservations` shows them."""
    if not folder.is_dir():
        return
    documents = read_documents([str(folder)])
    steps = validate_steps(
        documents, priority_references(documents, store.stored_priority_classes())
    )
    for step in steps:
        store.apply(step.document, step.kept)
    out.print(f"applied {len(steps)} OME documents as written, from {folder}")


def _seconds() -> float:
    """The emulator's clock in epoch seconds, as the local cloud's functions read it."""
    return CLOCK.now().timestamp()


def _final_tables(out: Console, deployment: Deployment) -> None:
    records = LaunchRecords(
        deployment.state_table, deployment.client("dynamodb"), clock=_seconds
    ).list_records()
    ordered = sorted(records, key=lambda r: r.received_at)
    out.print(views.requests(ordered))
    out.print(views.instances(ordered, instance_states(ordered, deployment)))
    out.print(views.reservations(reservation_snapshots(deployment)))
    out.print(views.unavailable_offerings(unavailable_offerings(deployment)))


def _landing(instance: LaunchedInstance) -> str:
    where = f"@{instance.capacity_reservation_id}" if instance.capacity_reservation_id else ""
    return f"{instance.capacity_type}{where} {instance.zone}"


def _fleet_calls() -> int:
    operations: Any = moto_capacity.state().get("operations", {})
    return int(operations.get("ec2:CreateFleet", {}).get("calls", 0))


def _spinner(out: Console, text: str) -> Live:
    """A spinner that leaves stdout alone: the functions' output is routed per thread."""
    return Live(
        Spinner("dots", text),
        console=out,
        transient=True,
        redirect_stdout=False,
        redirect_stderr=False,
    )


def _play(out: Console, deployment: Deployment, records: LaunchRecords) -> int:
    mismatches = 0
    for number, scene in enumerate(SCENES, start=1):
        out.print(f"[bold]{number}. {scene.title}[/]")
        started, calls_before = time.monotonic(), _fleet_calls()
        record = _ask(out, deployment, records, scene.request)
        took, fleet_calls = time.monotonic() - started, _fleet_calls() - calls_before
        if record is None:
            out.print(f"   [red]no status after {WAIT_SECONDS:.0f}s[/]")
            mismatches += 1
            continue
        ok = scene.expect(record) and (
            scene.max_fleet_calls is None or fleet_calls <= scene.max_fleet_calls
        )
        mismatches += not ok
        mark = "[green]as expected[/]" if ok else f"[red]expected {scene.expected}[/]"
        detail = ", ".join(_landing(i) for i in record.instances)
        errors = "; ".join(e.code for e in record.errors)
        out.print(
            f"   {record.status} {record.launched}/{record.requested} in {took:.1f}s, "
            f"{fleet_calls} CreateFleet call(s)"
            f"{': ' + detail if detail else ''}{' (' + errors + ')' if errors else ''} - {mark}"
        )
    return mismatches


def _poll(
    records: LaunchRecords, request_id: str, done: Callable[[RequestRecord], bool]
) -> RequestRecord | None:
    """The request's record once `done` holds (or as it is after WAIT_SECONDS)."""
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        record = records.get_record(request_id)
        if (record is not None and done(record)) or time.monotonic() >= deadline:
            return record
        time.sleep(LOOK_SECONDS)


def _wait(deployment: Deployment, request_id: str) -> RequestRecord | None:
    """The request's final record, looked at every LOOK_SECONDS (or as it is after
    WAIT_SECONDS)."""
    looking = LaunchClient(
        deployment,
        source=PRODUCER_SOURCE,
        poll_seconds=LOOK_SECONDS,
        max_poll_seconds=LOOK_SECONDS,
        waiting_poll_seconds=LOOK_SECONDS,
    )
    try:
        return looking.wait(request_id, timeout=WAIT_SECONDS)
    except WaitTimedOut as timed_out:
        return timed_out.record


def _advance_to(moment: datetime, plus_seconds: float = 0.0) -> None:
    seconds = (moment - CLOCK.now()).total_seconds() + plus_seconds
    if seconds > 0:
        moto_capacity.advance_clock(seconds)


class _Subscription:
    """A queue subscribed to the service's reservation events on its bus, as a consumer would."""

    def __init__(self, deployment: Deployment) -> None:
        self._sqs = deployment.client("sqs")
        events = deployment.client("events")
        self._url = self._sqs.create_queue(QueueName="demo-reservation-events")["QueueUrl"]
        arn = self._sqs.get_queue_attributes(QueueUrl=self._url, AttributeNames=["QueueArn"])
        reservation_events = [t for t in ALL_DETAIL_TYPES if t.startswith("Capacity ")]
        pattern = {"source": [EVENT_SOURCE], "detail-type": reservation_events}
        events.put_rule(
            Name="demo-reservation-events",
            EventBusName=deployment.event_bus,
            EventPattern=json.dumps(pattern),
        )
        events.put_targets(
            Rule="demo-reservation-events",
            EventBusName=deployment.event_bus,
            Targets=[{"Id": "demo", "Arn": arn["Attributes"]["QueueArn"]}],
        )

    def received(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        while messages := self._sqs.receive_message(QueueUrl=self._url, MaxNumberOfMessages=10).get(
            "Messages", []
        ):
            for message in messages:
                found.append(json.loads(message["Body"]))
                self._sqs.delete_message(QueueUrl=self._url, ReceiptHandle=message["ReceiptHandle"])
        return found


@dataclass(frozen=True)
class _Story:
    """What the chapters after the scenes share: where to send, read and listen."""

    deployment: Deployment
    records: LaunchRecords
    subscription: _Subscription


def _sync(cloud: LocalCloud, subscription: _Subscription) -> list[dict[str, Any]]:
    """One run of the reservation sync function (its schedule is off in the demo), and the events
    it published (detail-type and detail), as the subscribed queue received them."""
    cloud.functions[SYNC_FUNCTION].invoke({"detail-type": "Scheduled Event", "detail": {}})
    return subscription.received()


def _told(out: Console, line: str, ok: bool, expected: str) -> int:
    """One line of the story with its verdict; 1 if it is not what the story expects."""
    mark = "[green]as expected[/]" if ok else f"[red]expected {expected}[/]"
    out.print(f"   {line} - {mark}")
    return int(not ok)


def _minute(moment: datetime | str | None) -> str:
    """A time as the story shows it: 2026-11-24 11:30 UTC."""
    if isinstance(moment, str):
        moment = datetime.fromisoformat(moment)
    return moment.strftime("%Y-%m-%d %H:%M UTC") if moment else "?"


def _buy_block(deployment: Deployment) -> dict[str, Any]:
    """PurchaseCapacityBlock: 2 x GPU_TYPE for 24 hours, the first offering in DEMO_ZONE."""
    ec2 = deployment.client("ec2")
    offerings = ec2.describe_capacity_block_offerings(
        InstanceType=GPU_TYPE, InstanceCount=2, CapacityDurationHours=24
    )["CapacityBlockOfferings"]
    offering = next(o for o in offerings if o["AvailabilityZone"] == DEMO_ZONE)
    bought = ec2.purchase_capacity_block(
        CapacityBlockOfferingId=offering["CapacityBlockOfferingId"],
        InstancePlatform="Linux/UNIX",
        TagSpecifications=[
            {
                "ResourceType": "capacity-reservation",
                "Tags": [{"Key": k, "Value": v} for k, v in BLOCK_TAG.items()],
            }
        ],
    )
    return bought["CapacityReservation"]  # type: ignore[no-any-return]


def _ask(
    out: Console, deployment: Deployment, records: LaunchRecords, request: dict[str, Any]
) -> RequestRecord | None:
    """Send one request on the bus, as a producer would, and wait for its status record."""
    send(request, deployment, "bus")
    with _spinner(out, f"   {request['requestId']}: waiting for its status..."):
        return _wait(deployment, str(request["requestId"]))


def _play_quotas(out: Console, cloud: LocalCloud, story: _Story, first: int) -> int:
    """The quota chapter: team-research borrows team-ml's idle quota, team-ml takes it back."""
    deployment = story.deployment
    store = configuration(deployment)
    for document in quota_documents(deployment.client("sts").get_caller_identity()["Account"]):
        store.apply(parse_document(document))
    _sync(cloud, story.subscription)  # the sync counts team-ml's running train-1 against its quota
    out.print(
        f"[bold]{first}. team quotas in pool {QUOTA_POOL}, cohort research: team-ml 6 instances "
        "(running 3), team-research 2 and may borrow 3 more[/]"
    )
    need = {"requestId": "ml-2", "nodePool": QUOTA_POOL, "count": 3, "minCount": 3}
    need["requester"] = "team-ml"
    return (
        _quota_borrowed(out, story)
        + _quota_reclaimed(out, cloud, story, need)
        + _quota_taken_back(out, story, {**need, "requestId": "ml-3"})
    )


def _status(record: RequestRecord | None) -> str:
    return f"{record.status}" if record else "no status"


def _launched(record: RequestRecord | None) -> int:
    return record.launched if record else 0


def _quota_borrowed(out: Console, story: _Story) -> int:
    borrow = {"requestId": "research-1", "nodePool": QUOTA_POOL, "count": 5}
    record = _ask(out, story.deployment, story.records, {**borrow, "requester": "team-research"})
    return _told(
        out,
        f"team-research asks for 5: {_status(record)} "
        f"{_launched(record)}/5 (3 of them borrowed from team-ml)",
        record is not None and record.status is RequestStatus.FULFILLED,
        "Fulfilled 5/5",
    )


def _quota_reclaimed(out: Console, cloud: LocalCloud, story: _Story, need: dict[str, Any]) -> int:
    """team-ml's gang fails on its quota and asks for team-research's borrowed instances back;
    past the grace period the sync terminates them."""
    deployment, subscription = story.deployment, story.subscription
    record = _ask(out, deployment, story.records, need)
    asked = [e for e in subscription.received() if e["detail-type"] == RECLAIM_REQUESTED]
    named = [i["instanceId"] for e in asked for i in e["detail"]["instances"]]
    codes = [e.code for e in record.errors] if record else []
    mismatches = _told(
        out,
        f"team-ml asks for a gang of 3 of its own: {_status(record)} "
        f"({', '.join(codes)}); "
        f"{RECLAIM_REQUESTED}: {len(named)} of team-research's instances, grace {QUOTA_GRACE}",
        record is not None
        and record.status is RequestStatus.FAILED
        and codes == ["QuotaExceeded"]
        and len(named) == 3,
        f"Failed (QuotaExceeded) and {RECLAIM_REQUESTED} naming 3 instances",
    )
    moto_capacity.advance_clock(5 * 60 + 1)
    _sync(cloud, subscription)
    gone = _poll_states(deployment, named, "terminated")
    return mismatches + _told(
        out,
        f"clock moved past the grace period; the sync terminated {len(gone)} of them",
        sorted(gone) == sorted(named),
        "the 3 named instances terminated",
    )


def _quota_taken_back(out: Console, story: _Story, need: dict[str, Any]) -> int:
    record = _ask(out, story.deployment, story.records, need)
    return _told(
        out,
        f"team-ml asks again: {_status(record)} {_launched(record)}/3",
        record is not None and record.status is RequestStatus.FULFILLED,
        "Fulfilled 3/3",
    )


def _play_queue(out: Console, story: _Story, first: int) -> int:
    """The queue chapter: team-research asks for one more than its quota lends while team-ml
    uses all of its own; with `waitForCapacityUntil` it waits instead of failing, and is admitted
    when one of team-ml's instances ends (the instance's event wakes the queue's head)."""
    deployment, records = story.deployment, story.records
    out.print(
        f"[bold]{first}. queue, don't refuse: team-research asks for 1 more with "
        "waitForCapacityUntil in 30 minutes[/]"
    )
    until = (CLOCK.now() + timedelta(minutes=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    request: dict[str, Any] = {"requestId": "research-2", "nodePool": QUOTA_POOL, "count": 1}
    request.update(requester="team-research", waitForCapacityUntil=until)
    send(request, deployment, "bus")
    with _spinner(out, "   research-2: waiting for its status..."):
        waiting = _poll(records, "research-2", lambda r: True)
    awaited = [f"{a.kind} {a.node_pool}" for a in waiting.waiting_for] if waiting else []
    mismatches = _told(
        out,
        f"research-2: {_status(waiting)}, waiting for {', '.join(awaited) or 'nothing'}",
        waiting is not None and waiting.status is RequestStatus.WAITING,
        f"Waiting (Quota {QUOTA_POOL})",
    )
    taken = records.get_record("ml-3")
    ending = taken.instances[0].instance_id if taken and taken.instances else None
    if ending is not None:
        deployment.client("ec2").terminate_instances(InstanceIds=[ending])
    with _spinner(out, "   research-2: waiting to be admitted..."):
        admitted = _wait(deployment, "research-2")
    return mismatches + _told(
        out,
        f"team-ml's {ending} terminated; research-2: {_status(admitted)} "
        f"{_launched(admitted)}/1, borrowing what team-ml no longer uses",
        admitted is not None and admitted.status is RequestStatus.FULFILLED,
        "Fulfilled 1/1 once an instance of team-ml ended",
    )


def _poll_states(deployment: Deployment, instance_ids: list[str], state: str) -> list[str]:
    """The instances among `instance_ids` in `state` (waiting up to WAIT_SECONDS for all)."""
    ec2 = deployment.client("ec2")
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        found = ec2.describe_instances(InstanceIds=instance_ids) if instance_ids else {}
        there = [
            i["InstanceId"]
            for r in found.get("Reservations", [])
            for i in r["Instances"]
            if i["State"]["Name"] == state
        ]
        if len(there) == len(instance_ids) or time.monotonic() >= deadline:
            return there
        time.sleep(LOOK_SECONDS)


def _play_block(out: Console, cloud: LocalCloud, story: _Story, first: int) -> int:
    """The GPU chapter: a block bought, waited for, activated on the clock, filled, expiring."""
    deployment = story.deployment
    store = configuration(deployment)
    for document in GPU_DOCUMENTS:
        store.apply(parse_document(document))
    block = _buy_block(deployment)
    block_id, start, end = block["CapacityReservationId"], block["StartDate"], block["EndDate"]
    _sync(cloud, story.subscription)  # the sync sees it scheduled
    out.print(
        f"[bold]{first}. a Capacity Block bought: 2 x {GPU_TYPE} in {DEMO_ZONE}, "
        f"{_minute(start)} to {_minute(end)}; pool {GPU_POOL} selects it by tag[/]"
    )
    return (
        _block_waited_for(out, story, block_id, start)
        + _block_activated(out, cloud, story, block_id, start)
        + _block_expiring(out, cloud, story, end)
        + _block_expired(out, cloud, story, end)
    )


def _block_waited_for(out: Console, story: _Story, block_id: str, start: datetime) -> int:
    """gpu-1 may wait two hours past the block's start: it waits for the block."""
    until = start + timedelta(hours=2)
    request = {
        "requestId": "gpu-1",
        "nodePool": GPU_POOL,
        "count": 2,
        "minCount": 2,
        "requester": "team-ml",
        "waitForCapacityUntil": format_timestamp(until),
    }
    send(request, story.deployment, "bus")
    waiting = _poll(story.records, "gpu-1", lambda r: True)
    awaited = (
        [f"{r.capacity_reservation_id} ({r.state})" for r in waiting.waiting_for] if waiting else []
    )
    return _told(
        out,
        f"gpu-1, 2 nodes, may wait until {_minute(until)}: "
        f"{_status(waiting)} for {', '.join(awaited) or '-'}",
        waiting is not None
        and waiting.status is RequestStatus.WAITING
        and [r.capacity_reservation_id for r in waiting.waiting_for] == [block_id],
        f"Waiting for {block_id}",
    )


def _block_activated(
    out: Console, cloud: LocalCloud, story: _Story, block_id: str, start: datetime
) -> int:
    """At the block's start the sync announces it active and gpu-1 launches into it."""
    _advance_to(start, 1)
    activated = [e["detail-type"] for e in _sync(cloud, story.subscription)]
    mismatches = _told(
        out,
        f"clock moved to {_minute(start)}: {', '.join(activated) or 'no event'}",
        RESERVATION_ACTIVATED in activated,
        RESERVATION_ACTIVATED,
    )
    record = _poll(story.records, "gpu-1", lambda r: r.is_final)
    landed = ", ".join(_landing(i) for i in record.instances) if record else ""
    return mismatches + _told(
        out,
        f"gpu-1 came back from the queue: {_status(record)}: {landed}",
        record is not None
        and record.status is RequestStatus.FULFILLED
        and {i.capacity_reservation_id for i in record.instances} == {block_id},
        f"Fulfilled in {block_id}",
    )


def _block_expiring(out: Console, cloud: LocalCloud, story: _Story, end: datetime) -> int:
    _advance_to(end, -50 * 60)
    expiring = [e for e in _sync(cloud, story.subscription) if e["detail-type"] == BLOCK_EXPIRING]
    detail = expiring[0]["detail"] if expiring else {}
    instances = [i["instanceId"] for i in detail.get("instances", [])]
    return _told(
        out,
        f"clock moved to 50 min before the end: {BLOCK_EXPIRING}: "
        f"{len(instances)} instance(s) of {', '.join(detail.get('requestIds', [])) or '-'} "
        f"terminated at {_minute(detail.get('instancesTerminatedAt'))}",
        detail.get("requestIds") == ["gpu-1"] and len(instances) == 2,
        f"{BLOCK_EXPIRING} naming gpu-1's 2 instances",
    )


def _block_expired(out: Console, cloud: LocalCloud, story: _Story, end: datetime) -> int:
    _advance_to(end, 1)
    ended = [e["detail-type"] for e in _sync(cloud, story.subscription)]
    return _told(
        out,
        f"clock moved past the end: {', '.join(ended) or 'no event'}",
        RESERVATION_EXPIRED in ended,
        RESERVATION_EXPIRED,
    )


# The evacuation chapter: a static GPU pool on a Capacity Block, evacuated before the block ends.
STATIC_GPU_POOL = "gpu-static"
EVACUATION_LEAD = timedelta(minutes=120)


def _static_gpu_documents(block_id: str) -> list[dict[str, Any]]:
    """A NodeClass selecting the block by id, and a static pool of 2 on it (reserved first,
    on-demand allowed: where an evacuation may go; in the block's zone) that evacuates 2 hours
    before the end."""
    node_class = json.loads(json.dumps(GPU_DOCUMENTS[0]))
    node_class["metadata"]["name"] = STATIC_GPU_POOL
    node_class["spec"]["capacityReservationSelectorTerms"] = [{"id": block_id}]
    pool = {
        "apiVersion": "capacity-launcher/v1",
        "kind": "NodePool",
        "metadata": {"name": STATIC_GPU_POOL},
        "spec": {
            "nodeClassRef": STATIC_GPU_POOL,
            "replicas": 2,
            "requirements": [
                {
                    "key": "karpenter.sh/capacity-type",
                    "operator": "In",
                    "values": ["reserved", "on-demand"],
                },
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [GPU_TYPE]},
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [DEMO_ZONE]},
            ],
            "capacityBlockEnd": {
                "action": "Evacuate",
                "leadMinutes": int(EVACUATION_LEAD.total_seconds() // 60),
            },
        },
    }
    return [node_class, pool]


def _static_running(deployment: Deployment, count: int) -> dict[str, str | None]:
    """The static GPU pool's running instances and the reservation each is in, once there are
    `count` of them (waiting up to WAIT_SECONDS)."""
    ec2 = deployment.client("ec2")
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        found = ec2.describe_instances(
            Filters=[
                {"Name": f"tag:{NODE_POOL}", "Values": [STATIC_GPU_POOL]},
                {"Name": "instance-state-name", "Values": ["pending", "running"]},
            ]
        )
        there = {
            i["InstanceId"]: i.get("CapacityReservationId")
            for r in found["Reservations"]
            for i in r["Instances"]
        }
        if len(there) == count or time.monotonic() >= deadline:
            return there
        time.sleep(LOOK_SECONDS)


def _play_evacuation(out: Console, cloud: LocalCloud, story: _Story, first: int) -> int:
    """The evacuation chapter: a static GPU pool fills a Capacity Block when it starts; 2 hours
    before its end the sync launches replacements elsewhere (capacityBlockEnd: Evacuate), and
    lets the block's instances go only once they run, before EC2 would end them."""
    deployment = story.deployment
    block = _buy_block(deployment)
    block_id, start, end = block["CapacityReservationId"], block["StartDate"], block["EndDate"]
    store = configuration(deployment)
    for document in _static_gpu_documents(block_id):
        store.apply(parse_document(document))
    out.print(
        f"[bold]{first}. a static pool on a Capacity Block: {STATIC_GPU_POOL} keeps 2 x "
        f"{GPU_TYPE} on {block_id} ({_minute(start)} to {_minute(end)}), evacuating "
        f"{int(EVACUATION_LEAD.total_seconds() // 3600)} h before the end[/]"
    )
    _advance_to(start, 60)
    _sync(cloud, story.subscription)
    with _spinner(out, f"   {STATIC_GPU_POOL}: filling the block..."):
        filled = _static_running(deployment, 2)
    in_block = sorted(i for i, r in filled.items() if r == block_id)
    mismatches = _told(
        out,
        f"clock moved to {_minute(start)}: the sync launched {len(filled)} for "
        f"{STATIC_GPU_POOL}, {len(in_block)} in the block",
        len(in_block) == 2,
        "2 instances in the block",
    )
    _advance_to(end - EVACUATION_LEAD, 60)
    told = [e for e in _sync(cloud, story.subscription) if e["detail-type"] == BLOCK_EVACUATING]
    detail = told[0]["detail"] if told else {}
    with _spinner(out, f"   {STATIC_GPU_POOL}: replacements launching..."):
        beside = _static_running(deployment, 4)
    elsewhere = sorted(i for i, r in beside.items() if r != block_id)
    mismatches += _told(
        out,
        f"clock moved to {_minute(end - EVACUATION_LEAD)}: {BLOCK_EVACUATING} "
        f"({detail.get('reason', '-')}) for {len(detail.get('instances', []))} instance(s); "
        f"{len(elsewhere)} replacement(s) running off the block beside them",
        detail.get("instances") == in_block and len(elsewhere) == 2,
        f"{BLOCK_EVACUATING} naming the block's 2 instances, 2 replacements elsewhere",
    )
    _sync(cloud, story.subscription)
    gone = _poll_states(deployment, in_block, "terminated")
    left = _static_running(deployment, 2)
    return mismatches + _told(
        out,
        f"the next minute the sync terminated the block's {len(gone)} instance(s), before EC2 "
        f"would at {_minute(detail.get('instancesTerminatedAt'))}; {STATIC_GPU_POOL} still runs "
        f"{len(left)}, none in the block",
        sorted(gone) == in_block and len(left) == 2 and block_id not in left.values(),
        "the block's 2 instances terminated, the pool at 2 off the block",
    )


def run_demo(examples: str = "examples") -> int:
    out = views.console()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    LOG_FILE.parent.mkdir(parents=True, exist_ok=True)
    with LOG_FILE.open("w", encoding="utf-8") as function_logs:
        options = LocalCloudOptions(
            port=0, schedules=False, visibility_timeout_seconds=10, function_logs=function_logs
        )
        with _spinner(out, "starting the local cloud (moto + moto_capacity, template.yaml)..."):
            cloud = LocalCloud(options)
            deployment = cloud.start()
        try:
            out.print(f"local cloud at {deployment.endpoint_url}; function logs in {LOG_FILE}")
            store = configuration(deployment)
            for document in validate(read_documents([examples])):
                assert not isinstance(document, PriorityClass)  # examples/ome has those
                store.apply(document)
                out.print(f"applied {document.kind.lower()}/{document.name}")
            _apply_ome(out, store, Path(examples) / "ome")
            create_reservations(deployment)
            moto_capacity.set_capacity(deployment.region, *DRY_OFFERING, 0)
            out.print(
                "reservations: 2 x m5.xlarge targeted (training); group "
                f"{GROUP_NAME}: 2 x c5.large in {DEMO_ZONE} + 2 in {OTHER_ZONE}; "
                f"on-demand {' '.join(DRY_OFFERING[:2])} set dry"
            )
            records = LaunchRecords(
                deployment.state_table, deployment.client("dynamodb"), clock=_seconds
            )
            mismatches = _play(out, deployment, records)
            story = _Story(deployment, records, _Subscription(deployment))
            mismatches += _play_quotas(out, cloud, story, len(SCENES) + 1)
            mismatches += _play_queue(out, story, len(SCENES) + 2)
            mismatches += _play_block(out, cloud, story, len(SCENES) + 3)
            mismatches += _play_evacuation(out, cloud, story, len(SCENES) + 4)
            _final_tables(out, deployment)
        finally:
            cloud.stop()
    if mismatches:
        out.print(f"[red]{mismatches} request(s) did not end as the story expects[/]")
        return 1
    out.print(
        "[green]done: every request ended as expected; the local cloud is stopped, "
        "its instances with it[/]"
    )
    return 0
