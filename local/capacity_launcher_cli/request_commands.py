"""submit, status, and the request-side `get` tables: what a producer and an operator see."""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import warnings
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from capacity_launcher.domain.errors import InvalidLaunchRequest, RequestRejected
from capacity_launcher.domain.launch_request import LaunchRequest
from capacity_launcher.domain.records.status import RequestRecord, RequestStatus, format_timestamp
from capacity_launcher_cli import named, views
from capacity_launcher_cli.deployment import Deployment
from capacity_launcher_cli.emulator_clock import service_clock
from capacity_launcher_cli.field_selectors import selects
from capacity_launcher_cli.service import adapters, queries
from capacity_launcher_client.client import (
    LaunchClient,
    PoolNotChecked,
    ProgressCallback,
    Via,
    WaitTimedOut,
)

# Producers are not the service: status events carry source "capacity-launcher", requests this.
PRODUCER_SOURCE = "capacity-launcher.cli"
# `--wait`'s first look, after which the client backs off (docs/producers.md: 1.5 times later
# each, up to 5 s apart): a request served in a second or two (the launch queue's one-second
# batching window, then the launcher) is seen at 1.2 s or 2 s, not at 1.25 s or 2.4 s.
POLL_SECONDS = 0.25
# Exit codes (docs/cli.md, "Exit codes"): 2 is argparse's usage error, never a wait's end.
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_TIMED_OUT = 3
# `get requests` lists the newest this many records (one Query per index shard each).
LIST_LIMIT = 100


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


def request_file(filename: str) -> dict[str, Any]:
    """`submit -f FILE`: one launch request, a JSON object; a UsageError naming the file and the
    rule otherwise."""
    try:
        text = Path(filename).read_text(encoding="utf-8")
    except OSError as error:
        raise UsageError(f"{filename}: cannot read: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise UsageError(
            f"{filename}: not UTF-8 text (a launch request is a JSON object)"
        ) from None
    try:
        loaded = json.loads(text)
    except json.JSONDecodeError as error:
        raise UsageError(
            f"{filename}: not valid JSON (a launch request is a JSON object): {error.msg} at "
            f"line {error.lineno} column {error.colno}"
        ) from None
    if not isinstance(loaded, dict):
        raise UsageError(f"{filename}: a launch request is a JSON object")
    return loaded


# A duration from now: `--wait-for-capacity-until 30m`.
_DURATION = re.compile(r"^(\d{1,7})([smhd])$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_until(text: str, now: Callable[[], datetime]) -> str:
    """`--wait-for-capacity-until`: an ISO-8601 time with a zone, or a duration from `now`
    (the service's clock), as the ISO-8601 UTC time the request carries."""
    duration = _DURATION.match(text.strip())
    if duration:
        seconds = int(duration.group(1)) * _UNIT_SECONDS[duration.group(2)]
        return _utc(now() + timedelta(seconds=seconds))
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise UsageError(
            f"--wait-for-capacity-until {text!r}: expected an ISO-8601 time with a time zone "
            "(2026-11-24T12:00:00Z) or a duration from now (90s, 30m, 2h, 1d)"
        )
    return _utc(moment)


def _utc(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def request_from_args(
    args: argparse.Namespace, now: Callable[[], datetime] | None = None
) -> dict[str, Any]:
    """The launch request JSON; not validated here: the service judges it (and may reject it).
    `now`: the service's clock, read only for a duration (`--wait-for-capacity-until 30m`)."""
    request: dict[str, Any] = {}
    if args.filename:
        request.update(request_file(args.filename))
    flags = {
        "requestId": args.request_id,
        "nodePool": args.node_pool,
        "count": args.count,
        "minCount": args.min_count,
        "singleZone": True if args.single_zone else None,
        "requester": args.requester,
        "priorityClassName": args.priority_class_name,
    }
    request.update({k: v for k, v in flags.items() if v is not None})
    if args.requirement:
        request["requirements"] = [parse_requirement(r) for r in args.requirement]
    if args.tag:
        request["tags"] = dict(parse_tag(t) for t in args.tag)
    if args.wait_for_capacity_until:
        clock = now or (lambda: datetime.now(UTC))
        request["waitForCapacityUntil"] = parse_until(args.wait_for_capacity_until, clock)
    if "requestId" not in request:
        request["requestId"] = f"cli-{int(time.time() * 1000)}"
    return request


def client(deployment: Deployment, source: str = PRODUCER_SOURCE) -> LaunchClient:
    """The producer's client; `source`: its events' source on the bus (the CLI's own unless
    `submit --source` names a scheduler's)."""
    return LaunchClient(deployment, source=source, poll_seconds=POLL_SECONDS)


def send(
    request: dict[str, Any], deployment: Deployment, via: Via, source: str = PRODUCER_SOURCE
) -> LaunchRequest:
    """Send a request `checked` has judged; the request as sent."""
    return client(deployment, source).submit(request, via=via, check=False)


def wait_for(
    deployment: Deployment,
    request: str | LaunchRequest,
    timeout_seconds: float,
    progress: ProgressCallback | None = None,
) -> RequestRecord | None:
    """The request's final record; on timeout the record as it is (None, or Waiting).
    `progress` is told each look (views.WaitProgress shows the state's changes)."""
    try:
        return client(deployment).wait(request, timeout=timeout_seconds, on_progress=progress)
    except WaitTimedOut as timed_out:
        return timed_out.record


def exit_code(record: RequestRecord) -> int:
    ok = (RequestStatus.FULFILLED, RequestStatus.PARTIALLY_FULFILLED)
    if record.status in ok:
        return 0
    return EXIT_TIMED_OUT if record.status is RequestStatus.WAITING else EXIT_FAILED


def checked(request: dict[str, Any], deployment: Deployment) -> LaunchRequest:
    """The request as the service would read it, its pool resolved as the launcher resolves it
    (the pool exists, the requirements only narrow it, its tags fit): InvalidLaunchRequest or
    RequestRejected, naming the field and the rule, before anything is sent. The client's own
    check (LaunchClient.check), on the service's clock (the emulator's, locally)."""
    judge = LaunchClient(deployment, now=service_clock(deployment))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PoolNotChecked)
        parsed = judge.check(request)
    # A producer with only the producers' policy may not read NodePools: the model has judged
    # the request; its pool is left to the launcher.
    for warning in caught:
        print(f"warning: {warning.message}", file=sys.stderr)
    return parsed


def submit(args: argparse.Namespace, deployment: Deployment) -> int:
    try:
        request = checked(
            request_from_args(args, now=lambda: service_clock(deployment)()), deployment
        )
    except (UsageError, OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_FAILED
    except (InvalidLaunchRequest, RequestRejected) as refused:
        print(f"error: not sent: {refused}", file=sys.stderr)
        return EXIT_FAILED
    if args.dry_run:
        return dry_run(request, deployment)
    sent = send(request.to_dict(), deployment, args.via, args.source or PRODUCER_SOURCE)
    print(f"submitted {sent.request_id} via {args.via}", file=sys.stderr)
    if not args.wait:
        print(sent.request_id)
        return 0
    with views.WaitProgress(sent.request_id) as progress:
        record = wait_for(deployment, sent, args.timeout, progress)
    if record is None:
        print(f"error: no status for {sent.request_id} after {args.timeout}s", file=sys.stderr)
        return EXIT_TIMED_OUT
    views.print_json(record.to_detail())
    if not record.is_final:
        print(f"{sent.request_id} is still waiting after {args.timeout}s", file=sys.stderr)
    return exit_code(record)


def dry_run(request: LaunchRequest, deployment: Deployment) -> int:
    """What the request would get now, and when, without sending it: exit 0 when a pool would
    try to launch it, 1 when it would be rejected or every pool would refuse it."""
    # On a local cloud, the moment is the emulator's, as its functions see it.
    with deployment.environment():
        answer = adapters(deployment, service_clock(deployment)).dry_run()(request)
    views.print_json(answer.to_dict())
    return 0 if answer.would_launch else EXIT_FAILED


def status(args: argparse.Namespace, deployment: Deployment) -> int:
    """The record as JSON; exits as `submit --wait` does (1 for Failed or Rejected, 3 while
    Waiting or on timeout), and 1 when there is no record."""
    if args.wait:
        with views.WaitProgress(args.request_id) as progress:
            record = wait_for(deployment, args.request_id, args.timeout, progress)
    else:
        record = client(deployment).get(args.request_id)
    if record is None:
        print(
            f"error: no record for {args.request_id}: not received yet, still in progress, "
            "or unknown",
            file=sys.stderr,
        )
        return EXIT_TIMED_OUT if args.wait else EXIT_FAILED
    views.print_json(record.to_detail())
    return exit_code(record)


def get_requests(args: argparse.Namespace, deployment: Deployment) -> int:
    """Every request's record (the latest LIST_LIMIT), or the ones named by requestId."""
    store = queries(deployment).records
    if args.names:
        asked = {name: store.get_record(name) for name in dict.fromkeys(args.names)}
        records = [r for r in asked.values() if r is not None]
    else:
        records = store.list_records(LIST_LIMIT)
    wanted = getattr(args, "field_selector", ())
    if wanted and not args.names and len(records) >= LIST_LIMIT:
        print(
            f"warning: --field-selector: only the newest {LIST_LIMIT} requests were read "
            f"(received since {format_timestamp(records[-1].received_at)}); "
            "older ones that match are not listed",
            file=sys.stderr,
        )
    records = [r for r in records if selects(r.to_detail(), wanted)]
    return named.answer(
        args,
        named.missing_from(args, (r.request_id for r in records)),
        lambda: [r.to_detail() for r in records],
        lambda: views.requests(records, wide=args.output == "wide"),
    )


def get_queues(args: argparse.Namespace, deployment: Deployment) -> int:
    """Each NodePool's admission queue (or those named): its waiting requests in the order they
    will be admitted, numbered from the head, read now (docs/queueing.md)."""
    view = adapters(deployment).queue_view()
    stored = view.pools()
    pools = [p for p in dict.fromkeys(args.names or stored) if p in stored]
    pending = view.pending(pools)
    listed = [q for queued in pending.values() for q in queued]
    return named.answer(
        args,
        named.missing_from(args, stored),
        lambda: [views.queued_document(q) for q in listed],
        lambda: views.queues(listed),
    )


def instance_states(records: list[RequestRecord], deployment: Deployment) -> dict[str, str]:
    """The state of each instance the records name, by id, for those with an instance item."""
    return queries(deployment).instance_states(records)


def get_instances(args: argparse.Namespace, deployment: Deployment) -> int:
    """Every instance the requests launched (or the ones named by id), with its state now (from
    its instance item, which instance events keep: running, stopped, terminated…; `-` when the
    service has none)."""
    records = queries(deployment).records.list_records()
    if args.names:
        asked = set(args.names)
        records = [
            r.model_copy(update={"instances": [i for i in r.instances if i.instance_id in asked]})
            for r in records
        ]
    states = instance_states(records, deployment)
    present = (i.instance_id for r in records for i in r.instances)
    return named.answer(
        args,
        named.missing_from(args, present),
        lambda: views.instance_details(records, states),
        lambda: views.instances(records, states),
    )
