"""The terms a NodeClass selects its reservations and subnets by, and its accelerated images."""

import re
from typing import Annotated, Literal, Self

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from capacity_launcher.domain.apis.config_base import (
    MAX_SELECTOR_TAGS,
    AccountId,
    GroupArn,
    ReservationId,
    SsmParameter,
    SubnetId,
    _Document,
    _matching,
    selector_tags,
)


class CapacityReservationTarget(_Document):
    """One reservation by id, or a group of them by resource-group ARN: exactly one."""

    capacity_reservation_id: ReservationId | None = None
    capacity_reservation_resource_group_arn: GroupArn | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> Self:
        if (self.capacity_reservation_id is None) == (
            self.capacity_reservation_resource_group_arn is None
        ):
            raise ValueError(
                "exactly one of capacityReservationId or capacityReservationResourceGroupArn "
                "must be set"
            )
        return self


class CapacityReservationSpec(_Document):
    """Mirrors the launch template's CapacityReservationSpecification."""

    capacity_reservation_preference: Literal["open", "none"] | None = None
    capacity_reservation_target: CapacityReservationTarget | None = None

    @model_validator(mode="after")
    def _preference_or_target(self) -> Self:
        if (
            self.capacity_reservation_preference is not None
            and self.capacity_reservation_target is not None
        ):
            raise ValueError(
                "capacityReservationPreference cannot be set together with "
                "capacityReservationTarget"
            )
        return self


class CapacityReservationSelectorTerm(_Document):
    """Discovers reservations: by id alone, or by any of tags, owner and match criteria."""

    id: ReservationId | None = None
    tags: dict[str, str] | None = None
    owner_id: AccountId | None = Field(default=None, alias="ownerID")
    instance_match_criteria: Literal["open", "targeted"] | None = None

    @field_validator("tags")
    @classmethod
    def _selector_tags(cls, tags: dict[str, str] | None) -> dict[str, str] | None:
        return selector_tags(tags, MAX_SELECTOR_TAGS)

    @model_validator(mode="after")
    def _id_alone_or_others(self) -> Self:
        others = (self.tags, self.owner_id, self.instance_match_criteria)
        if self.id is not None and any(other is not None for other in others):
            raise ValueError("id cannot be combined with tags, ownerID or instanceMatchCriteria")
        if self.id is None and all(other is None for other in others):
            raise ValueError("set id, or at least one of tags, ownerID or instanceMatchCriteria")
        return self


class SubnetSelectorTerm(_Document):
    id: SubnetId | None = None
    tags: dict[str, str] | None = None

    @field_validator("tags")
    @classmethod
    def _selector_tags(cls, tags: dict[str, str] | None) -> dict[str, str] | None:
        if tags is not None and not tags:
            raise ValueError("must select by at least one tag")
        return tags

    @model_validator(mode="after")
    def _exactly_one(self) -> Self:
        if (self.id is None) == (self.tags is None):
            raise ValueError("exactly one of id or tags must be set")
        return self


_LAUNCH_TEMPLATE_NAME = re.compile(r"^[a-zA-Z0-9().\-/_]{3,128}$")
LaunchTemplateName = Annotated[
    str,
    _matching(
        _LAUNCH_TEMPLATE_NAME,
        "must be a launch template name: 3 to 128 letters, digits or ().-/_",
    ),
]


# An accelerated image's instance types (Karpenter's amifamily variants): NVIDIA GPU types, AWS
# Neuron (Inferentia, Trainium) types. The class's other images then serve the types with neither.
ImageVariant = Literal["nvidia", "neuron"]
MAX_ACCELERATED_IMAGES = 8


class AcceleratedImage(_Document):
    """An image accelerated instance types launch: the public parameter naming it, and which."""

    ssm_parameter: SsmParameter
    variant: ImageVariant
