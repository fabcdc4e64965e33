"""A launch template's content for a NodeClass, an image and a use of reservations: its data
(EC2's LaunchTemplateData), over a named base template's when the class names one, its name (a
digest of the data) and its tags (the basis the sync's lifecycle compares)."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from capacity_launcher.domain.apis.config import NodeClass
from capacity_launcher.domain.capacity.launch_options import MetadataOptions
from capacity_launcher.domain.capacity.reservations import ReservationUse
from capacity_launcher.domain.capacity.template_lifecycle import target_tag
from capacity_launcher.domain.records.tags import (
    MANAGED,
    NODE_CLASS,
    RESERVATION_TARGET,
    TEMPLATE_BASIS,
    Ownership,
    managed_tags,
)

# launchTemplateName: the base's fields that the pool, the class or the attempt decide instead.
_NOT_FROM_BASE = frozenset({"NetworkInterfaces", "SecurityGroups", "InstanceMarketOptions"})


def reservation_specification(use: ReservationUse) -> dict[str, Any]:
    """EC2's CapacityReservationSpecification for a use of reservations."""
    spec: dict[str, Any] = {"CapacityReservationPreference": use.preference}
    if use.target is not None:
        key = (
            "CapacityReservationId"
            if use.target.reservation_id
            else "CapacityReservationResourceGroupArn"
        )
        spec["CapacityReservationTarget"] = {key: use.target.name}
    return spec


def template_data(
    node_class: NodeClass,
    image_id: str,
    reservation_spec: Mapping[str, Any],
    *,
    spot: bool = False,
    market: str | None = None,
    security_group_ids: Sequence[str] | None = None,
    stack: str | None = None,
    instance_profile: str | None = None,
) -> dict[str, Any]:
    """Launch template data; a spot template also tags the spot request EC2 makes for each
    instance (CreateFleet `instant` cannot tag `spot-instances-request`; a launch template can).
    `stack`: the deployment's name, on everything the template makes (and so in its name: two
    deployments never share a template). `instance_profile`: the profile made for the class's
    role (else its instanceProfile)."""
    spec = node_class.spec
    tags = [{"Key": k, "Value": v} for k, v in sorted(managed_tags(node_class, stack).items())]
    data: dict[str, Any] = {
        "ImageId": image_id,
        "SecurityGroupIds": sorted(security_group_ids or spec.security_group_ids or ()),
        # IMDSv2 unless the NodeClass says otherwise: instances of a shared reservation must not
        # leak credentials via SSRF; instance tags stay out of the metadata service.
        "MetadataOptions": (spec.metadata_options or MetadataOptions()).launch_template_options(),
        "CapacityReservationSpecification": dict(reservation_spec),
        "TagSpecifications": [
            {"ResourceType": "volume", "Tags": tags},
            {"ResourceType": "network-interface", "Tags": tags},
        ],
    }
    if market is not None:
        # A Capacity Block or an interruptible reservation serves only launches in its market.
        data["InstanceMarketOptions"] = {"MarketType": market}
    if spot:
        # The policy lets RunInstances/CreateFleet create spot requests only carrying our tag.
        data["TagSpecifications"].append({"ResourceType": "spot-instances-request", "Tags": tags})
    profile = instance_profile or spec.instance_profile
    if profile:
        data["IamInstanceProfile"] = {"Name": profile}
    if spec.user_data:
        data["UserData"] = base64.b64encode(spec.user_data.encode()).decode()
    if spec.block_device_mappings:
        data["BlockDeviceMappings"] = [
            m.launch_template_mapping() for m in spec.block_device_mappings
        ]
    return data


def on_base(base: Mapping[str, Any], data: Mapping[str, Any]) -> dict[str, Any]:
    """A NodeClass's template data over a named template's (`launchTemplateName`): every field
    the class sets wins; the base's network interfaces, security group names and market options
    are left out, as the pool's subnets, the class's groups and the capacity type decide those."""
    kept = {k: v for k, v in base.items() if k not in _NOT_FROM_BASE}
    return {**kept, **data}


def _digest(data: object) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def template_name(node_class_name: str, data: Mapping[str, Any]) -> str:
    return f"capacity-launcher-{node_class_name}-{_digest(data)}"


def template_basis(data: Mapping[str, Any], images: Sequence[str] = ()) -> str:
    """The template's content apart from its reservation and market parts: equal for every
    template one NodeClass content and image give, different once either changes. A class with
    an image per architecture (`images`, more than one) has one basis for all its templates,
    the image of each replaced by all of them: changing any image supersedes every template."""
    rest = {
        k: v
        for k, v in data.items()
        if k not in ("CapacityReservationSpecification", "InstanceMarketOptions")
    }
    if len(images) > 1:
        rest["ImageId"] = list(images)
    rest["TagSpecifications"] = [
        s
        for s in rest.get("TagSpecifications", [])
        if s["ResourceType"] != "spot-instances-request"
    ]
    return _digest(rest)


def template_tags(
    node_class_name: str,
    data: Mapping[str, Any],
    use: ReservationUse,
    images: Sequence[str] = (),
    stack: str | None = None,
) -> list[dict[str, str]]:
    tags = {
        MANAGED: "true",
        NODE_CLASS: node_class_name,
        TEMPLATE_BASIS: template_basis(data, images),
        **Ownership(stack).tags(),
    }
    if use.target is not None:
        tags[RESERVATION_TARGET] = target_tag(use.target.name)
    return [{"Key": k, "Value": v} for k, v in tags.items()]
