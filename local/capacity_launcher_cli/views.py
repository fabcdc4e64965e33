"""Tables for people (rich) and JSON for programs: the one place output is shaped."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import yaml

from capacity_launcher.domain.accounting.admission_queue import QueuedRequest
from capacity_launcher.domain.apis.config import NodeClass, NodePool
from capacity_launcher.domain.apis.kueue.cohorts import Cohort
from capacity_launcher.domain.apis.priority_classes import PriorityClass
from capacity_launcher.domain.capacity.offerings import UnavailableEntry
from capacity_launcher.domain.capacity.reservations import ReservationSnapshot, selection_of
from capacity_launcher.domain.quantities import Resources, format_cpu, format_memory
from capacity_launcher.domain.records.status import RequestRecord, RequestStatus, format_timestamp
from capacity_launcher_cli import resource_types
from capacity_launcher_cli.output_formats import JSONPATH, TABLES, jsonpath_text, name_of

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from capacity_launcher_client.client import Progress

# Redirected output is read by tools and tests: wide enough that ids are never cut.
_REDIRECTED_WIDTH = 200
STATUS_STYLES = {
    "Fulfilled": "green",
    "PartiallyFulfilled": "yellow",
    "Failed": "red",
    "Rejected": "magenta",
    "Waiting": "cyan",
}


# rich loads when a table or a console is made: a command that prints JSON, YAML or names never
# loads it (a fortieth of a second of CPU).


def console(stderr: bool = False) -> Console:
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else _REDIRECTED_WIDTH
    return Console(file=stream, width=width, highlight=False)


def escape(text: str) -> str:
    """rich's markup escaped in `text` (a cell shows "[spot]" as written)."""
    from rich.markup import escape as escaped

    return escaped(text)


def waiting_state(record: RequestRecord | None) -> str:
    """What a person waiting on a request is told it is doing now."""
    if record is None:
        return "no record yet: queued, or being served"
    if record.status is RequestStatus.WAITING:
        awaited = ", ".join(r.named for r in record.waiting_for)
        until = record.wait_for_capacity_until
        return f"Waiting for {awaited or 'scheduled capacity'}" + (
            f" until {format_timestamp(until)}" if until else ""
        )
    return f"{record.status} ({record.launched}/{record.requested} launched)"


class WaitProgress:
    """Progress while waiting on a request, on stderr: a spinner saying its state on a terminal,
    else one line per state change (so logs and pipes show each step, not a redraw)."""

    def __init__(self, request_id: str) -> None:
        self._request_id = request_id
        self._console = console(stderr=True)
        self._state: str | None = None
        self._status: Any = None

    def __enter__(self) -> WaitProgress:
        if self._console.is_terminal:
            self._status = self._console.status(f"{escape(self._request_id)}: waiting")
            self._status.start()
        return self

    def __call__(self, seen: Progress) -> None:
        state = waiting_state(seen.record)
        if state == self._state:
            return
        self._state = state
        line = f"{self._request_id}: {state} ({seen.elapsed_seconds:.0f}s)"
        if self._status is not None:
            self._status.update(escape(line))
        else:
            sys.stderr.write(line + "\n")

    def __exit__(self, *_: object) -> None:
        if self._status is not None:
            self._status.stop()


NO_RESOURCES = "No resources found"


def show(table: Table) -> None:
    """A listing on stdout; an empty one prints nothing there and says so on stderr, as kubectl
    does (so `| wc -l` counts rows, and a person is not shown a bare header). A terminal gets the
    boxed table when it fits its width with no cell wrapped; otherwise, and on a pipe or file,
    plain columns, as kubectl prints them (the terminal wraps a long line whole, never a word
    inside a cell)."""
    if table.row_count == 0:
        sys.stderr.write(NO_RESOURCES + "\n")
        return
    out = console()
    if out.is_terminal and fits(out, table):
        out.print(table)
    else:
        out.file.write(plain(table))


def fits(out: Console, table: Table) -> bool:
    """Whether the table's widest rendering (every cell on one line) fits the console."""
    unbounded = out.options.update_width(_UNBOUNDED)  # measured at a terminal's width, it fits
    return out.measure(table, options=unbounded).maximum <= out.width


_UNBOUNDED = 100_000


def plain(table: Table) -> str:
    """A table as kubectl prints one to a pipe: a header line, then a line per row, each column
    as wide as its widest cell plus three spaces; no title, box, colour, wrapping or cut."""
    from rich.text import Text

    columns = [
        [str(column.header), *(Text.from_markup(str(cell)).plain for cell in column.cells)]
        for column in table.columns
    ]
    widths = [max(len(cell) for cell in column) for column in columns]
    lines = [
        "   ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in zip(*columns, strict=True)
    ]
    return "\n".join(lines) + "\n"


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


def dump(data: Any, output: str) -> None:
    """`-o json` or `-o yaml` of documents, as kubectl prints them."""
    if output == "json":
        print_json(data)
    else:
        sys.stdout.write(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))


def emit(found: list[dict[str, Any]] | dict[str, Any], args: argparse.Namespace) -> None:
    """`get -o json|yaml|name|jsonpath=T` of a listing (a list) or of one document (a dict);
    a kind with no table (OME's reservations) prints as YAML without `-o`."""
    output = "yaml" if args.output in TABLES else args.output
    if output == "name":
        items = [found] if isinstance(found, dict) else found
        singular = resource_types.lookup(args.resource).singular
        sys.stdout.writelines(f"{singular}/{name_of(item, args.resource)}\n" for item in items)
        if not items:
            sys.stderr.write(NO_RESOURCES + "\n")
    elif output.startswith(JSONPATH):
        sys.stdout.write(jsonpath_text(output, found))
    else:
        dump(found if isinstance(found, dict) else listed(found, output), output)


def listed(items: list[dict[str, Any]], output: str = "json") -> dict[str, Any]:
    """Several items, in JSON as in YAML: a `List` as kubectl prints one (`apply -f` reads it
    back)."""
    return {"apiVersion": "v1", "kind": "List", "items": items}


def nodeclaims(claims: Sequence[Mapping[str, Any]]) -> Table:
    table = _table("NodeClaims", "NAME", "TYPE", "CAPACITY", "ZONE", "NODEPOOL", "READY")
    for claim in claims:
        labels = claim["metadata"]["labels"]
        ready = next(c for c in claim["status"]["conditions"] if c["type"] == "Ready")
        table.add_row(
            escape(claim["metadata"]["name"]),
            escape(labels.get("node.kubernetes.io/instance-type", "")),
            escape(labels.get("karpenter.sh/capacity-type", "")),
            _or_dash(labels.get("topology.kubernetes.io/zone")),
            _or_dash(labels.get("karpenter.sh/nodepool")),
            ready["status"],
        )
    return table


def _table(title: str, *columns: str) -> Table:
    from rich.table import Table

    table = Table(title=title, title_justify="left", header_style="bold")
    for column in columns:
        table.add_column(column, overflow="fold")
    return table


def _or_dash(value: object) -> str:
    # Data is shown as written: "[spot]" in a message is not rich markup.
    return "-" if value in (None, "", [], {}) else escape(str(value))


def _resources(amount: Resources) -> str:
    parts = []
    if amount.cpu:
        parts.append(f"cpu={format_cpu(amount.cpu)}")
    if amount.memory_mib:
        parts.append(f"memory={format_memory(amount.memory_mib)}")
    if amount.gpu:
        parts.append(f"gpu={amount.gpu}")
    if amount.instances:
        parts.append(f"instances={amount.instances}")
    return " ".join(parts) or "0"


def node_pools(pools: Sequence[NodePool], statuses: Mapping[str, Mapping[str, Any]]) -> Table:
    """Each pool with its limits and use in units, and its conditions
    (domain/accounting/pool_status.py)."""
    table = _table(
        "NodePools", "NAME", "NODECLASS", "WEIGHT", "CAPACITY TYPES", "LIMITS", "USED", "READY",
        "SUFFICIENT",
    )  # fmt: skip
    for pool in sorted(pools, key=lambda p: (-p.spec.weight, p.name)):
        limits = pool.spec.limits.to_document() if pool.spec.limits else {}
        status = statuses.get(pool.name, {})
        conditions = {c["type"]: c for c in status.get("conditions", [])}
        table.add_row(
            pool.name,
            pool.spec.node_class_ref,
            str(pool.spec.weight),
            ",".join(pool.spec.allowed_capacity_types()),
            _or_dash(" ".join(f"{k}={v}" for k, v in limits.items())),
            " ".join(f"{k}={v}" for k, v in status.get("used", {}).items()) or "0",
            _condition(conditions.get("Ready")),
            _condition(conditions.get("ResourcesSufficient")),
        )
    return table


def _condition(condition: Mapping[str, str] | None) -> str:
    """'True', or 'False (Reason)' so the table says why without the message."""
    if condition is None:
        return "-"
    if condition["status"] == "True":
        return "True"
    return f"False ({condition['reason']})"


def priority_classes(classes: Sequence[PriorityClass]) -> Table:
    """NAME VALUE GLOBAL-DEFAULT, as `kubectl get priorityclasses` lists them."""
    table = _table("PriorityClasses", "NAME", "VALUE", "GLOBAL-DEFAULT")
    for found in sorted(classes, key=lambda c: c.name):
        table.add_row(found.name, str(found.value), str(bool(found.global_default)).lower())
    return table


def cohorts(found: Sequence[Cohort], statuses: Mapping[str, Mapping[str, Any]]) -> Table:
    """NAME PARENT QUOTAS CHILDREN READY: each Kueue Cohort, its place in its tree, and whether
    it is active (False (ParentNotFound) while its parent is not applied)."""
    table = _table("Cohorts", "NAME", "PARENT", "QUOTAS", "CHILDREN", "READY")
    for cohort in sorted(found, key=lambda c: c.name):
        status = statuses[cohort.name]
        ready = next(c for c in status["conditions"] if c["type"] == "Ready")
        table.add_row(
            cohort.name,
            cohort.parent or "-",
            ",".join(status["memberQuotas"]) or "-",
            ",".join(status["childCohorts"]) or "-",
            _condition(ready),
        )
    return table


def node_classes(classes: Sequence[NodeClass]) -> Table:
    table = _table("NodeClasses", "NAME", "IMAGE", "SUBNETS", "RESERVATIONS")
    for node_class in sorted(classes, key=lambda c: c.name):
        spec = node_class.spec
        subnets = spec.subnet_ids or [
            ",".join(f"{k}={v}" for k, v in (t.tags or {}).items()) or str(t.id)
            for t in spec.subnet_selector_terms or []
        ]
        table.add_row(
            node_class.name,
            spec.image_id or str(spec.image_ssm_parameter),
            " ".join(subnets),
            _reservations_of(node_class),
        )
    return table


def _reservations_of(node_class: NodeClass) -> str:
    selection = selection_of(node_class)
    if selection.target is not None:
        return selection.target.name
    if selection.terms:
        return f"{len(selection.terms)} selector term(s)"
    return f"preference {node_class.spec.reservation_preference}"


def requests(records: Iterable[RequestRecord], wide: bool = False) -> Table:
    """One row per request; `wide` adds who asked and when it was received and finished, and
    does not cut its errors."""
    columns = ["REQUEST", "POOL", "STATUS", "LAUNCHED", "CAPACITY", "ERRORS"]
    table = _table("Requests", *columns, *(_REQUESTS_WIDE if wide else ()))
    cut = None if wide else 200
    for record in records:
        kinds: dict[str, int] = {}
        for instance in record.instances:
            kind: str = instance.capacity_type
            if instance.capacity_reservation_id:
                kind = f"{kind}:{instance.capacity_reservation_id}"
            kinds[kind] = kinds.get(kind, 0) + 1
        style = STATUS_STYLES.get(str(record.status), "")
        table.add_row(
            escape(record.request_id),
            _or_dash(record.node_pool),
            f"[{style}]{record.status}[/]" if style else str(record.status),
            f"{record.launched}/{record.requested}",
            _or_dash(
                " ".join(f"{k} x{n}" for k, n in sorted(kinds.items())) or _waiting_for(record)
            ),
            _or_dash("; ".join(f"{e.code}: {e.message}"[:cut] for e in record.errors)),
            *(
                (
                    _or_dash(record.requester),
                    _minute(record.received_at),
                    _minute(record.finished_at),
                )
                if wide
                else ()
            ),
        )
    return table


_REQUESTS_WIDE = ("REQUESTER", "RECEIVED", "FINISHED")


def queues(listed: Iterable[QueuedRequest]) -> Table:
    """One row per waiting request, in each pool's admission order."""
    table = _table(
        "Admission queues",
        "POOL", "POSITION", "REQUEST", "REQUESTER", "PRIORITY", "WAITING FOR", "SINCE", "UNTIL",
        "PASSED OVER",
    )  # fmt: skip
    for queued in listed:
        entry, record = queued.entry, queued.record
        table.add_row(
            escape(entry.pool),
            str(queued.position),
            escape(entry.request_id),
            _or_dash(record.requester if record else None),
            str(entry.priority),
            _or_dash(", ".join(w.named for w in record.waiting_for) if record else None),
            _minute(entry.arrival),
            _minute(entry.deadline),
            f"{entry.passes} (blocks)" if entry.blocks else str(entry.passes),
        )
    return table


def queued_document(queued: QueuedRequest) -> dict[str, Any]:
    """A waiting request as `get queues -o json|yaml` lists it."""
    entry, record = queued.entry, queued.record
    return {
        "nodePool": entry.pool,
        "position": queued.position,
        "requestId": entry.request_id,
        "requester": record.requester if record else None,
        "priority": entry.priority,
        "waitingFor": [w.to_dict() for w in record.waiting_for] if record else [],
        "arrival": format_timestamp(entry.arrival),
        "deadline": format_timestamp(entry.deadline),
        "passedOver": entry.passes,
        "blocks": entry.blocks,
    }


def _waiting_for(record: RequestRecord) -> str:
    """What a Waiting request waits for: each reservation, its state and start, and until when."""
    if not record.waiting_for or record.wait_for_capacity_until is None:
        return ""
    awaited = ", ".join(
        f"{r.named} ({r.state}, starts {_minute(r.start_date) or '?'})" if r.state else r.named
        for r in record.waiting_for
    )
    return f"waiting for {awaited} until {_minute(record.wait_for_capacity_until)}"


def instances(records: Iterable[RequestRecord], states: Mapping[str, str]) -> Table:
    table = _table(
        "Instances",
        "INSTANCE",
        "STATE",
        "REQUEST",
        "TYPE",
        "ZONE",
        "CAPACITY TYPE",
        "RESERVATION",
        "KIND",
        "START",
        "END",
    )
    for record in records:
        for instance in record.instances:
            table.add_row(
                instance.instance_id,
                _or_dash(states.get(instance.instance_id)),
                record.request_id,
                instance.instance_type,
                instance.zone,
                instance.capacity_type,
                _or_dash(instance.capacity_reservation_id),
                _or_dash(instance.capacity_reservation_type),
                _or_dash(_minute(instance.capacity_reservation_start_date)),
                _or_dash(_minute(instance.capacity_reservation_end_date)),
            )
    return table


def instance_details(
    records: Iterable[RequestRecord], states: Mapping[str, str]
) -> list[dict[str, Any]]:
    """`get instances -o json`: one object per instance, with its request, pool and state
    (null when the service keeps no item for it)."""
    return [
        {
            **instance.to_dict(),
            "state": states.get(instance.instance_id),
            "requestId": record.request_id,
            "nodePool": record.node_pool,
        }
        for record in records
        for instance in record.instances
    ]


def reservations(
    snapshots: Sequence[ReservationSnapshot], idle_hours: Mapping[str, float] | None = None
) -> Table:
    """`idle_hours`: paid and unused instance-hours the sync counted (none for a reservation
    no NodeClass selects: the sync keeps no snapshot of it)."""
    idle = idle_hours or {}
    table = _table(
        "Capacity reservations",
        "ID",
        "TYPE",
        "ZONE",
        "KIND",
        "STATE",
        "START",
        "END",
        "MATCH",
        "USED",
        "AVAILABLE",
        "EXHAUSTED",
        "IDLE HOURS",
        "GROUPS",
    )
    for r in sorted(snapshots, key=lambda s: s.reservation_id):
        table.add_row(
            r.reservation_id,
            r.instance_type,
            r.zone,
            reservation_kind(r),
            r.state,
            _or_dash(_minute(r.start_date)),
            _or_dash(_minute(r.end_date)),
            r.instance_match_criteria,
            f"{r.used}/{r.total}",
            str(r.available),
            "yes" if r.exhausted else "-",
            f"{idle[r.reservation_id]:.1f}" if r.reservation_id in idle else "-",
            _or_dash(" ".join(g.rsplit("/", 1)[-1] for g in r.groups)),
        )
    return table


def reservation_kind(r: ReservationSnapshot) -> str:
    return f"{r.reservation_type} (interruptible)" if r.interruptible else r.reservation_type


def _minute(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M") if moment else ""


def reservation_json(r: ReservationSnapshot, idle_hours: float | None = None) -> dict[str, Any]:
    return {
        "capacityReservationId": r.reservation_id,
        "instanceType": r.instance_type,
        "availabilityZone": r.zone,
        "state": r.state,
        "reservationType": r.reservation_type,
        "interruptible": r.interruptible,
        "startDate": r.start_date.isoformat() if r.start_date else None,
        "endDate": r.end_date.isoformat() if r.end_date else None,
        "instanceMatchCriteria": r.instance_match_criteria,
        "totalInstanceCount": r.total,
        "availableInstanceCount": r.available,
        "exhausted": r.exhausted,
        # Paid and unused instance-hours the sync counted; null when it keeps no snapshot.
        "idleInstanceHours": round(idle_hours, 4) if idle_hours is not None else None,
        "groups": list(r.groups),
        "tags": dict(r.tags),
    }


def unavailable_offerings(entries: Iterable[UnavailableEntry]) -> Table:
    table = _table(
        "Unavailable offerings (ICE cache)", "OFFERING", "REASON", "CACHED AT", "EXPIRES IN"
    )
    now = time.time()
    for entry in sorted(entries, key=lambda e: e.offering):
        table.add_row(
            entry.offering,
            entry.reason,
            entry.cached_at,
            f"{max(int(entry.expires_at - now), 0)}s",
        )
    return table


def unavailable_json(entry: UnavailableEntry) -> dict[str, Any]:
    return entry.to_dict()


def quotas(documents: Sequence[Mapping[str, Any]]) -> Table:
    """One row per quota, NodePool and resource, from `get quotas -o json`'s documents."""
    table = _table(
        "CapacityQuotas",
        "NAME", "COHORT", "PRIORITY", "NODEPOOL", "RESOURCE",
        "NOMINAL", "USED", "BORROWED", "LENT", "ALLOCATABLE", "READY",
    )  # fmt: skip
    for document in documents:
        spec, status = document["spec"], document["status"]
        ready = next(c for c in status["conditions"] if c["type"] == "Ready")
        columns = [
            {(f["name"], r["name"]): r["total"] for f in status[part] for r in f["resources"]}
            for part in ("capacity", "usage", "borrowed", "lent", "allocatable")
        ]
        for flavor, resource in columns[0]:
            table.add_row(
                document["metadata"]["name"],
                _or_dash(spec.get("cohort")),
                str(spec.get("priority", 0)),
                flavor,
                resource,
                *(column[(flavor, resource)] for column in columns),
                "True" if ready["status"] == "True" else f"False ({ready['reason']})",
            )
    return table
