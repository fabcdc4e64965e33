"""submit, status, and the request-side `get` tables: what a producer and an operator see."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from capacity_launcher.adapters.launch_records import LaunchRecords
from capacity_launcher.domain.errors import InvalidLaunchRequest, RequestIdReused
from capacity_launcher.domain.launch_request import parse_launch_request
from capacity_launcher.domain.status import (
    LAUNCH_REQUESTED,
    ErrorDetail,
    RequestRecord,
    RequestStatus,
    format_timestamp,
)
from capacity_launcher.service import wiring
from capacity_launcher_cli import views
from capacity_launcher_cli.deployment import Deployment

# Producers are not the service: status events carry source "capacity-launcher", requests this.
PRODUCER_SOURCE = "capacity-launcher.cli"
POLL_SECONDS = 0.5
EXIT_FAILED = 1
EXIT_TIMED_OUT = 2


class UsageError(ValueError):
    """A flag the CLI cannot turn into a request field."""


def parse_requirement(text: str) -> dict[str, Any]:
    """`KEY=OP:V1,V2`, or `KEY=Exists` / `KEY=DoesNotExist` without values."""
    key, sep, rest = text.partition("=")
    if not sep or not key or not rest:
        raise UsageError(f"--requirement {text!r}: expected KEY=OPERATOR:V1,V2 or KEY=Exists")
    operator, _, values = rest.partition(":")
    requirement: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        requirement["values"] = [v for v in values.split(",") if v]
    return requirement


def parse_tag(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise UsageError(f"--tag {text!r}: expected KEY=VALUE")
    return key, value


def request_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The launch request JSON; not validated here: the service judges it (and may reject it)."""
    request: dict[str, Any] = {}
    if args.filename:
        loaded = json.loads(Path(args.filename).read_text(encoding="utf-8"))
        if not isinstance(loaded, dict):
            raise UsageError(f"{args.filename}: a launch request is a JSON object")
        request.update(loaded)
    flags = {
        "requestId": args.request_id,
        "nodePool": args.node_pool,
        "count": args.count,
        "minCount": args.min_count,
        "singleZone": True if args.single_zone else None,
        "requester": args.requester,
    }
    request.update({k: v for k, v in flags.items() if v is not None})
    if args.requirement:
        request["requirements"] = [parse_requirement(r) for r in args.requirement]
    if args.tag:
        request["tags"] = dict(parse_tag(t) for t in args.tag)
    if "requestId" not in request:
        request["requestId"] = f"cli-{int(time.time() * 1000)}"
    return request


def send(request: dict[str, Any], deployment: Deployment, via: str) -> None:
    body = json.dumps(request)
    if via == "queue":
        deployment.client("sqs").send_message(
            QueueUrl=deployment.launch_queue_url, MessageBody=body
        )
        return
    response = deployment.client("events").put_events(
        Entries=[
            {
                "Source": PRODUCER_SOURCE,
                "DetailType": LAUNCH_REQUESTED,
                "Detail": body,
                "EventBusName": deployment.event_bus,
            }
        ]
    )
    if response.get("FailedEntryCount"):
        entry = response["Entries"][0]
        raise RuntimeError(f"PutEvents refused the request: {entry.get('ErrorCode')} {entry}")


def wait_for(
    records: LaunchRecords,
    request_id: str,
    timeout_seconds: float,
    body_hash: str | None = None,
    progress: Callable[[str], None] = lambda _state: None,
) -> RequestRecord | None:
    """Poll the record until the request is finished, for at most `timeout_seconds`; then the
    record as it is (None, or Waiting for scheduled capacity). When the requestId is bound to
    another body than `body_hash`, the launcher refuses this one (RequestIdReused): its refusal,
    as its Launch Rejected event says, not the other request's record. `progress` is told the
    request's state at each poll (views.WaitProgress shows its changes)."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        bound = records.bound_body(request_id) if body_hash else None
        if bound is not None and bound != body_hash:
            refused = RequestIdReused(request_id)
            error = ErrorDetail(code=refused.code, message=refused.reason)
            return RequestRecord.rejected(request_id, [error], received_at=datetime.now(UTC))
        record = records.get_record(request_id)
        progress(waiting_state(record))
        if (record is not None and record.is_final) or time.monotonic() >= deadline:
            return record
        time.sleep(POLL_SECONDS)


def waiting_state(record: RequestRecord | None) -> str:
    """What a person waiting on a request is told it is doing now."""
    if record is None:
        return "no record yet: queued, or being served"
    if record.status is RequestStatus.WAITING:
        awaited = ", ".join(r.capacity_reservation_id for r in record.waiting_for)
        until = record.wait_for_capacity_until
        return f"Waiting for {awaited or 'scheduled capacity'}" + (
            f" until {format_timestamp(until)}" if until else ""
        )
    return f"{record.status} ({record.launched}/{record.requested} launched)"


def _body_hash(request: dict[str, Any]) -> str | None:
    """The hash the launcher binds the requestId to (None for a body it will refuse anyway)."""
    try:
        return parse_launch_request(request).body_hash()
    except InvalidLaunchRequest:
        return None


def exit_code(record: RequestRecord) -> int:
    ok = (RequestStatus.FULFILLED, RequestStatus.PARTIALLY_FULFILLED)
    return 0 if record.status in ok else EXIT_FAILED


def submit(args: argparse.Namespace, deployment: Deployment) -> int:
    try:
        request = request_from_args(args)
    except (UsageError, OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_FAILED
    send(request, deployment, args.via)
    print(f"submitted {request['requestId']} via {args.via}", file=sys.stderr)
    if not args.wait:
        print(request["requestId"])
        return 0
    records = wiring.launch_records(deployment.settings(), deployment.client)
    with views.WaitProgress(str(request["requestId"])) as progress:
        record = wait_for(
            records, str(request["requestId"]), args.timeout, _body_hash(request), progress
        )
    if record is None:
        print(f"error: no status for {request['requestId']} after {args.timeout}s", file=sys.stderr)
        return EXIT_TIMED_OUT
    views.print_json(record.to_detail())
    if not record.is_final:
        print(f"{request['requestId']} is still waiting after {args.timeout}s", file=sys.stderr)
        return EXIT_TIMED_OUT
    return exit_code(record)


def status(args: argparse.Namespace, deployment: Deployment) -> int:
    records = wiring.launch_records(deployment.settings(), deployment.client)
    if args.wait:
        with views.WaitProgress(args.request_id) as progress:
            record = wait_for(records, args.request_id, args.timeout, progress=progress)
    else:
        record = records.get_record(args.request_id)
    if record is None:
        print(
            f"error: no record for {args.request_id}: not received yet, still in progress, "
            "or unknown",
            file=sys.stderr,
        )
        return EXIT_TIMED_OUT if args.wait else EXIT_FAILED
    views.print_json(record.to_detail())
    return 0


def get_requests(args: argparse.Namespace, deployment: Deployment) -> int:
    records = wiring.launch_records(deployment.settings(), deployment.client).list_records()
    if args.output == "json":
        views.print_json([r.to_detail() for r in records])
    else:
        views.console().print(views.requests(records))
    return 0


def instance_states(records: list[RequestRecord], deployment: Deployment) -> dict[str, str]:
    """The state of each instance the records name, by id, for those with an instance item."""
    ids = [i.instance_id for record in records for i in record.instances]
    kept = wiring.instance_records(deployment.settings(), deployment.client).many(ids)
    return {instance_id: item.state for instance_id, item in kept.items()}


def get_instances(args: argparse.Namespace, deployment: Deployment) -> int:
    """Every instance the requests launched, with its state now (from its instance item, which
    instance events keep: running, stopped, terminated…; `-` when the service has none)."""
    records = wiring.launch_records(deployment.settings(), deployment.client).list_records()
    states = instance_states(records, deployment)
    if args.output == "json":
        views.print_json(views.instance_details(records, states))
    else:
        views.console().print(views.instances(records, states))
    return 0
