"""karpenter.sh NodePool, v1 and v1beta1, as written, to and from the capacity-launcher/v1 NodePool.

What the hub holds: requirements (``Gte``/``Lte`` as the equivalent ``Gt``/``Lt``), the class
named by ``nodeClassRef``, ``weight``, ``limits`` (``nodes`` is the hub's ``instances``) and v1's
``replicas`` (a static pool, docs/static-capacity.md). Requirements on custom labels and limits
of other resources are kept and not acted on, as are
the fields that mean something only inside a cluster (taints, disruption, expiry, kubelet,
template metadata). Requirements on Karpenter's instance labels that capacity-launcher cannot
evaluate are refused: launching without them could launch what the pool forbids.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, StrictInt, field_validator

from capacity_launcher.domain.apis.api_versions import Conversion, ServedVersion
from capacity_launcher.domain.apis.config import NodePool
from capacity_launcher.domain.apis.config_base import BUILT_ON_FIRST_USE, Document, Name
from capacity_launcher.domain.apis.karpenter.common import ObjectMeta, dumped, hub_document, served
from capacity_launcher.domain.apis.kept_fields import Kept, differing, put, take
from capacity_launcher.domain.capacity.requirements import WELL_KNOWN_KEYS
from capacity_launcher.domain.errors import ConfigValidationError
from capacity_launcher.domain.field_errors import FieldError

V1 = "karpenter.sh/v1"
V1BETA1 = "karpenter.sh/v1beta1"
NODE_CLASS_GROUP = "karpenter.k8s.aws"
NODE_CLASS_KIND = "EC2NodeClass"
REQUIREMENTS = "spec.template.spec.requirements"
LIMITS = "spec.limits"
# Karpenter's limits by the hub's names (docs/karpenter.md).
LIMIT_NAMES = {
    "cpu": "cpu",
    "memory": "memory",
    "nvidia.com/gpu": "nvidia.com/gpu",
    "nodes": "instances",
}
# Karpenter's label domains: a requirement on one of their keys that the hub does not know
# chooses instance types by something capacity-launcher cannot see, so it is refused.
RESTRICTED_DOMAINS = ("karpenter.sh", "karpenter.k8s.aws", "kubernetes.io", "k8s.io", "k8s.aws")
_LABEL_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
_DURATION = r"^(([0-9]+(s|m|h))+|Never)$"
# Cluster-only fields: accepted, kept, reported as not acted on (by path).
_CLUSTER_ONLY = (
    "metadata.labels",
    "metadata.annotations",
    "spec.template.metadata",
    "spec.template.spec.taints",
    "spec.template.spec.startupTaints",
    "spec.template.spec.expireAfter",
    "spec.template.spec.terminationGracePeriod",
    "spec.template.spec.kubelet",
    "spec.disruption",
)
# Fields the hub holds, kept as written only when the hub would give them back differently.
_CONVERTED = (
    REQUIREMENTS,
    LIMITS,
    "spec.weight",
    "spec.replicas",
    "spec.template.spec.nodeClassRef",
)


class KarpenterRequirement(Document):
    """NodeSelectorRequirementWithMinValues."""

    model_config = BUILT_ON_FIRST_USE

    key: str = Field(pattern=_LABEL_KEY.pattern, max_length=316)
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte"]
    # Karpenter's CRD bounds each value to 63 characters and the requirements to 100, not the
    # number of values (the hub's Requirement checks each value, the NodePool their bytes).
    values: list[str] | None = None
    min_values: StrictInt | None = Field(default=None, ge=1, le=50)


class NodeClassReference(Document):
    """v1: {group, kind, name}; v1beta1: {apiVersion, kind, name}."""

    model_config = BUILT_ON_FIRST_USE

    group: str | None = Field(default=None, pattern=r"^[^/]+$")
    api_version: str | None = None
    kind: str = Field(min_length=1)
    name: Name


class TemplateMetadata(Document):
    model_config = BUILT_ON_FIRST_USE
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class NodeClaimTemplateSpec(Document):
    model_config = BUILT_ON_FIRST_USE
    requirements: list[KarpenterRequirement] = Field(max_length=100)
    node_class_ref: NodeClassReference
    taints: list[dict[str, Any]] | None = None
    startup_taints: list[dict[str, Any]] | None = None
    expire_after: str | None = Field(default=None, pattern=_DURATION)
    termination_grace_period: str | None = Field(default=None, pattern=r"^([0-9]+(s|m|h))+$")
    kubelet: dict[str, Any] | None = None


class NodeClaimTemplate(Document):
    model_config = BUILT_ON_FIRST_USE
    metadata: TemplateMetadata | None = None
    spec: NodeClaimTemplateSpec


class KarpenterNodePoolSpec(Document):
    model_config = BUILT_ON_FIRST_USE
    template: NodeClaimTemplate
    disruption: dict[str, Any] | None = None
    limits: dict[str, str | int] | None = None
    weight: StrictInt | None = Field(default=None, ge=1, le=100)
    replicas: StrictInt | None = Field(default=None, ge=0)


class KarpenterNodePool(Document):
    model_config = BUILT_ON_FIRST_USE
    api_version: str
    kind: Literal["NodePool"]
    metadata: ObjectMeta
    spec: KarpenterNodePoolSpec

    @field_validator("api_version")
    @classmethod
    def _served(cls, api_version: str) -> str:
        if api_version not in (V1, V1BETA1):
            raise ValueError(f"must be {V1} or {V1BETA1}")
        return api_version


def _check_reference(pool: KarpenterNodePool) -> None:
    ref = pool.spec.template.spec.node_class_ref
    path = "spec.template.spec.nodeClassRef"
    errors = []
    if pool.api_version == V1:
        if ref.group != NODE_CLASS_GROUP:
            errors.append(FieldError(f"{path}.group", f"must be {NODE_CLASS_GROUP}"))
        if ref.api_version is not None:
            errors.append(FieldError(f"{path}.apiVersion", "is not an allowed field (v1: group)"))
        if pool.spec.template.spec.kubelet is not None:
            rule = "is not an allowed field in v1 (it moved to EC2NodeClass spec.kubelet)"
            errors.append(FieldError("spec.template.spec.kubelet", rule))
    else:
        if ref.api_version is None or ref.api_version.split("/")[0] != NODE_CLASS_GROUP:
            errors.append(FieldError(f"{path}.apiVersion", f"must be {NODE_CLASS_GROUP}/VERSION"))
        if ref.group is not None:
            errors.append(
                FieldError(f"{path}.group", "is not an allowed field (v1beta1: apiVersion)")
            )
    if ref.kind != NODE_CLASS_KIND:
        errors.append(FieldError(f"{path}.kind", f"must be {NODE_CLASS_KIND}"))
    if errors:
        raise ConfigValidationError(errors)


def _hub_requirement(requirement: KarpenterRequirement) -> dict[str, Any]:
    """The hub's spelling: Gte n is Gt n-1 and Lte n is Lt n+1 (integer labels)."""
    operator, values = requirement.operator, requirement.values
    if (
        operator in ("Gte", "Lte")
        and values
        and len(values) == 1
        and values[0].lstrip("-").isdigit()
    ):
        step = -1 if operator == "Gte" else 1
        operator, values = ("Gt" if operator == "Gte" else "Lt"), [str(int(values[0]) + step)]
    found: dict[str, Any] = {"key": requirement.key, "operator": operator}
    if values is not None:
        found["values"] = values
    if requirement.min_values is not None:
        found["minValues"] = requirement.min_values
    return found


def _custom(key: str) -> bool:
    domain = key.split("/", 1)[0] if "/" in key else ""
    return not any(domain == d or domain.endswith("." + d) for d in RESTRICTED_DOMAINS)


def _requirements(pool: KarpenterNodePool) -> tuple[list[dict[str, Any]], list[int], list[str]]:
    """The hub's requirements, the original index of each, and the custom-label ones' paths."""
    hub: list[dict[str, Any]] = []
    origin: list[int] = []
    ignored: list[str] = []
    errors: list[FieldError] = []
    for index, requirement in enumerate(pool.spec.template.spec.requirements):
        if requirement.key in WELL_KNOWN_KEYS:
            hub.append(_hub_requirement(requirement))
            origin.append(index)
        elif _custom(requirement.key):
            ignored.append(f"{REQUIREMENTS}[{index}]")
        else:
            rule = (
                f"capacity-launcher cannot choose instance types by {requirement.key}; "
                f"the keys it evaluates are {', '.join(sorted(WELL_KNOWN_KEYS))}"
            )
            errors.append(FieldError(f"{REQUIREMENTS}[{index}].key", rule))
    if errors:
        raise ConfigValidationError(errors)
    return hub, origin, ignored


def _limits(pool: KarpenterNodePool) -> tuple[dict[str, Any] | None, list[str]]:
    limits = pool.spec.limits
    if limits is None:
        return None, []
    hub = {LIMIT_NAMES[k]: v for k, v in limits.items() if k in LIMIT_NAMES}
    ignored = [
        f"{LIMITS}[{k}]" if "/" in k or "." in k else f"{LIMITS}.{k}"
        for k in limits
        if k not in LIMIT_NAMES
    ]
    return hub or None, ignored


def _check_static(pool: KarpenterNodePool, other_limits: list[str]) -> None:
    """Static capacity (`spec.replicas`) is karpenter.sh/v1's, and limited by nodes only: a
    limit Karpenter would refuse on a static pool is refused, not kept."""
    errors = []
    if pool.api_version != V1:
        errors.append(FieldError("spec.replicas", f"is a {V1} field (static NodePools)"))
    for path in other_limits:
        rule = "cannot be set with spec.replicas: a static NodePool is limited by nodes only"
        errors.append(FieldError(path, rule))
    if errors:
        raise ConfigValidationError(errors)


def _renamer(origin: list[int]) -> Any:
    def rename(path: str) -> str:
        match = re.match(r"^spec\.requirements\[(\d+)\](.*)$", path)
        if match:
            return f"{REQUIREMENTS}[{origin[int(match.group(1))]}]{match.group(2)}"
        if path == "spec.requirements":
            return REQUIREMENTS
        if path.startswith("spec.limits.instances"):
            return path.replace("spec.limits.instances", "spec.limits.nodes", 1)
        if path.startswith("spec.nodeClassRef"):
            return "spec.template.spec.nodeClassRef.name"
        return path

    return rename


def to_hub(pool: KarpenterNodePool) -> Conversion:
    _check_reference(pool)
    requirements, origin, custom = _requirements(pool)
    limits, other_limits = _limits(pool)
    spec: dict[str, Any] = {
        "nodeClassRef": pool.spec.template.spec.node_class_ref.name,
        "requirements": requirements,
    }
    if pool.spec.weight is not None:
        spec["weight"] = pool.spec.weight
    if limits is not None:
        spec["limits"] = limits
    if pool.spec.replicas is not None:
        _check_static(pool, other_limits)
        spec["replicas"] = pool.spec.replicas
    hub = hub_document("NodePool", pool.metadata.name, spec, _renamer(origin))
    assert isinstance(hub, NodePool)
    written = dumped(pool)
    cluster_only = take(written, _CLUSTER_ONLY)
    rebuilt = from_hub(pool.api_version)(hub, {})
    changed = differing(written, rebuilt, _CONVERTED)
    not_acted_on = (*cluster_only, *custom, *other_limits)
    kept = Kept(pool.api_version, "NodePool", {**cluster_only, **changed}, tuple(not_acted_on))
    return Conversion((hub,), kept)


def from_hub(api_version: str) -> Any:
    def convert(hub: NodePool, kept: Mapping[str, Any]) -> dict[str, Any]:
        ref: dict[str, Any] = {"kind": NODE_CLASS_KIND, "name": hub.spec.node_class_ref}
        if api_version == V1:
            ref["group"] = NODE_CLASS_GROUP
        else:
            ref["apiVersion"] = f"{NODE_CLASS_GROUP}/v1beta1"
        requirements = [r.model_dump(mode="json", by_alias=True) for r in hub.spec.requirements]
        spec: dict[str, Any] = {
            "template": {"spec": {"requirements": requirements, "nodeClassRef": ref}}
        }
        if hub.spec.weight:
            spec["weight"] = hub.spec.weight
        if hub.spec.replicas is not None:
            if api_version != V1:
                rule = (
                    f"a static NodePool (replicas) has no {api_version} spelling: read it as {V1}"
                )
                raise ConfigValidationError([FieldError("spec.replicas", rule)])
            spec["replicas"] = hub.spec.replicas
        hub_only = (
            ("spec.replicasFrom", hub.spec.replicas_from),
            ("spec.capacityBlockEnd", hub.spec.capacity_block_end),
        )
        for path, value in hub_only:
            if value is not None:
                rule = "is capacity-launcher/v1's (Karpenter has no spelling): read it as the hub's"
                raise ConfigValidationError([FieldError(path, rule)])
        if hub.spec.limits is not None:
            hub_limits = hub.spec.limits.to_document()
            if "unready" in hub_limits:  # limits.unready (docs/provisioner.md): no v1 spelling
                rule = "Karpenter's NodePool has no unready limit: read it as a Provisioner"
                raise ConfigValidationError([FieldError("spec.limits.unready", rule)])
            names = {hub_name: name for name, hub_name in LIMIT_NAMES.items()}
            spec["limits"] = {names[k]: v for k, v in hub_limits.items()}
        document = {
            "apiVersion": api_version,
            "kind": "NodePool",
            "metadata": {"name": hub.name},
            "spec": spec,
        }
        return put(document, kept)

    return convert


def versions() -> list[ServedVersion]:
    return served((V1, V1BETA1), "NodePool", "NodePool", KarpenterNodePool, to_hub, from_hub)
