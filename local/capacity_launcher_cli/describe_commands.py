"""`describe TYPE NAME`: one NodePool, NodeClass, CapacityQuota, OME reservation or request as a
page for people (describe.py lays it out), from the same status builders `get` uses."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from capacity_launcher.domain.apis.documents import to_document
from capacity_launcher.domain.errors import NotFound
from capacity_launcher.domain.records.status import RequestRecord
from capacity_launcher_cli import ome_commands
from capacity_launcher_cli.deployment import Deployment
from capacity_launcher_cli.describe import Rows, against, conditions, page
from capacity_launcher_cli.karpenter_commands import ec2nodeclass_status_of
from capacity_launcher_cli.named import EXIT_NOT_FOUND, not_found
from capacity_launcher_cli.service import queries

Fields = list[tuple[str, Any]]


def _head(document: dict[str, Any]) -> Fields:
    metadata = document.get("metadata", {})
    return [
        ("Name", metadata.get("name")),
        ("Kind", document.get("kind")),
        ("API Version", document.get("apiVersion")),
        ("Labels", metadata.get("labels")),
        ("Spec", document.get("spec")),
    ]


def _instances(records: list[RequestRecord], states: dict[str, str]) -> Rows:
    return Rows(
        ("INSTANCE", "STATE", "TYPE", "ZONE", "CAPACITY", "RESERVATION", "REQUEST"),
        [
            (
                i.instance_id,
                states.get(i.instance_id),
                i.instance_type,
                i.zone,
                i.capacity_type,
                i.capacity_reservation_id,
                r.request_id,
            )
            for r in records
            for i in r.instances
        ],
    )


def _node_pool(name: str, deployment: Deployment) -> Fields:
    asked = queries(deployment)
    pool = asked.config.node_pool(name)
    _, statuses = asked.pool_statuses()
    status = statuses[name]
    records = [r for r in asked.records.list_records() if r.node_pool == name]
    limits = pool.spec.limits.to_document() if pool.spec.limits else {}
    return [
        *_head(to_document(pool)),
        ("Usage", against(limits, status.get("used", {}))),
        ("Conditions", conditions(status["conditions"])),
        (
            "Instances (of the newest 100 requests)",
            _instances(records, asked.instance_states(records)),
        ),
    ]


def _node_class(name: str, deployment: Deployment) -> Fields:
    stored = queries(deployment).config.stored("NodeClass", name)
    status = ec2nodeclass_status_of(deployment)(stored)
    resolved = {k: v for k, v in status.items() if k != "conditions"}
    return [
        *_head(to_document(stored.document)),
        ("Resolved", resolved),
        ("Conditions", conditions(status.get("conditions", []))),
    ]


def _quota_usage(status: dict[str, Any]) -> Rows:
    """Per NodePool and resource: nominal, used, borrowed, lent and allocatable."""
    parts = ("capacity", "usage", "borrowed", "lent", "allocatable")
    totals = [
        {(f["name"], r["name"]): r["total"] for f in status.get(part, []) for r in f["resources"]}
        for part in parts
    ]
    return Rows(
        ("NODEPOOL", "RESOURCE", "NOMINAL", "USED", "BORROWED", "LENT", "ALLOCATABLE"),
        [(pool, name, *(t.get((pool, name)) for t in totals)) for pool, name in totals[0]],
    )


def _capacity_quota(name: str, deployment: Deployment) -> Fields:
    asked = queries(deployment)
    quota = asked.config.capacity_quota(name)
    document = to_document(quota)
    status = asked.quota_status_of()[name]
    return [
        *_head(document),
        ("Observed At", status.get("observedAt")),
        ("Usage", _quota_usage(status)),
        ("Conditions", conditions(status.get("conditions", []))),
    ]


def _reservation(resource: str) -> Callable[[str, Deployment], Fields]:
    """OME's CapacityReservation or ClusterCapacityReservation as written, with its status in
    OME's shape (the same `get capacityreservation NAME -o yaml` shows): its lifecycle, its
    capacity and what is left against it per flavor, its associations' usage and conditions."""

    def fields(name: str, deployment: Deployment) -> Fields:
        document = ome_commands.one(deployment, resource, name)
        status = document.pop("status")
        return [
            *_head(document),
            ("Lifecycle State", status.get("capacityReservationLifecycleState")),
            ("Cohort", status.get("cohort")),
            ("Observed At", status.get("observedAt")),
            ("Usage", _quota_usage(status)),
            (
                "Associations",
                Rows(
                    ("ASSOCIATION", "NODEPOOL", "RESOURCE", "USED"),
                    [
                        (a["name"], f["name"], r["name"], r["total"])
                        for a in status.get("associationUsages", [])
                        for f in a.get("usage", [])
                        for r in f.get("resources", [])
                    ],
                ),
            ),
            ("Not Acted On", status.get("notActedOn")),
            ("Conditions", conditions(status.get("conditions", []))),
        ]

    return fields


def _request(name: str, deployment: Deployment) -> Fields:
    asked = queries(deployment)
    record, intents = asked.records.load(name)
    if record is None:
        raise NotFound("request", name)
    return [
        ("Name", record.request_id),
        ("Status", str(record.status)),
        ("Node Pool", record.node_pool),
        ("Requester", record.requester),
        ("Launched", f"{record.launched}/{record.requested}"),
        ("Received", record.received_at.isoformat()),
        ("Finished", record.finished_at.isoformat()),
        ("Waiting For", [w.named for w in record.waiting_for]),
        ("Instances", _instances([record], asked.instance_states([record]))),
        ("Errors", Rows(("CODE", "MESSAGE"), [(e.code, e.message) for e in record.errors])),
        (
            "Launch Attempts",
            Rows(
                ("ATTEMPT", "CAPACITY", "STATE", "INSTANCES", "ERRORS"),
                [
                    (
                        i.attempt,
                        i.capacity_type,
                        i.state,
                        " ".join(i.instance_ids),
                        "; ".join(e.get("code", "") for e in i.errors),
                    )
                    for i in intents
                ],
            ),
        ),
    ]


_PAGES: dict[str, Callable[[str, Deployment], Fields]] = {
    "nodepools": _node_pool,
    "nodeclasses": _node_class,
    "ec2nodeclasses": _node_class,
    "capacityquotas": _capacity_quota,
    "capacityreservations": _reservation("capacityreservations"),
    "clustercapacityreservations": _reservation("clustercapacityreservations"),
    "requests": _request,
}
DESCRIBED = tuple(_PAGES)


def describe(args: argparse.Namespace, deployment: Deployment) -> int:
    pages = _PAGES.get(args.resource)
    if pages is None:
        print(f"error: describe takes {', '.join(DESCRIBED)}, not {args.resource}", file=sys.stderr)
        return 2
    try:
        sys.stdout.write(page(pages(args.name, deployment)))
    except NotFound:
        # As `get TYPE NAME` and kubectl describe say it.
        print(not_found(args.resource, args.name), file=sys.stderr)
        return EXIT_NOT_FOUND
    return 0
