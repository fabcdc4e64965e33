"""What Karpenter users look at: `get ec2nodeclass NAME -o yaml` with the status Karpenter shows
(what the selectors resolve to now), and `get nodeclaims` / `get nodeclaim NAME -o yaml`, one
read-only NodeClaim per launched instance (docs/karpenter.md)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from capacity_launcher.domain.apis.config import NodePool
from capacity_launcher.domain.apis.documents import StoredDocument
from capacity_launcher_cli import named, views
from capacity_launcher_cli.deployment import Deployment
from capacity_launcher_cli.label_selectors import matches, requirements_of
from capacity_launcher_cli.output_formats import TABLES
from capacity_launcher_cli.service import queries


def ec2nodeclass_status_of(deployment: Deployment) -> Callable[[StoredDocument], dict[str, Any]]:
    """A stored NodeClass's status as Karpenter shows it (`Queries.node_class_status_reader`)."""
    return queries(deployment).node_class_status_reader()


def nodepool_status_of(deployment: Deployment) -> Callable[[StoredDocument], dict[str, Any]]:
    pool_status = queries(deployment).pool_status_reader()

    def status_of(stored: StoredDocument) -> dict[str, Any]:
        pool = stored.document
        assert isinstance(pool, NodePool)
        return pool_status(pool)

    return status_of


def get_nodeclaims(args: argparse.Namespace, deployment: Deployment) -> int:
    """One NodeClaim per instance the service launched (its instance item), read-only."""
    claims = queries(deployment).nodeclaims()
    selector = requirements_of(args)
    claims = {n: c for n, c in claims.items() if matches(c["metadata"]["labels"], selector)}
    if args.name:
        if args.name not in claims:
            return named.report_missing(args, [args.name])
        claims = {args.name: claims[args.name]}  # its row, or itself with -o
    if args.output not in TABLES:
        views.emit(claims[args.name] if args.name else list(claims.values()), args)
        return 0
    views.show(views.nodeclaims(list(claims.values())))
    return 0
