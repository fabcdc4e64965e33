"""`get priorityclass[es] [NAME]`: the applied scheduling.k8s.io/v1 PriorityClasses (the numbers
OME reservations' priorityClassName stand for, docs/ome.md), as kubectl lists them."""

from __future__ import annotations

import argparse

from capacity_launcher.domain.apis.priority_classes import PriorityClass
from capacity_launcher.domain.errors import NotFound
from capacity_launcher_cli import named, views
from capacity_launcher_cli.deployment import Deployment
from capacity_launcher_cli.service import queries

RESOURCES = ("priorityclasses", "priorityclass")


def _document(priority_class: PriorityClass) -> dict[str, object]:
    dumped: dict[str, object] = priority_class.model_dump(
        mode="json", by_alias=True, exclude_none=True
    )
    return dumped


def get_priority_classes(args: argparse.Namespace, deployment: Deployment) -> int:
    store = queries(deployment).priority_classes
    if args.name:
        try:
            classes = [store.priority_class(args.name)]
        except NotFound:
            return named.report_missing(args, [args.name])
    else:
        classes = store.priority_classes()
    if args.output == "table":
        views.show(views.priority_classes(classes))
        return 0
    items = [_document(c) for c in classes]
    views.dump(items[0] if args.name else views.listed(items, args.output), args.output)
    return 0
