"""What Karpenter users look at: `get ec2nodeclass NAME -o yaml` with the status Karpenter shows
(what the selectors resolve to now), and `get nodeclaims` / `get nodeclaim NAME -o yaml`, one
read-only NodeClaim per launched instance (docs/karpenter.md)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from capacity_launcher.adapters.config_items import StoredDocument
from capacity_launcher.adapters.instance_profiles import InstanceProfiles
from capacity_launcher.adapters.launch_templates import LaunchTemplates
from capacity_launcher.adapters.security_groups import SecurityGroups
from capacity_launcher.adapters.subnets import Subnets
from capacity_launcher.domain.config import NodeClass, NodePool
from capacity_launcher.domain.errors import CapacityLauncherError
from capacity_launcher.domain.karpenter.status import (
    Resolved,
    ResolvedNodeClass,
    ec2nodeclass_status,
    nodeclaim,
    nodeclaim_name,
)
from capacity_launcher.domain.reservations import selection_of, term_matches
from capacity_launcher.service import wiring
from capacity_launcher_cli import named, views
from capacity_launcher_cli.capacity_commands import reservation_snapshots
from capacity_launcher_cli.config_commands import pool_status_reader
from capacity_launcher_cli.deployment import Deployment
from capacity_launcher_cli.label_selectors import matches, requirements_of
from capacity_launcher_cli.output_formats import TABLES


def _resolved[Found](resolve: Callable[[], list[Found]]) -> Resolved[Found]:
    try:
        return Resolved(resolve())
    except CapacityLauncherError as error:
        return Resolved(error=str(error))


def _security_groups(ec2: Any, node_class: NodeClass) -> list[tuple[str, str]]:
    ids = list(SecurityGroups(ec2).ids(node_class))
    groups = ec2.describe_security_groups(GroupIds=ids)["SecurityGroups"]
    names = {g["GroupId"]: g.get("GroupName", "") for g in groups}
    return [(i, names.get(i, "")) for i in ids]


def _images(ec2: Any, deployment: Deployment, node_class: NodeClass) -> list[Any]:
    templates = LaunchTemplates(ec2, deployment.client("ssm"))
    images = templates.image_architectures(node_class)
    if images is None:
        return []
    ids = [image.image_id for image in images.images]
    names = {i["ImageId"]: i.get("Name", "") for i in ec2.describe_images(ImageIds=ids)["Images"]}
    return [(image, names.get(image.image_id, "")) for image in images.images]


def _reservations(deployment: Deployment, node_class: NodeClass) -> list[Any]:
    selection = selection_of(node_class)
    found = []
    for snapshot in reservation_snapshots(deployment):
        target = selection.target
        if target is not None and target.reservation_id:
            chosen = snapshot.reservation_id == target.reservation_id
        elif target is not None:
            chosen = target.name in snapshot.groups
        else:
            chosen = any(term_matches(term, snapshot) for term in selection.terms)
        if chosen:
            found.append(snapshot)
    return found


def ec2nodeclass_status_of(deployment: Deployment) -> Callable[[StoredDocument], dict[str, Any]]:
    ec2 = deployment.client("ec2")
    profiles = InstanceProfiles(
        deployment.settings().state_table_name, deployment.client("iam"), deployment.region
    )

    def status_of(stored: StoredDocument) -> dict[str, Any]:
        node_class = stored.document
        assert isinstance(node_class, NodeClass)
        resolved = ResolvedNodeClass(
            subnets=_resolved(
                lambda: [
                    (subnet, zone)
                    for zone, ids in Subnets(ec2).by_zone(node_class).items()
                    for subnet in ids
                ]
            ),
            security_groups=_resolved(lambda: _security_groups(ec2, node_class)),
            images=_resolved(lambda: _images(ec2, deployment, node_class)),
            reservations=_resolved(lambda: _reservations(deployment, node_class)),
            reservations_asked=bool(selection_of(node_class)),
            instance_profile=node_class.spec.instance_profile,
            role_profile=(
                _resolved(lambda: [profiles.status(node_class) or ""])
                if node_class.spec.role is not None
                else None
            ),
        )
        return ec2nodeclass_status(resolved, datetime.now(UTC).isoformat())

    return status_of


def nodepool_status_of(deployment: Deployment) -> Callable[[StoredDocument], dict[str, Any]]:
    store = wiring.Adapters(deployment.settings(), deployment.client).config_store()
    pool_status = pool_status_reader(store, deployment)

    def status_of(stored: StoredDocument) -> dict[str, Any]:
        pool = stored.document
        assert isinstance(pool, NodePool)
        return pool_status(pool)

    return status_of


def get_nodeclaims(args: argparse.Namespace, deployment: Deployment) -> int:
    """One NodeClaim per instance the service launched (its instance item), read-only."""
    records = (
        wiring.Adapters(deployment.settings(), deployment.client).launch_records().list_records()
    )
    ids = [i.instance_id for record in records for i in record.instances]
    items = wiring.Adapters(deployment.settings(), deployment.client).instance_records().many(ids)
    store = wiring.Adapters(deployment.settings(), deployment.client).config_store()
    pools = {p.name: p for p in store.node_pools()}
    claims = {
        nodeclaim_name(item): nodeclaim(item, pools.get(item.node_pool or ""))
        for item in sorted(items.values(), key=lambda i: i.launched_at or "")
    }
    selector = requirements_of(args)
    claims = {n: c for n, c in claims.items() if matches(c["metadata"]["labels"], selector)}
    if args.name:
        if args.name not in claims:
            return named.report_missing(args, [args.name])
        views.emit(claims[args.name], args)
        return 0
    if args.output not in TABLES:
        views.emit(list(claims.values()), args)
        return 0
    views.show(views.nodeclaims(list(claims.values())))
    return 0
