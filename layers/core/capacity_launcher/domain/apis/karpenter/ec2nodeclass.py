"""karpenter.k8s.aws EC2NodeClass, v1 and v1beta1, as written, to and from the hub NodeClass.

The hub holds the subnet, security group and reservation selectors, the image (an alias becomes
``imageSsmParameter``, ``arm64ImageSsmParameter`` and ``acceleratedImageSsmParameters``, an
``ssmParameter`` ``imageSsmParameter``, an ``id`` ``imageId``), the instance profile or the role
(the service makes the role's instance profile), user data, tags, block device mappings and
metadata options. The rest (``amiFamily``, ``kubelet``, ``instanceStorePolicy``, network
interfaces...) is kept and not acted on.
v1beta1 also takes seed 000's ``capacityReservationSpec`` (preference XOR target).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, Self

from pydantic import AfterValidator, Field, StrictBool, model_validator

from capacity_launcher.domain.apis.api_versions import Conversion, ServedVersion
from capacity_launcher.domain.apis.config import NodeClass
from capacity_launcher.domain.apis.config_base import (
    BUILT_ON_FIRST_USE,
    Document,
    ImageId,
    InstanceProfileName,
    SsmParameter,
)
from capacity_launcher.domain.apis.karpenter.common import ObjectMeta, dumped, hub_document, served
from capacity_launcher.domain.apis.karpenter.images import (
    ARCHITECTURE,
    ARM64,
    DEFAULT_KUBERNETES_VERSION,
    FAMILY_ALIASES,
    KUBERNETES_VERSION_ANNOTATION,
    accelerated_parameters,
    alias_parameters,
    check_alias,
    check_kubernetes_version,
)
from capacity_launcher.domain.apis.kept_fields import Kept, differing, put, take
from capacity_launcher.domain.apis.node_class_terms import (
    CapacityReservationSelectorTerm,
    CapacityReservationSpec,
    SubnetSelectorTerm,
)
from capacity_launcher.domain.capacity.launch_options import (
    BlockDeviceMapping,
    MetadataOptions,
    SecurityGroupSelectorTerm,
    SelectorTags,
)
from capacity_launcher.domain.errors import ConfigValidationError
from capacity_launcher.domain.field_errors import FieldError

V1 = "karpenter.k8s.aws/v1"
V1BETA1 = "karpenter.k8s.aws/v1beta1"
KIND = "EC2NodeClass"
AMI_TERMS = "spec.amiSelectorTerms"
MAX_TERMS = 30
_NOT_ACTED_ON = (
    "metadata.labels",
    "metadata.annotations",
    "spec.amiFamily",
    "spec.kubelet",
    "spec.instanceStorePolicy",
    "spec.detailedMonitoring",
    "spec.associatePublicIPAddress",
    "spec.context",
    "spec.networkInterfaces",
    "spec.ipPrefixCount",
    "spec.connectionTracking",
    "spec.cpuOptions",
)
_CONVERTED = (
    "spec.subnetSelectorTerms",
    "spec.securityGroupSelectorTerms",
    AMI_TERMS,
    "spec.instanceProfile",
    "spec.role",
    "spec.userData",
    "spec.tags",
    "spec.blockDeviceMappings",
    "spec.metadataOptions",
    "spec.capacityReservationSelectorTerms",
    "spec.capacityReservationSpec",
)
AmiFamily = Literal[
    "AL2", "AL2023", "Bottlerocket", "Ubuntu", "Custom", "Windows2019", "Windows2022", "Windows2025"
]


class AmiSelectorTerm(Document):
    """One way to name images: an alias, an id or an SSM parameter alone; or name, owner, tags."""

    model_config = BUILT_ON_FIRST_USE

    alias: Annotated[str, AfterValidator(check_alias)] | None = None
    id: ImageId | None = None
    name: str | None = Field(default=None, min_length=1, max_length=128)
    owner: str | None = Field(default=None, min_length=1, max_length=64)
    tags: SelectorTags | None = None
    ssm_parameter: SsmParameter | None = None

    @model_validator(mode="after")
    def _alone(self) -> Self:
        given = [k for k, v in self.model_dump(by_alias=True, exclude_none=True).items()]
        if not given:
            raise ValueError("set one of alias, id, ssmParameter, name, owner or tags")
        for single in ("alias", "id", "ssmParameter"):
            if single in given and len(given) > 1:
                raise ValueError(
                    f"{single} cannot be combined with {', '.join(g for g in given if g != single)}"
                )
        return self


class EC2NodeClassSpec(Document):
    model_config = BUILT_ON_FIRST_USE
    subnet_selector_terms: list[SubnetSelectorTerm] = Field(min_length=1, max_length=MAX_TERMS)
    security_group_selector_terms: list[SecurityGroupSelectorTerm] = Field(
        min_length=1, max_length=MAX_TERMS
    )
    ami_selector_terms: list[AmiSelectorTerm] | None = Field(
        default=None, min_length=1, max_length=MAX_TERMS
    )
    ami_family: AmiFamily | None = None
    user_data: str | None = None
    role: str | None = Field(default=None, min_length=1, max_length=64)
    instance_profile: InstanceProfileName | None = None
    tags: dict[str, str] | None = None
    kubelet: dict[str, Any] | None = None
    block_device_mappings: list[BlockDeviceMapping] | None = Field(default=None, max_length=50)
    instance_store_policy: Literal["RAID0"] | None = None
    metadata_options: MetadataOptions | None = None
    detailed_monitoring: StrictBool | None = None
    associate_public_ip_address: StrictBool | None = Field(
        default=None, alias="associatePublicIPAddress"
    )
    context: str | None = None
    capacity_reservation_selector_terms: list[CapacityReservationSelectorTerm] | None = Field(
        default=None, max_length=MAX_TERMS
    )
    capacity_reservation_spec: CapacityReservationSpec | None = None
    network_interfaces: list[dict[str, Any]] | None = None
    placement_group_selector: dict[str, Any] | None = None
    ip_prefix_count: int | None = Field(default=None, ge=0)
    connection_tracking: dict[str, Any] | None = None
    cpu_options: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _karpenter_rules(self) -> Self:
        if self.role is not None and self.instance_profile is not None:
            raise ValueError("role and instanceProfile cannot both be set")
        terms = self.ami_selector_terms or []
        if any(t.alias for t in terms) and len(terms) != 1:
            raise ValueError("an amiSelectorTerms alias must be the only term")
        return self


class EC2NodeClass(Document):
    model_config = BUILT_ON_FIRST_USE
    api_version: Literal["karpenter.k8s.aws/v1", "karpenter.k8s.aws/v1beta1"]
    kind: Literal["EC2NodeClass"]
    metadata: ObjectMeta
    spec: EC2NodeClassSpec


# Karpenter launches every instance of a class with placementGroupSelector into the placement
# group it selects; capacity-launcher does not (only a reservation made in a cluster placement
# group places its instances there). Kept and ignored, a gang asking for a cluster group would
# silently run spread out: refused instead.
PLACEMENT_GROUP_RULE = (
    "is not supported by capacity-launcher: its instances would launch outside the placement "
    "group. Remove it; capacity reserved in a cluster placement group is launched into that "
    "group (select the reservation: docs/placement.md)"
)


def _version_rules(node_class: EC2NodeClass) -> list[FieldError]:
    spec, errors = node_class.spec, []
    if spec.placement_group_selector is not None:
        errors.append(FieldError("spec.placementGroupSelector", PLACEMENT_GROUP_RULE))
    if node_class.api_version == V1:
        if spec.ami_selector_terms is None:
            errors.append(FieldError(AMI_TERMS, "is required"))
        if spec.capacity_reservation_spec is not None:
            rule = "is not an allowed field in v1: use capacityReservationSelectorTerms"
            errors.append(FieldError("spec.capacityReservationSpec", rule))
    else:
        if spec.ami_family is None:
            errors.append(FieldError("spec.amiFamily", "is required in v1beta1"))
        if spec.capacity_reservation_selector_terms is not None:
            rule = "is not an allowed field in v1beta1: use capacityReservationSpec"
            errors.append(FieldError("spec.capacityReservationSelectorTerms", rule))
        for index, term in enumerate(spec.ami_selector_terms or []):
            if term.alias is not None:
                errors.append(
                    FieldError(f"{AMI_TERMS}[{index}].alias", "is v1's; v1beta1 uses amiFamily")
                )
    return errors


def _kubernetes_version(node_class: EC2NodeClass) -> str:
    annotations = node_class.metadata.annotations or {}
    version = annotations.get(KUBERNETES_VERSION_ANNOTATION, DEFAULT_KUBERNETES_VERSION)
    try:
        return check_kubernetes_version(version)
    except ValueError as error:
        path = f"metadata.annotations[{KUBERNETES_VERSION_ANNOTATION}]"
        raise ConfigValidationError([FieldError(path, str(error))]) from None


def _image(node_class: EC2NodeClass) -> dict[str, Any]:
    """The hub's image field: an alias or one ssmParameter is `imageSsmParameter`, one id
    `imageId`; ids, names, owners and tags are `imageSelectorTerms` (the newest image wins)."""
    spec = node_class.spec
    terms = spec.ami_selector_terms
    if not terms:
        alias = FAMILY_ALIASES.get(spec.ami_family or "")
        if alias is None:
            rule = f"amiFamily {spec.ami_family} needs amiSelectorTerms in capacity-launcher"
            raise ConfigValidationError([FieldError(AMI_TERMS, rule)])
        return _alias_image(f"{alias}@latest", node_class)
    first = terms[0]
    if first.alias is not None:
        return _alias_image(first.alias, node_class)
    if first.ssm_parameter is not None and len(terms) == 1:
        return {"imageSsmParameter": first.ssm_parameter}
    if len(terms) == 1 and first.id is not None:
        return {"imageId": first.id}
    if any(t.ssm_parameter is not None for t in terms):
        rule = "an ssmParameter must be the only term in capacity-launcher"
        raise ConfigValidationError([FieldError(AMI_TERMS, rule)])
    return {"imageSelectorTerms": [t.model_dump(by_alias=True, exclude_none=True) for t in terms]}


def _alias_image(alias: str, node_class: EC2NodeClass) -> dict[str, Any]:
    """An alias's parameters: the x86_64 image's `imageSsmParameter`, the arm64 image's
    `arm64ImageSsmParameter`, the NVIDIA and Neuron images' `acceleratedImageSsmParameters`
    (Karpenter resolves an alias to an image per architecture and variant)."""
    kubernetes_version = _kubernetes_version(node_class)
    parameters = alias_parameters(alias, kubernetes_version)
    image: dict[str, Any] = {"imageSsmParameter": parameters[ARCHITECTURE]}
    if ARM64 in parameters:
        image["arm64ImageSsmParameter"] = parameters[ARM64]
    accelerated = accelerated_parameters(alias, kubernetes_version)
    if accelerated:
        image["acceleratedImageSsmParameters"] = [
            {"ssmParameter": name, "variant": variant} for _, variant, name in accelerated
        ]
    return image


def _rename(path: str) -> str:
    if path.startswith(
        (
            "spec.imageId",
            "spec.imageSsmParameter",
            "spec.arm64ImageSsmParameter",
            "spec.acceleratedImageSsmParameters",
        )
    ):
        return AMI_TERMS
    if path.startswith("spec.imageSelectorTerms"):
        return AMI_TERMS + path.removeprefix("spec.imageSelectorTerms")
    return path


def to_hub(node_class: EC2NodeClass) -> Conversion:
    errors = _version_rules(node_class)
    if errors:
        raise ConfigValidationError(errors)
    image = _image(node_class)
    written = dumped(node_class)
    hub_spec = {k: v for k, v in take(written, _CONVERTED).items() if k != AMI_TERMS}
    spec: dict[str, Any] = {path.removeprefix("spec."): value for path, value in hub_spec.items()}
    spec |= image
    for terms, ids in (
        ("subnetSelectorTerms", "subnetIds"),
        ("securityGroupSelectorTerms", "securityGroupIds"),
    ):
        # Terms that are all ids are the hub's list of ids (what a hub's ids read back as).
        if all(set(term) == {"id"} for term in spec[terms]):
            spec[ids] = [term["id"] for term in spec.pop(terms)]
    hub = hub_document("NodeClass", node_class.metadata.name, spec, _rename)
    assert isinstance(hub, NodeClass)
    not_acted_on = take(written, _NOT_ACTED_ON)
    rebuilt = from_hub(node_class.api_version)(hub, {})
    changed = differing(written, rebuilt, _CONVERTED)
    kept = Kept(node_class.api_version, KIND, {**not_acted_on, **changed}, tuple(not_acted_on))
    return Conversion((hub,), kept)


def _hub_terms(hub: NodeClass) -> dict[str, Any]:
    spec = hub.spec
    hub_written = dumped(hub)["spec"]
    found: dict[str, Any] = {
        "subnetSelectorTerms": hub_written.get("subnetSelectorTerms")
        or [{"id": i} for i in spec.subnet_ids or ()],
        "securityGroupSelectorTerms": hub_written.get("securityGroupSelectorTerms")
        or [{"id": i} for i in spec.security_group_ids or ()],
        "amiSelectorTerms": hub_written.get("imageSelectorTerms")
        or (
            [{"id": spec.image_id}]
            if spec.image_id
            else [{"ssmParameter": spec.image_ssm_parameter}]
        ),
    }
    for name in (
        "instanceProfile",
        "role",
        "userData",
        "tags",
        "blockDeviceMappings",
        "metadataOptions",
    ):
        if hub_written.get(name):
            found[name] = hub_written[name]
    return found


def from_hub(api_version: str) -> Any:
    def convert(hub: NodeClass, kept: Mapping[str, Any]) -> dict[str, Any]:
        spec = _hub_terms(hub)
        hub_written = dumped(hub)["spec"]
        if api_version == V1:
            if "capacityReservationSelectorTerms" in hub_written:
                spec["capacityReservationSelectorTerms"] = hub_written[
                    "capacityReservationSelectorTerms"
                ]
        else:
            spec["amiFamily"] = "Custom"
            if "capacityReservationSpec" in hub_written:
                spec["capacityReservationSpec"] = hub_written["capacityReservationSpec"]
        document = {
            "apiVersion": api_version,
            "kind": KIND,
            "metadata": {"name": hub.name},
            "spec": spec,
        }
        return put(document, kept)

    return convert


# The hub's fields neither version writes: a launch template by name, the arm64, NVIDIA and Neuron
# images' parameters (but for an alias's own, docs/karpenter.md), and the other version's
# reservation field.
_IMAGES_HUB_ONLY = frozenset({"spec.arm64ImageSsmParameter", "spec.acceleratedImageSsmParameters"})
_HUB_ONLY = {
    V1: frozenset({"spec.launchTemplateName", "spec.capacityReservationSpec"}) | _IMAGES_HUB_ONLY,
    V1BETA1: frozenset({"spec.launchTemplateName", "spec.capacityReservationSelectorTerms"})
    | _IMAGES_HUB_ONLY,
}


def hub_only(api_version: str) -> Any:
    """ServedVersion.hub_only: the version's hub-only fields but the image ones the document's
    own images set (an alias sets both architectures' parameters)."""

    def paths(node_class: EC2NodeClass) -> frozenset[str]:
        try:
            image = _image(node_class)
        except ConfigValidationError:
            image = {}
        return _HUB_ONLY[api_version] - {f"spec.{name}" for name in image}

    return paths


def versions() -> list[ServedVersion]:
    return served((V1, V1BETA1), KIND, "NodeClass", EC2NodeClass, to_hub, from_hub, hub_only)
