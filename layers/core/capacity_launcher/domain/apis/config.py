"""NodeClass and NodePool: the configuration documents, validated by the same models everywhere.

Field names are the documents' camelCase (docs/contracts.md, NodeClass and NodePool); unknown fields
are errors, and every error names the field (by its document path) and the rule it breaks.
"""

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Annotated, Literal, Self

from pydantic import (
    Field,
    StrictInt,
    field_validator,
    model_validator,
)

from capacity_launcher.domain.apis.config_base import (  # noqa: F401 - re-exported
    _NAME,
    BUILT_ON_FIRST_USE,
    MAX_NODE_CLASS_TAGS,
    MAX_POOL_REQUIREMENTS,
    MAX_POOL_REQUIREMENTS_BYTES,
    MAX_SELECTOR_TAGS,
    MAX_SELECTOR_TERMS,
    MAX_TAG_KEY_LENGTH,
    MAX_TAG_VALUE_LENGTH,
    MAX_TAGS_PER_RESOURCE,
    MAX_USER_DATA_BYTES,
    RESERVED_TAG_PREFIXES,
    SERVICE_INSTANCE_TAGS,
    AccountId,
    GroupArn,
    ImageId,
    InstanceProfileName,
    Name,
    ReservationId,
    RoleName,
    SecurityGroupId,
    SsmParameter,
    SubnetId,
    _Document,
    _matching,
    _shown,
    no_repeats,
    selector_tags,
    validate_tags,
)
from capacity_launcher.domain.apis.node_class_terms import (
    MAX_ACCELERATED_IMAGES,
    AcceleratedImage,
    CapacityReservationSelectorTerm,
    CapacityReservationSpec,
    CapacityReservationTarget,
    LaunchTemplateName,
    SubnetSelectorTerm,
)
from capacity_launcher.domain.apis.pool_order import weight_order
from capacity_launcher.domain.capacity.block_end_policy import CapacityBlockEnd
from capacity_launcher.domain.capacity.constraints import Requirements
from capacity_launcher.domain.capacity.launch_options import (
    MAX_BLOCK_DEVICE_MAPPINGS,
    BlockDeviceMapping,
    ImageSelectorTerm,
    MetadataOptions,
    SecurityGroupSelectorTerm,
    check_block_device_mappings,
)
from capacity_launcher.domain.capacity.requirements import (
    CAPACITY_TYPE,
    CAPACITY_TYPES,
    ON_DEMAND,
    RESERVED,
    Operator,
    Requirement,
)
from capacity_launcher.domain.quantities import PoolLimits

NODE_CLASS = "NodeClass"
NODE_POOL = "NodePool"
CAPACITY_QUOTA = "CapacityQuota"
KINDS = f"{NODE_CLASS}, {NODE_POOL} or {CAPACITY_QUOTA}"

# Karpenter adds `capacity-type In [on-demand]` to a pool that says nothing; we also allow the
# reservations (already paid for). Spot only when a pool's requirements allow it.
DEFAULT_CAPACITY_TYPES: tuple[str, ...] = (RESERVED, ON_DEMAND)


class Metadata(_Document):
    name: Name


class NodeClassSpec(_Document):
    """How to launch: image, network, instance profile, user data, tags and reservations."""

    image_id: ImageId | None = None
    image_ssm_parameter: SsmParameter | None = None
    # Optional, with imageSsmParameter: the parameter naming the image arm64 instance types
    # launch (an amiSelectorTerms alias sets both); each type launches the image it can run.
    arm64_image_ssm_parameter: SsmParameter | None = None
    # Optional, with imageSsmParameter: the images GPU and Neuron types launch instead (an
    # amiSelectorTerms alias sets them as Karpenter resolves its variants; docs/karpenter.md).
    accelerated_image_ssm_parameters: list[AcceleratedImage] | None = Field(
        default=None, min_length=1, max_length=MAX_ACCELERATED_IMAGES
    )
    image_selector_terms: list[ImageSelectorTerm] | None = Field(
        default=None, min_length=1, max_length=MAX_SELECTOR_TERMS
    )
    subnet_ids: list[SubnetId] | None = Field(default=None, min_length=1, max_length=100)
    subnet_selector_terms: list[SubnetSelectorTerm] | None = Field(
        default=None, min_length=1, max_length=MAX_SELECTOR_TERMS
    )
    security_group_ids: list[SecurityGroupId] | None = Field(
        default=None, min_length=1, max_length=16
    )
    security_group_selector_terms: list[SecurityGroupSelectorTerm] | None = Field(
        default=None, min_length=1, max_length=MAX_SELECTOR_TERMS
    )
    instance_profile: InstanceProfileName | None = None
    # Karpenter's `role`: the service makes the class an instance profile holding this role
    # (domain/capacity/instance_profiles.py); an alternative to instanceProfile.
    role: RoleName | None = None
    user_data: str | None = None
    tags: dict[str, str] = Field(default={})
    capacity_reservation_spec: CapacityReservationSpec | None = None
    capacity_reservation_selector_terms: list[CapacityReservationSelectorTerm] | None = Field(
        default=None, min_length=1, max_length=MAX_SELECTOR_TERMS
    )
    block_device_mappings: list[BlockDeviceMapping] | None = Field(
        default=None, min_length=1, max_length=MAX_BLOCK_DEVICE_MAPPINGS
    )
    metadata_options: MetadataOptions | None = None
    # Optional: an existing launch template whose default version's data is the base of the
    # templates generated for this class; what the class sets overrides it (docs/provisioner.md).
    launch_template_name: LaunchTemplateName | None = None

    @field_validator("block_device_mappings")
    @classmethod
    def _block_devices(
        cls, values: list[BlockDeviceMapping] | None
    ) -> list[BlockDeviceMapping] | None:
        return check_block_device_mappings(values)

    @field_validator("subnet_ids", "security_group_ids")
    @classmethod
    def _no_repeats(cls, values: list[str] | None) -> list[str] | None:
        if values is not None and len(set(values)) != len(values):
            raise ValueError("must not repeat an id")
        return values

    @field_validator("user_data")
    @classmethod
    def _user_data(cls, value: str | None) -> str | None:
        if value is not None and len(value.encode("utf-8", "surrogatepass")) > MAX_USER_DATA_BYTES:
            raise ValueError(f"must be at most {MAX_USER_DATA_BYTES} bytes (EC2's limit)")
        return value

    @field_validator("tags")
    @classmethod
    def _tags(cls, tags: dict[str, str]) -> dict[str, str]:
        if len(tags) > MAX_NODE_CLASS_TAGS:
            raise ValueError(
                f"at most {MAX_NODE_CLASS_TAGS} tags: EC2 allows {MAX_TAGS_PER_RESOURCE} per "
                f"resource and capacity-launcher adds {SERVICE_INSTANCE_TAGS} of its own to "
                "every instance"
            )
        return validate_tags(tags, MAX_NODE_CLASS_TAGS)

    @model_validator(mode="after")
    def _alternatives(self) -> Self:
        images = (self.image_id, self.image_ssm_parameter, self.image_selector_terms)
        if sum(image is not None for image in images) != 1:
            raise ValueError(
                "exactly one of imageId, imageSsmParameter or imageSelectorTerms must be set"
            )
        if self.role is not None and self.instance_profile is not None:
            raise ValueError("role and instanceProfile cannot both be set")
        self._image_parameters()
        if (self.subnet_ids is None) == (self.subnet_selector_terms is None):
            raise ValueError("exactly one of subnetIds or subnetSelectorTerms must be set")
        if (self.security_group_ids is None) == (self.security_group_selector_terms is None):
            raise ValueError(
                "exactly one of securityGroupIds or securityGroupSelectorTerms must be set"
            )
        if (
            self.capacity_reservation_selector_terms is not None
            and self.capacity_reservation_spec is not None
            and self.capacity_reservation_spec.capacity_reservation_target is not None
        ):
            raise ValueError(
                "capacityReservationSelectorTerms cannot be set together with "
                "capacityReservationSpec.capacityReservationTarget: selector terms are an "
                "alternative to a target"
            )
        return self

    def _image_parameters(self) -> None:
        """The per-architecture image parameters go only beside imageSsmParameter, once each."""
        if self.arm64_image_ssm_parameter is not None and self.image_ssm_parameter is None:
            raise ValueError("arm64ImageSsmParameter can only be set with imageSsmParameter")
        accelerated = self.accelerated_image_ssm_parameters
        if accelerated is not None and self.image_ssm_parameter is None:
            raise ValueError("acceleratedImageSsmParameters can only be set with imageSsmParameter")
        if accelerated is not None and len(set(accelerated)) != len(accelerated):
            raise ValueError("acceleratedImageSsmParameters must not repeat an entry")

    @property
    def reservation_preference(self) -> Literal["open", "none"]:
        """The on-demand preference; EC2's default is open."""
        spec = self.capacity_reservation_spec
        if spec is None or spec.capacity_reservation_preference is None:
            return "open"
        return spec.capacity_reservation_preference

    @property
    def reservation_target(self) -> CapacityReservationTarget | None:
        spec = self.capacity_reservation_spec
        return None if spec is None else spec.capacity_reservation_target


class _TopLevel(_Document):
    """apiVersion, kind and metadata, as every document starts."""

    api_version: Literal["capacity-launcher/v1"]
    kind: str
    metadata: Metadata

    @property
    def name(self) -> str:
        return self.metadata.name


class NodeClass(_TopLevel):
    kind: Literal["NodeClass"]
    spec: NodeClassSpec


# A static pool's replicas, at most: its launches in flight are tracked in one item.
MAX_STATIC_REPLICAS = 1000


class NodePoolSpec(_Document):
    """What may be launched: requirements, limits and a weight for choosing among pools; or, with
    `replicas`, a static pool: that many instances kept running by the service
    (docs/static-capacity.md), never chosen for a request."""

    node_class_ref: Name
    weight: StrictInt = Field(default=0, ge=0, le=100)
    requirements: list[Requirement] = Field(default=[], max_length=MAX_POOL_REQUIREMENTS)
    limits: PoolLimits | None = None
    replicas: StrictInt | None = Field(default=None, ge=0, le=MAX_STATIC_REPLICAS)
    # Beyond Karpenter (hub only): `Reserved`, the pool keeps as many instances as its NodeClass's
    # active reservations hold, `replicas` at most, launched into reservations only.
    replicas_from: Literal["Reserved"] | None = None
    # Beyond Karpenter (hub only): what a static pool does before a Capacity Block holding its
    # instances ends: evacuate, extend within a price, or nothing (domain/capacity/block_ends.py);
    # on a dynamic pool, what its requests may opt in to (block_end_policy.request_refusal).
    capacity_block_end: CapacityBlockEnd | None = None

    @model_validator(mode="after")
    def _static_rules(self) -> Self:
        """Karpenter's rules for a static pool: limited by its instance count only, and no
        weight (it is never chosen among pools)."""
        if self.replicas is None:
            # A dynamic pool's capacityBlockEnd bounds what its requests may opt in to
            # (block_end_policy.request_refusal).
            if self.replicas_from is not None:
                raise ValueError(
                    "replicasFrom needs replicas (the most the pool keeps): without it the pool "
                    "is not static and replicasFrom would be ignored"
                )
            return self
        if self.replicas_from is not None and RESERVED not in self.allowed_capacity_types():
            raise ValueError(
                f"replicasFrom: Reserved needs {CAPACITY_TYPE} to allow {RESERVED}: its "
                "launches go into reservations only"
            )
        if self.weight:
            raise ValueError("weight cannot be set with replicas (a static pool is never chosen)")
        limits = self.limits
        if limits is not None:
            other = [
                name
                for name, value in (
                    ("cpu", limits.cpu),
                    ("memory", limits.memory),
                    ("nvidia.com/gpu", limits.gpu),
                    ("unready", limits.unready),
                )
                if value is not None
            ]
            if other:
                raise ValueError(
                    f"limits {', '.join(other)} cannot be set with replicas: a static pool is "
                    "limited by its instance count only (limits.instances; Karpenter's nodes)"
                )
        return self

    @property
    def is_static(self) -> bool:
        return self.replicas is not None

    @field_validator("requirements")
    @classmethod
    def _satisfiable(cls, requirements: list[Requirement]) -> list[Requirement]:
        size = len(
            json.dumps([r.model_dump(mode="json", by_alias=True) for r in requirements]).encode()
        )
        if size > MAX_POOL_REQUIREMENTS_BYTES:
            raise ValueError(
                f"must be at most {MAX_POOL_REQUIREMENTS_BYTES} bytes as JSON, not {size} "
                "(the NodePool is stored in one DynamoDB item of 400 KB)"
            )
        merged = _with_default_capacity_types(Requirements.of(requirements))
        empty = merged.empty_keys()
        if empty:
            raise ValueError(f"requirements on {', '.join(empty)} admit no value together")
        if not merged.allowed_values(CAPACITY_TYPE, CAPACITY_TYPES):
            raise ValueError(
                f"{CAPACITY_TYPE} must allow at least one of {', '.join(CAPACITY_TYPES)}"
            )
        return requirements

    def requirements_set(self) -> Requirements:
        """The pool's requirements, with the default capacity types when it names none."""
        return _with_default_capacity_types(Requirements.of(self.requirements))

    def allowed_capacity_types(self) -> list[str]:
        """In CAPACITY_TYPES order; ["reserved", "on-demand"] when the pool says nothing."""
        return self.requirements_set().allowed_values(CAPACITY_TYPE, CAPACITY_TYPES)


def _with_default_capacity_types(requirements: Requirements) -> Requirements:
    if CAPACITY_TYPE in requirements:
        return requirements
    default = Requirement(key=CAPACITY_TYPE, operator=Operator.IN, values=DEFAULT_CAPACITY_TYPES)
    return requirements.intersect(Requirements.of([default]))


class NodePool(_TopLevel):
    kind: Literal["NodePool"]
    spec: NodePoolSpec


def mode_switch(applied_static: bool) -> str:
    """Why an apply that would switch a stored pool between static and dynamic is refused
    (Karpenter's rule: replicas, once set, stay; a dynamic pool does not become static)."""
    if applied_static:
        return (
            "spec.replicas: cannot be set on a NodePool stored without it (a pool cannot switch "
            "between dynamic and static); delete it and apply it again"
        )
    return (
        "spec.replicas: cannot be removed from a static NodePool (a pool cannot switch between "
        "static and dynamic); set replicas: 0 to stop its instances, or delete it"
    )


class PoolSet:
    """The stored NodePools as of one generation. Every apply and delete of a NodePool bumps the
    generation in the same transaction as its write (not an apply of the same document again),
    so a lease conditioned on the generation a request's choice of pool was made from holds only
    if no pool changed since.

    `first` holds them in the order they are tried (`pool_order.weight_order`; sorted here when
    given whole). A store may give `pools` as the first page of that order and `more` for each
    next page (None when none is left): the service then reads them only as far as a caller
    iterates, each page once (service/pool_listing.py). A page read later than the generation
    may be newer than it; a lease conditioned on the generation then fails, as one chosen from
    a listing read after its generation does."""

    def __init__(
        self,
        generation: int | None,  # None: not read from a store (nothing to condition on)
        pools: Iterable[NodePool] = (),
        more: Callable[[], Sequence[NodePool] | None] | None = None,
    ) -> None:
        self.generation = generation
        self.first = tuple(pools) if more is not None else tuple(sorted(pools, key=weight_order))
        self.more = more

    def __repr__(self) -> str:
        paged = ", more in pages" if self.more is not None else ""
        return f"PoolSet(generation={self.generation}, {len(self.first)} first{paged})"


@dataclass(frozen=True)
class NodeClassUsers:
    """What a NodeClass's delete reads: the class's version, the NodePools' generation read
    before the pools (any pool applied naming it, or deleted, after it bumps it), and the pools
    naming the class."""

    version: int
    pools_generation: int
    users: tuple[str, ...]


ConfigDocument = Annotated[NodeClass | NodePool, Field(discriminator="kind")]
