"""`get cohort[s] [NAME]`: the applied Kueue Cohorts (kueue.x-k8s.io/v1beta1, docs/quotas.md
"Hierarchical cohorts"), each with its status, as kubectl lists them."""

from __future__ import annotations

import argparse
from typing import Any

from capacity_launcher.domain.apis.kueue.cohorts import cohort_document
from capacity_launcher_cli import named, views
from capacity_launcher_cli.deployment import Deployment
from capacity_launcher_cli.service import queries

RESOURCES = ("cohorts", "cohort")


def get_cohorts(args: argparse.Namespace, deployment: Deployment) -> int:
    cohorts, statuses = queries(deployment).cohort_statuses()
    if args.name:
        cohorts = [c for c in cohorts if c.name == args.name]
        if not cohorts:
            return named.report_missing(args, [args.name])
    if args.output == "table":
        views.show(views.cohorts(cohorts, statuses))
        return 0
    items: list[dict[str, Any]] = [
        {**cohort_document(c), "status": statuses[c.name]} for c in cohorts
    ]
    views.dump(items[0] if args.name else views.listed(items, args.output), args.output)
    return 0
