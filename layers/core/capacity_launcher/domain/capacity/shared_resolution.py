"""A NodeClass's selectors resolved once and shared by every launcher container (issue 38).

The sync resolves each NodeClass (its subnets by zone, security groups, images with the facts a
launch reads of them, and the instance types offered in its subnets' zones) and stores the
result; a fresh container reads it in one call instead of a Describe per kind, as Karpenter's
controllers keep an EC2NodeClass's status (subnets, securityGroups, amis) for every reader.

What is shared, and for how long, is decided here:

- a resolution serves only the revision of the class it was made from (`usable`): a class
  applied since is never served an older resolution; its container asks EC2 itself;
- and only while it is younger than `MAX_AGE_SECONDS`, the time a warm container has always
  trusted its own copy of subnets, security groups and images (adapters/subnets.py,
  security_groups.py, image_selection.py: 300 s). A subnet deleted or an image deregistered
  within that window is refused by CreateFleet itself (InvalidSubnetID.NotFound,
  InvalidAMIID.*: a loud failure naming it, never a launch elsewhere), exactly as a warm
  container's copy is today; the sync never shares a resolution EC2 refuses (no subnet, no
  security group, no image, an image EC2 does not know): containers then ask EC2 and are
  refused by it, naming the field;
- the sync writes it again when it is `REFRESH_AFTER_SECONDS` old (`due`), so a sync minute
  missed leaves readers served, and three missed ones send them back to EC2.

Whatever the input (a region's every instance type), each stored item stays far under
DynamoDB's 400 KB: the resolution is one compressed document (`encode`) cut into parts of at
most `PART_BYTES` (`parts`), named by the document's digest, the head naming the digest and the
number of parts (`assemble` checks both).
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from capacity_launcher.domain.capacity.instance_types import InstanceTypeInfo

MAX_AGE_SECONDS = 300.0
REFRESH_AFTER_SECONDS = 120.0
# A resolution stamped this far in a reader's future (clocks apart) is not trusted either.
CLOCK_SKEW_SECONDS = 30.0
# Bytes of the compressed document per part item: with its key and attribute names, an item
# stays under DynamoDB's 400 KB item limit by far.
PART_BYTES = 300_000
# What DynamoDB allows an item, all told (its names and values).
ITEM_LIMIT_BYTES = 400 * 1024


@dataclass(frozen=True)
class SharedImage:
    """One of the class's images (its main one first) and what DescribeImages says of it that a
    launch reads: its architecture, platform details and usage operation."""

    image_id: str
    variant: str | None
    facts: Mapping[str, str | None]


@dataclass(frozen=True)
class Resolution:
    """What a NodeClass's selectors resolved to (no time, no revision: those are the head's)."""

    subnets: Mapping[str, tuple[str, ...]]
    security_groups: tuple[str, ...]
    images: tuple[SharedImage, ...]
    # The types offered in any of the subnets' zones, each with its zones among them.
    instance_types: tuple[InstanceTypeInfo, ...]
    # Every type name EC2 knows in the region: a pinned name outside it is a typo, for EC2 to
    # name (the container asks it), one inside but not offered here is simply not offered.
    known_types: frozenset[str] = field(default_factory=frozenset)
    # (instance type, zone) of every open reservation of the account, active or upcoming, as
    # the sync last listed them (`open_offerings`); None when it could not say.
    open_reservations: frozenset[tuple[str, str]] | None = None

    def offered(
        self, zones: Iterable[str], names: Iterable[str] | None
    ) -> list[InstanceTypeInfo] | None:
        """The types offered in any of `zones` (only `names` when given), each with its zones
        among them, sorted by name, as the catalog answers; None when this resolution cannot
        say: a zone outside its subnets', or a name EC2 may not know."""
        asked = frozenset(zones)
        if not asked <= frozenset(self.subnets):
            return None
        wanted = set(names) if names is not None else None
        if not wanted:
            wanted = None  # none pinned: every type offered
        elif not wanted <= self.known_types:
            return None
        found = []
        for info in self.instance_types:
            if wanted is not None and info.name not in wanted:
                continue
            where = info.zones & asked
            if where:
                found.append(info.in_zones(where))
        return sorted(found, key=lambda i: i.name)

    def image(self, image_id: str) -> SharedImage | None:
        return next((i for i in self.images if i.image_id == image_id), None)


@dataclass(frozen=True)
class Head:
    """The stored head of a class's resolution: the class revision it was made from, when
    (epoch seconds, the sync's clock), and the parts that hold it."""

    node_class: str
    revision: str
    resolved_at: float
    digest: str
    parts: int
    # `open_digest` of the summary of open reservations the document carries (None: a head
    # written before it carried one).
    open: str | None = None


def usable(head: Head, revision: str, now: float) -> bool:
    """Whether a container may launch with this resolution: made from the class as it has it,
    and young enough (MAX_AGE_SECONDS)."""
    age = now - head.resolved_at
    return head.revision == revision and -CLOCK_SKEW_SECONDS <= age < MAX_AGE_SECONDS


def due(
    head: Head | None,
    revision: str,
    now: float,
    open_reservations: frozenset[tuple[str, str]] | None = None,
) -> bool:
    """Whether the sync resolves the class again now: none stored, another revision, another
    summary of the account's open reservations, or REFRESH_AFTER_SECONDS old."""
    if head is None or head.revision != revision:
        return True
    if head.open != open_digest(open_reservations):
        return True
    return not 0 <= now - head.resolved_at < REFRESH_AFTER_SECONDS


def encode(resolution: Resolution) -> bytes:
    """The resolution as one compressed document (deterministic: equal resolutions, equal
    bytes, so an unchanged one keeps its digest and its parts are not written again)."""
    document = {
        "subnets": {zone: list(ids) for zone, ids in sorted(resolution.subnets.items())},
        "securityGroups": sorted(resolution.security_groups),
        "images": [
            {"id": i.image_id, "variant": i.variant, "facts": dict(sorted(i.facts.items()))}
            for i in resolution.images
        ],
        "types": [_type_row(t) for t in sorted(resolution.instance_types, key=lambda t: t.name)],
        "known": sorted(resolution.known_types),
        "open": (
            None
            if resolution.open_reservations is None
            else sorted([t, z] for t, z in resolution.open_reservations)
        ),
    }
    text = json.dumps(document, separators=(",", ":"), sort_keys=True)
    return zlib.compress(text.encode(), 9)


def decode(data: bytes) -> Resolution:
    """`encode`'s document back; ValueError (or KeyError, TypeError) when it is not one."""
    document: dict[str, Any] = json.loads(zlib.decompress(data))
    return Resolution(
        subnets={zone: tuple(ids) for zone, ids in document["subnets"].items()},
        security_groups=tuple(document["securityGroups"]),
        images=tuple(
            SharedImage(i["id"], i["variant"], dict(i["facts"])) for i in document["images"]
        ),
        instance_types=tuple(_type_of(row) for row in document["types"]),
        known_types=frozenset(document["known"]),
        # A document written before the summary: unknown (the launcher asks EC2).
        open_reservations=(
            None
            if document.get("open") is None
            else frozenset((str(t), str(z)) for t, z in document["open"])
        ),
    )


def open_digest(open_reservations: frozenset[tuple[str, str]] | None) -> str:
    """A short digest of a summary of open reservations ("none" when unknown)."""
    if open_reservations is None:
        return "none"
    text = json.dumps(sorted(open_reservations), separators=(",", ":"))
    return digest(text.encode())


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:24]


def parts(data: bytes, size: int = PART_BYTES) -> list[bytes]:
    """`data` cut into parts of at most `size` bytes (one, empty, for no data)."""
    return [data[i : i + size] for i in range(0, len(data), size)] or [b""]


def assemble(head: Head, found: Mapping[int, bytes]) -> Resolution | None:
    """The resolution from its parts as read (index -> bytes); None when one is missing or they
    are not the document the head names (a write under way, or torn): the reader asks EC2."""
    if any(i not in found for i in range(head.parts)):
        return None
    data = b"".join(found[i] for i in range(head.parts))
    if digest(data) != head.digest:
        return None
    try:
        return decode(data)
    except (ValueError, KeyError, TypeError, zlib.error):
        return None


def _type_row(info: InstanceTypeInfo) -> list[Any]:
    return [
        info.name,
        list(info.architectures),
        info.vcpu,
        info.memory_mib,
        info.gpu_count,
        info.gpu_name,
        info.gpu_manufacturer,
        sorted(info.zones),
        info.local_nvme_gb,
        info.accelerator_count,
        info.accelerator_name,
        info.accelerator_manufacturer,
    ]


def _type_of(row: Sequence[Any]) -> InstanceTypeInfo:
    (name, arch, vcpu, memory, gpus, gpu_name, gpu_maker, zones, nvme, acc, acc_name, acc_maker) = (
        row
    )
    return InstanceTypeInfo(
        name=name,
        architectures=tuple(arch),
        vcpu=vcpu,
        memory_mib=memory,
        gpu_count=gpus,
        gpu_name=gpu_name,
        gpu_manufacturer=gpu_maker,
        zones=frozenset(zones),
        local_nvme_gb=nvme,
        accelerator_count=acc,
        accelerator_name=acc_name,
        accelerator_manufacturer=acc_maker,
    )
