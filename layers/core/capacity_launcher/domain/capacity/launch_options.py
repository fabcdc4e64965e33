"""Optional NodeClass fields added for Karpenter's EC2NodeClass: security groups by selector,
block device mappings and instance metadata options, each as EC2 takes it in a launch template.

Names follow Karpenter's EC2NodeClass (``securityGroupSelectorTerms``, ``blockDeviceMappings``,
``metadataOptions``); the rules are EC2's (CreateLaunchTemplate's LaunchTemplateBlockDeviceMapping
and LaunchTemplateInstanceMetadataOptions) and Karpenter's CRD validation.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Self

from pydantic import AfterValidator, Field, StrictBool, StrictInt, model_validator

from capacity_launcher.domain.apis.config_base import (
    Document,
    ImageId,
    SecurityGroupId,
    selector_tags,
)

MAX_SELECTOR_TAGS = 20
MAX_BLOCK_DEVICE_MAPPINGS = 50
_DEVICE_NAME = re.compile(r"^/dev/[a-z0-9]{1,32}$")
_SNAPSHOT_ID = re.compile(r"^snap-[0-9a-f]{8,17}$")
_KMS_KEY = re.compile(r"^[A-Za-z0-9:/_.=+-]{1,2048}$")
_GROUP_NAME = re.compile(r"^[\x20-\x7e]{1,255}$")
# Karpenter's volumeSize: a quantity of Gi, G, Ti or T; EC2 takes whole GiB, 1 to 64 TiB.
_VOLUME_SIZE = re.compile(r"^([1-9][0-9]{0,4})(Gi|G|Ti|T)$")
_GIB_PER_UNIT = {"Gi": 1.0, "G": 1e9 / 2**30, "Ti": 1024.0, "T": 1e12 / 2**30}
MAX_VOLUME_GIB = 64 * 1024


def _selector_tags(tags: dict[str, str] | None) -> dict[str, str] | None:
    return selector_tags(tags, MAX_SELECTOR_TAGS)


SelectorTags = Annotated[dict[str, str], AfterValidator(_selector_tags)]


class SecurityGroupSelectorTerm(Document):
    """Security groups by id, by name (``group-name``), or by tags: id and name stand alone."""

    id: SecurityGroupId | None = None
    name: str | None = Field(default=None, pattern=_GROUP_NAME.pattern)
    tags: SelectorTags | None = None

    @model_validator(mode="after")
    def _one_way(self) -> Self:
        given = [f for f, v in (("id", self.id), ("name", self.name), ("tags", self.tags)) if v]
        if not given:
            raise ValueError("set one of id, name or tags")
        if len(given) > 1 and ("id" in given or "name" in given):
            raise ValueError(f"{' and '.join(given)} cannot be combined: id and name stand alone")
        return self


class ImageSelectorTerm(Document):
    """Images by id alone, or by any of name (wildcards), owner (an account id, `self`,
    `amazon`) and tags; the launcher takes the newest image the terms find (as Karpenter does)."""

    id: ImageId | None = None
    name: str | None = Field(default=None, min_length=1, max_length=128)
    owner: str | None = Field(default=None, min_length=1, max_length=64)
    tags: SelectorTags | None = None

    @model_validator(mode="after")
    def _id_alone(self) -> Self:
        others = [
            f for f, v in (("name", self.name), ("owner", self.owner), ("tags", self.tags)) if v
        ]
        if self.id is not None and others:
            raise ValueError(f"id cannot be combined with {', '.join(others)}")
        if self.id is None and not others:
            raise ValueError("set id, or at least one of name, owner or tags")
        return self


def volume_gib(size: str) -> int:
    """A volumeSize in whole GiB, rounded up (EC2's VolumeSize); ValueError with the rule."""
    match = _VOLUME_SIZE.match(size)
    rule = "must be a size such as '20Gi', '100G' or '2Ti', at most 64Ti"
    if not match:
        raise ValueError(rule)
    gib = -(-int(match.group(1)) * _GIB_PER_UNIT[match.group(2)] // 1)
    if not 1 <= gib <= MAX_VOLUME_GIB:
        raise ValueError(rule)
    return int(gib)


def _volume_size(size: str) -> str:
    volume_gib(size)
    return size


class BlockDevice(Document):
    """An EBS volume of a block device mapping (Karpenter's BlockDevice)."""

    delete_on_termination: StrictBool | None = None
    encrypted: StrictBool | None = None
    iops: StrictInt | None = Field(default=None, ge=100, le=256000)
    kms_key_id: str | None = Field(default=None, alias="kmsKeyID", pattern=_KMS_KEY.pattern)
    snapshot_id: str | None = Field(default=None, alias="snapshotID", pattern=_SNAPSHOT_ID.pattern)
    throughput: StrictInt | None = Field(default=None, ge=125, le=2000)
    volume_initialization_rate: StrictInt | None = Field(default=None, ge=100, le=300)
    volume_size: Annotated[str, AfterValidator(_volume_size)] | None = None
    volume_type: Literal["standard", "io1", "io2", "gp2", "sc1", "st1", "gp3"] | None = None

    @model_validator(mode="after")
    def _size_or_snapshot(self) -> Self:
        if self.snapshot_id is None and self.volume_size is None:
            raise ValueError("snapshotID or volumeSize must be set")
        if self.volume_initialization_rate is not None and self.snapshot_id is None:
            raise ValueError("volumeInitializationRate needs snapshotID")
        return self

    def launch_template_ebs(self) -> dict[str, Any]:
        """EC2's LaunchTemplateEbsBlockDeviceRequest."""
        ebs: dict[str, Any] = {}
        pairs = (
            ("DeleteOnTermination", self.delete_on_termination),
            ("Encrypted", self.encrypted),
            ("Iops", self.iops),
            ("KmsKeyId", self.kms_key_id),
            ("SnapshotId", self.snapshot_id),
            ("Throughput", self.throughput),
            ("VolumeInitializationRate", self.volume_initialization_rate),
            ("VolumeType", self.volume_type),
        )
        ebs.update({key: value for key, value in pairs if value is not None})
        if self.volume_size is not None:
            ebs["VolumeSize"] = volume_gib(self.volume_size)
        return ebs


class BlockDeviceMapping(Document):
    device_name: str | None = Field(default=None, pattern=_DEVICE_NAME.pattern)
    ebs: BlockDevice | None = None
    root_volume: StrictBool | None = None

    def launch_template_mapping(self) -> dict[str, Any]:
        """EC2's LaunchTemplateBlockDeviceMappingRequest."""
        mapping: dict[str, Any] = {}
        if self.device_name is not None:
            mapping["DeviceName"] = self.device_name
        if self.ebs is not None:
            mapping["Ebs"] = self.ebs.launch_template_ebs()
        return mapping


def check_block_device_mappings(
    mappings: list[BlockDeviceMapping] | None,
) -> list[BlockDeviceMapping] | None:
    if mappings is None:
        return None
    if sum(1 for m in mappings if m.root_volume) > 1:
        raise ValueError("at most one mapping may set rootVolume")
    names = [m.device_name for m in mappings if m.device_name]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"must not map {', '.join(repeated)} twice")
    return mappings


class MetadataOptions(Document):
    """The instance metadata service, as a launch template's MetadataOptions."""

    http_endpoint: Literal["enabled", "disabled"] | None = None
    http_protocol_i_pv6: Literal["enabled", "disabled"] | None = Field(
        default=None, alias="httpProtocolIPv6"
    )
    http_put_response_hop_limit: StrictInt | None = Field(default=None, ge=1, le=64)
    http_tokens: Literal["required", "optional"] | None = None
    # Instance tags in the metadata service: disabled unless the document says so (as Karpenter
    # sets it), never the account's default: tag keys with '/' (ours have them) fail launches
    # where it is on.
    instance_metadata_tags: Literal["enabled", "disabled"] | None = None

    def launch_template_options(self) -> dict[str, Any]:
        """EC2's LaunchTemplateInstanceMetadataOptionsRequest; IMDSv2 (tokens required), the
        endpoint enabled and instance tags not in metadata unless the document says otherwise."""
        options: dict[str, Any] = {
            "HttpTokens": self.http_tokens or "required",
            "HttpEndpoint": self.http_endpoint or "enabled",
            "InstanceMetadataTags": self.instance_metadata_tags or "disabled",
        }
        if self.http_protocol_i_pv6 is not None:
            options["HttpProtocolIpv6"] = self.http_protocol_i_pv6
        if self.http_put_response_hop_limit is not None:
            options["HttpPutResponseHopLimit"] = self.http_put_response_hop_limit
        return options
