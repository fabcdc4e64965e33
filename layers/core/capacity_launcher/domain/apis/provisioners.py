"""Karpenter's karpenter.sh/v1alpha4 Provisioner, a served version of NodePool (docs/provisioner.md)

A Provisioner converts to a NodePool and a NodeClass of the same name: the pluralized constraints
(`zones`, `instanceTypes`, `architectures`, `operatingSystems`) and `requirements` become the
pool's requirements, `limits.resources` its limits; `spec.provider` (the AWS extension,
``extensions.karpenter.sh/v1alpha1``, versioned separately and inferred when omitted) becomes the
class. What the hubs have no place for is kept, and what is not acted on is reported by path.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Literal

from pydantic import Field, StrictInt, ValidationError, field_validator

from capacity_launcher.domain.apis.api_versions import (
    Conversion,
    ServedVersion,
    as_document,
    validated,
)
from capacity_launcher.domain.apis.config import NODE_POOL, NodeClass, NodePool
from capacity_launcher.domain.apis.config_base import (
    BUILT_ON_FIRST_USE,
    MAX_POOL_REQUIREMENTS,
    Name,
    _Document,
)
from capacity_launcher.domain.apis.kept_fields import Kept, put, take
from capacity_launcher.domain.capacity.requirements import ARCH, INSTANCE_TYPE, OS, ZONE
from capacity_launcher.domain.errors import ConfigValidationError
from capacity_launcher.domain.field_errors import FieldError, field_errors
from capacity_launcher.domain.quantities import Unready

PROVISIONER_API_VERSION = "karpenter.sh/v1alpha4"
PROVISIONER = "Provisioner"
PROVIDER_API_VERSION = "extensions.karpenter.sh/v1alpha1"
PROVIDER_KIND = "AWS"
# Karpenter v0.4 launched the EKS-optimized image for the architecture; without a cluster, the
# Amazon Linux 2023 image of the architecture is the default here (docs/provisioner.md).
DEFAULT_IMAGES = {
    "amd64": "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-x86_64",
    "arm64": "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-arm64",
}
# Each pluralized constraint is a requirement `key In values` on the pool.
CONSTRAINTS = {
    "zones": ZONE,
    "instanceTypes": INSTANCE_TYPE,
    "architectures": ARCH,
    "operatingSystems": OS,
}
MAX_VALUES = 100
Values = list[str]


class ProvisionerMetadata(_Document):
    model_config = BUILT_ON_FIRST_USE

    name: Name
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class AwsProvider(_Document):
    """The AWS extension: where and how instances launch (the NodeClass)."""

    model_config = BUILT_ON_FIRST_USE

    api_version: Literal["extensions.karpenter.sh/v1alpha1"] | None = None
    kind: Literal["AWS"] | None = None
    subnets: Values | None = Field(default=None, min_length=1, max_length=100)
    security_groups: Values | None = Field(default=None, min_length=1, max_length=16)
    launch_template_name: str | None = Field(default=None, min_length=3, max_length=128)
    instance_profile: str | None = None
    tags: dict[str, str] | None = None


class ProvisionerLimits(_Document):
    model_config = BUILT_ON_FIRST_USE

    resources: dict[str, StrictInt | str] | None = None
    unready: Unready | None = None

    @field_validator("resources")
    @classmethod
    def _known(cls, resources: dict[str, Any] | None) -> dict[str, Any] | None:
        unknown = [k for k in resources or {} if k not in ("cpu", "memory", "nvidia.com/gpu")]
        if unknown:
            raise ValueError(f"{', '.join(unknown)}: must be cpu, memory or nvidia.com/gpu")
        return resources


class ProvisionerSpec(_Document):
    model_config = BUILT_ON_FIRST_USE

    provider: AwsProvider | None = None
    requirements: list[dict[str, Any]] | None = Field(
        default=None, max_length=MAX_POOL_REQUIREMENTS
    )
    zones: Values | None = Field(default=None, min_length=1, max_length=MAX_VALUES)
    instance_types: Values | None = Field(default=None, min_length=1, max_length=MAX_VALUES)
    architectures: Values | None = Field(default=None, min_length=1, max_length=MAX_VALUES)
    operating_systems: Values | None = Field(default=None, min_length=1, max_length=MAX_VALUES)
    limits: ProvisionerLimits | None = None
    labels: dict[str, str] | None = None
    taints: list[dict[str, Any]] | None = None
    ttl_seconds_after_empty: StrictInt | None = Field(default=None, ge=0)
    ttl_seconds_until_expired: StrictInt | None = Field(default=None, ge=0)


class Provisioner(_Document):
    model_config = BUILT_ON_FIRST_USE

    api_version: Literal["karpenter.sh/v1alpha4"]
    kind: Literal["Provisioner"]
    metadata: ProvisionerMetadata
    spec: ProvisionerSpec

    @property
    def name(self) -> str:
        return self.metadata.name


NOT_ACTED_ON = {
    "metadata.labels": "kept: nothing selects provisioners by label",
    "metadata.annotations": "kept",
    "spec.labels": "kept: node labels need a cluster",
    "spec.taints": "kept: node taints need a cluster",
    "spec.ttlSecondsAfterEmpty": "kept: nothing here consolidates empty nodes",
    "spec.ttlSecondsUntilExpired": "kept: nothing here expires nodes",
}


def parse_provisioner(data: Mapping[str, Any]) -> Provisioner:
    return validated(Provisioner, data)


def document(provisioner: Provisioner) -> dict[str, Any]:
    return as_document(provisioner)


def not_acted_on(provisioner: Provisioner) -> tuple[str, ...]:
    written = document(provisioner)
    found = []
    for path in NOT_ACTED_ON:
        node: Any = written
        for part in path.split("."):
            node = node.get(part) if isinstance(node, Mapping) else None
        if node is not None:
            found.append(path)
    return tuple(found)


def to_hubs(provisioner: Provisioner) -> tuple[NodePool, NodeClass]:
    """The NodePool and NodeClass a Provisioner stands for, both under its name."""
    provider = provisioner.spec.provider or AwsProvider()
    errors = [
        FieldError(f"spec.provider.{field}", rule)
        for field, value, rule in (
            ("subnets", provider.subnets, "is required: subnet ids, or subnets' Name tags"),
            ("securityGroups", provider.security_groups, "is required: security group ids"),
        )
        if not value
    ]
    if errors:
        raise ConfigValidationError(errors)
    hubs: list[Any] = []
    for model, data, rename in (
        (NodePool, _node_pool(provisioner), _pool_path),
        (NodeClass, _node_class(provisioner), _class_path),
    ):
        try:
            hubs.append(model.model_validate(data))
        except ValidationError as error:
            errors += [FieldError(rename(e.field), e.rule) for e in field_errors(error)]
    if errors:
        raise ConfigValidationError(errors)
    return hubs[0], hubs[1]


def _node_pool(provisioner: Provisioner) -> dict[str, Any]:
    """The pool: each constraint a requirement `key In values`, then `requirements`; limits."""
    spec = provisioner.spec
    requirements = [
        {"key": key, "operator": "In", "values": getattr(spec, _snake(field))}
        for field, key in CONSTRAINTS.items()
        if getattr(spec, _snake(field)) is not None
    ]
    requirements += list(spec.requirements or [])
    pool: dict[str, Any] = {
        "apiVersion": "capacity-launcher/v1",
        "kind": "NodePool",
        "metadata": {"name": provisioner.name},
        "spec": {"nodeClassRef": provisioner.name, "requirements": requirements},
    }
    limits = spec.limits or ProvisionerLimits()
    if limits.resources or limits.unready is not None:
        pool["spec"]["limits"] = {**(limits.resources or {})}
        if limits.unready is not None:
            pool["spec"]["limits"]["unready"] = limits.unready
    return pool


def _snake(field: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in field)


def _node_class(provisioner: Provisioner) -> dict[str, Any]:
    provider = provisioner.spec.provider or AwsProvider()
    architectures = provisioner.spec.architectures or ["amd64"]
    image = DEFAULT_IMAGES["arm64" if architectures == ["arm64"] else "amd64"]
    # A subnet id selects that subnet; any other value selects subnets by their Name tag.
    subnets = [
        {"id": s} if s.startswith("subnet-") else {"tags": {"Name": s}}
        for s in provider.subnets or []
    ]
    spec: dict[str, Any] = {
        "imageSsmParameter": image,
        "subnetSelectorTerms": subnets or None,
        "securityGroupIds": provider.security_groups,
    }
    if provider.instance_profile is not None:
        spec["instanceProfile"] = provider.instance_profile
    if provider.launch_template_name is not None:
        spec["launchTemplateName"] = provider.launch_template_name
    if provider.tags is not None:
        spec["tags"] = provider.tags
    return {
        "apiVersion": "capacity-launcher/v1",
        "kind": "NodeClass",
        "metadata": {"name": provisioner.name},
        "spec": spec,
    }


def _pool_path(path: str) -> str:
    """A NodePool hub's path as the Provisioner's."""
    if path.startswith("spec.limits") and not path.startswith("spec.limits.unready"):
        return path.replace("spec.limits", "spec.limits.resources", 1)
    return path


_CLASS_PATHS = {
    "spec.subnetSelectorTerms": "spec.provider.subnets",
    "spec.securityGroupIds": "spec.provider.securityGroups",
    "spec.instanceProfile": "spec.provider.instanceProfile",
    "spec.launchTemplateName": "spec.provider.launchTemplateName",
    "spec.tags": "spec.provider.tags",
}


def _class_path(path: str) -> str:
    for hub, written in _CLASS_PATHS.items():
        if path.startswith(hub):
            return written + path[len(hub) :]
    return "spec.provider" if path == "spec" else path


KEPT_PATHS = (
    "metadata.labels",
    "metadata.annotations",
    "spec.provider",
    *(f"spec.{field}" for field in CONSTRAINTS),
    "spec.requirements",
    "spec.limits",
    "spec.labels",
    "spec.taints",
    "spec.ttlSecondsAfterEmpty",
    "spec.ttlSecondsUntilExpired",
)
_WRITTEN_REQUIREMENTS = tuple(f"spec.{field}" for field in (*CONSTRAINTS, "requirements"))


def from_hubs(pool: NodePool, kept: Mapping[str, Any]) -> dict[str, Any]:
    """A Provisioner from its NodePool hub and what its apply kept (the provider, constraints,
    requirements and limits as written, and the fields no hub holds). Without kept fields (a
    pool applied otherwise), it has the pool's requirements and limits and no provider; a pool
    a Provisioner cannot say (a weight, an `instances` limit) is refused by path."""
    problems = []
    if pool.spec.weight:
        problems.append(FieldError("spec.weight", "a Provisioner has no weight"))
    spec: dict[str, Any] = {}
    if not any(path in kept for path in _WRITTEN_REQUIREMENTS) and pool.spec.requirements:
        spec["requirements"] = [
            r.model_dump(mode="json", by_alias=True, exclude_none=True)
            for r in pool.spec.requirements
        ]
    if "spec.limits" not in kept and pool.spec.limits is not None:
        limits = pool.spec.limits.model_dump(mode="json", by_alias=True, exclude_none=True)
        unready = limits.pop("unready", None)
        problems += [
            FieldError(f"spec.limits.{k}", "a Provisioner limits only cpu, memory, nvidia.com/gpu")
            for k in limits
            if k not in ("cpu", "memory", "nvidia.com/gpu")
        ]
        spec["limits"] = {"resources": limits} if limits else {}
        if unready is not None:
            spec["limits"]["unready"] = unready
    if problems:
        raise ConfigValidationError(problems)
    result: dict[str, Any] = {
        "apiVersion": PROVISIONER_API_VERSION,
        "kind": PROVISIONER,
        "metadata": {"name": pool.name},
        "spec": spec,
    }
    written = put(result, kept)
    if "provider" not in written["spec"]:
        # Only a Provisioner's apply keeps a provider: read back without one, the document could
        # not be applied again as the object it is (docs/api-versions.md), so it is refused.
        raise ConfigValidationError(
            [FieldError("spec.provider", "is known only for a pool applied as a Provisioner")]
        )
    return document(parse_provisioner(written))


def provisioner_version() -> ServedVersion:
    """karpenter.sh/v1alpha4 Provisioner, a served version of NodePool (with its NodeClass)."""

    def to_hub(provisioner: Provisioner) -> Conversion:
        pool, node_class = to_hubs(provisioner)
        fields = take(document(provisioner), KEPT_PATHS)
        kept = Kept(PROVISIONER_API_VERSION, PROVISIONER, fields, not_acted_on(provisioner))
        return Conversion((pool, node_class), kept)

    version = ServedVersion(
        PROVISIONER_API_VERSION, PROVISIONER, NODE_POOL, parse_provisioner, to_hub, from_hubs
    )
    return replace(version, document=document, model=Provisioner)
