"""`get quotas`: each CapacityQuota with the status the sync last stored (read-only).

The sync computes every quota's status each minute from the cohort-and-flavor quota usage items
admission keeps (service/quota_sync.py). A quota the sync has not seen yet (applied within the
last minute) gets its status computed now from the same items (service/queries.py).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from capacity_launcher.domain.apis.documents import to_document
from capacity_launcher_cli import named, views
from capacity_launcher_cli.deployment import Deployment
from capacity_launcher_cli.label_selectors import requirements_of, selected_names
from capacity_launcher_cli.output_formats import TABLES
from capacity_launcher_cli.service import queries


def get_quotas(args: argparse.Namespace, deployment: Deployment) -> int:
    """Every quota (one NAME: its rows, as kubectl prints one) with its status."""
    asked = queries(deployment)
    names = selected_names(asked.config, "CapacityQuota", requirements_of(args))
    quotas = [q for q in asked.config.capacity_quotas() if names is None or q.name in names]
    quotas = named.chosen(args, quotas, lambda q: q.name)
    invalid = named.chosen(args, asked.invalid("CapacityQuota"), lambda d: d.name)
    stored = asked.quota_status_of()
    shown: list[dict[str, Any]] = [
        {**to_document(q), "status": stored[q.name]} for q in sorted(quotas, key=lambda q: q.name)
    ]
    items = [
        *shown,
        *(
            {"kind": d.kind, "metadata": {"name": d.name}, "status": {"invalid": d.reason}}
            for d in invalid
        ),
    ]
    missing = named.missing_from(args, [*(q.name for q in quotas), *(d.name for d in invalid)])
    code = named.answer(args, missing, lambda: items, lambda: views.quotas(shown))
    if args.output not in TABLES:
        return code
    for document in invalid:
        print(
            f"warning: {document.kind} {document.name} is stored but invalid "
            f"(re-apply or delete it): {document.reason}",
            file=sys.stderr,
        )
    return code
