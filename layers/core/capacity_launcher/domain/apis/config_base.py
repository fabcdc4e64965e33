"""What every configuration document shares: the base model (camelCase on the wire, unknown fields
refused, immutable), the id and name types with their rules, and EC2's tag limits."""

import re
from collections.abc import Mapping, Sequence
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

RESERVED_TAG_PREFIXES: tuple[str, ...] = ("aws:", "capacity-launcher:")
MAX_TAG_KEY_LENGTH = 128
MAX_TAG_VALUE_LENGTH = 256
# EC2 allows 50 tags per resource, and capacity-launcher adds its own to every instance and fleet
# (domain/records/tags.py: managed, node-class, node-pool, request-id, requester, stack);
# volumes, network interfaces and spot requests get the NodeClass tags and three of ours.
MAX_TAGS_PER_RESOURCE = 50
SERVICE_INSTANCE_TAGS = 6
MAX_NODE_CLASS_TAGS = MAX_TAGS_PER_RESOURCE - SERVICE_INSTANCE_TAGS
MAX_SELECTOR_TAGS = 50
MAX_USER_DATA_BYTES = 16 * 1024
MAX_POOL_REQUIREMENTS = 100
# A NodePool's requirements as stored (compact JSON): Karpenter bounds their number and each
# value's length, not how many values one holds (800 instance types is about 14 KB). The stored
# document is one DynamoDB item (400 KB) beside the fields an apply keeps (64 KB at most).
MAX_POOL_REQUIREMENTS_BYTES = 128 * 1024
MAX_SELECTOR_TERMS = 100

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_RESERVATION_ID = re.compile(r"^cr-[0-9a-f]{17}$")
_GROUP_ARN = re.compile(
    r"^arn:aws[a-z-]*:resource-groups:[a-z0-9-]+:\d{12}:group/[A-Za-z0-9_.-]{1,300}$"
)
_ACCOUNT_ID = re.compile(r"^\d{12}$")
_IMAGE_ID = re.compile(r"^ami-[0-9a-z]{1,32}$")
_SSM_PARAMETER = re.compile(r"^[A-Za-z0-9_./-]{1,2048}$")
_SUBNET_ID = re.compile(r"^subnet-[0-9a-z]{1,32}$")
_SECURITY_GROUP_ID = re.compile(r"^sg-[0-9a-z]{1,32}$")
_INSTANCE_PROFILE = re.compile(r"^[\w+=,.@-]{1,128}$")
# A role's name (1 to 64 characters), optionally after its path or as its ARN.
_ROLE = re.compile(r"^(arn:aws[a-z-]*:iam::[0-9]{12}:role/)?([\w+=,.@-]+/)*[\w+=,.@-]{1,64}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def no_repeats(values: Sequence[str]) -> list[str]:
    """A list validator: each value at most once (the repeats named)."""
    repeated = sorted({value for value in values if list(values).count(value) > 1})
    if repeated:
        raise ValueError(f"must not repeat {', '.join(repeated)}")
    return list(values)


def _shown(text: str, limit: int = 40) -> str:
    """A user's string quoted for an error message, cut short so hostile input stays small."""
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _matching(pattern: re.Pattern[str], rule: str) -> AfterValidator:
    def check(value: str) -> str:
        if not pattern.match(value):
            raise ValueError(rule)
        return value

    return AfterValidator(check)


_NAME_RULE = (
    "must be 1 to 63 lowercase letters, digits or '-', starting and ending with a letter or digit"
)
Name = Annotated[str, _matching(_NAME, _NAME_RULE)]
ReservationId = Annotated[
    str, _matching(_RESERVATION_ID, "must be 'cr-' followed by 17 lowercase hexadecimal digits")
]
GroupArn = Annotated[
    str,
    _matching(
        _GROUP_ARN,
        "must be a resource group ARN: arn:aws:resource-groups:REGION:ACCOUNT:group/NAME",
    ),
]
AccountId = Annotated[str, _matching(_ACCOUNT_ID, "must be a 12-digit AWS account id")]
ImageId = Annotated[str, _matching(_IMAGE_ID, "must be an image id such as ami-0123456789abcdef0")]
SsmParameter = Annotated[
    str,
    _matching(
        _SSM_PARAMETER,
        "must be an SSM parameter name such as /aws/service/ami-amazon-linux-latest/...",
    ),
]
SubnetId = Annotated[
    str, _matching(_SUBNET_ID, "must be a subnet id such as subnet-0123456789abcdef0")
]
SecurityGroupId = Annotated[
    str, _matching(_SECURITY_GROUP_ID, "must be a security group id such as sg-0123456789abcdef0")
]
InstanceProfileName = Annotated[
    str,
    _matching(
        _INSTANCE_PROFILE, "must be an instance profile name: 1 to 128 letters, digits or +=,.@_-"
    ),
]
RoleName = Annotated[
    str,
    _matching(
        _ROLE,
        "must be an IAM role: its name (1 to 64 letters, digits or +=,.@_-), optionally after "
        "its path, or its ARN",
    ),
]


def validate_tags(tags: Mapping[str, str], max_count: int) -> dict[str, str]:
    """EC2's tag limits, plus the prefixes only AWS and capacity-launcher itself may write."""
    if len(tags) > max_count:
        raise ValueError(f"at most {max_count} tags")
    for key, value in tags.items():
        if not 1 <= len(key) <= MAX_TAG_KEY_LENGTH or _CONTROL.search(key):
            raise ValueError(
                f"tag keys must be 1 to {MAX_TAG_KEY_LENGTH} characters without control characters"
            )
        for prefix in RESERVED_TAG_PREFIXES:
            if key.lower().startswith(prefix):
                raise ValueError(
                    f"tag key {_shown(key)} must not start with the reserved {prefix!r}"
                )
        if len(value) > MAX_TAG_VALUE_LENGTH or _CONTROL.search(value):
            raise ValueError(
                f"tag {_shown(key)}: values must be at most {MAX_TAG_VALUE_LENGTH} characters "
                "without control characters"
            )
    return dict(tags)


class Document(BaseModel):
    """camelCase on the wire, snake_case in Python; unknown fields are errors; immutable."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )


# For documents most invocations never read (CapacityQuota): validators built on first use, so a
# cold start pays for them only when such a document is read.
BUILT_ON_FIRST_USE = ConfigDict(defer_build=True)


_Document = Document  # the name config.py and quotas.py have always used


def selector_tags(tags: dict[str, str] | None, max_count: int) -> dict[str, str] | None:
    """Tags a selector term matches: at least one, at most ``max_count``, none empty."""
    if tags is None:
        return None
    if not tags:
        raise ValueError("must select by at least one tag")
    if len(tags) > max_count:
        raise ValueError(f"at most {max_count} tags")
    if any(not key or not value for key, value in tags.items()):
        raise ValueError("tag keys and values must not be empty")
    return tags
