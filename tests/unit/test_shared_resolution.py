"""A NodeClass's resolution shared by every launcher container (issue 38): which stored one a
container may use (its class's revision, younger than the bound), when the sync resolves again,
and every stored item within DynamoDB's 400 KB whatever the region's instance types."""

from __future__ import annotations

import random
import string
from dataclasses import replace

import pytest

from capacity_launcher.domain.capacity.instance_types import InstanceTypeInfo
from capacity_launcher.domain.capacity.shared_resolution import (
    ITEM_LIMIT_BYTES,
    MAX_AGE_SECONDS,
    PART_BYTES,
    REFRESH_AFTER_SECONDS,
    Head,
    Resolution,
    SharedImage,
    assemble,
    decode,
    digest,
    due,
    encode,
    open_digest,
    parts,
    usable,
)

NOW = 1_800_000_000.0
ZONES = ("us-east-1a", "us-east-1b")


def _type(name: str, zones: tuple[str, ...] = ZONES, **facts: object) -> InstanceTypeInfo:
    return InstanceTypeInfo(
        name=name,
        architectures=("amd64",),
        vcpu=2,
        memory_mib=8192,
        zones=frozenset(zones),
        **facts,  # type: ignore[arg-type]
    )


def _resolution(types: tuple[InstanceTypeInfo, ...] = (), known: frozenset[str] = frozenset()):
    return Resolution(
        subnets={"us-east-1a": ("subnet-a",), "us-east-1b": ("subnet-b",)},
        security_groups=("sg-1",),
        images=(SharedImage("ami-1", None, {"Architecture": "x86_64", "PlatformDetails": None}),),
        instance_types=types,
        known_types=known or frozenset(t.name for t in types),
    )


def _head(
    revision: str = "r1",
    resolved_at: float = NOW,
    open_reservations: frozenset[tuple[str, str]] | None = None,
) -> Head:
    return Head("standard", revision, resolved_at, "d", 1, open_digest(open_reservations))


def test_a_resolution_serves_only_its_class_revision() -> None:
    assert usable(_head("r1"), "r1", NOW + 1)
    # A class applied since is never served the resolution of the class before.
    assert not usable(_head("r1"), "r2", NOW + 1)


def test_a_resolution_serves_until_its_bound_and_not_from_the_future() -> None:
    assert usable(_head(), "r1", NOW + MAX_AGE_SECONDS - 1)
    assert not usable(_head(), "r1", NOW + MAX_AGE_SECONDS)
    assert not usable(_head(resolved_at=NOW + 3600), "r1", NOW)


def test_the_sync_resolves_again_when_missing_changed_or_old() -> None:
    assert due(None, "r1", NOW)
    assert due(_head("r1"), "r2", NOW)
    assert not due(_head("r1"), "r1", NOW + REFRESH_AFTER_SECONDS - 1)
    assert due(_head("r1"), "r1", NOW + REFRESH_AFTER_SECONDS)
    # Refreshed well before readers stop trusting it: a missed sync minute leaves them served.
    assert REFRESH_AFTER_SECONDS + 60 < MAX_AGE_SECONDS


def test_the_sync_resolves_again_when_the_account_s_open_reservations_changed() -> None:
    m5a = frozenset({("m5.large", "us-east-1a")})
    # Written only when the summary changes: the same one keeps the class until it is old.
    assert not due(_head(open_reservations=m5a), "r1", NOW + 1, m5a)
    assert due(_head(open_reservations=m5a), "r1", NOW + 1, m5a | {("c5.large", "us-east-1b")})
    assert due(_head(open_reservations=m5a), "r1", NOW + 1, frozenset())
    # The list not read this minute: stored as unknown (launchers ask EC2), not kept as known.
    assert due(_head(open_reservations=m5a), "r1", NOW + 1, None)
    # A head written before the summary was carried is written again with it.
    before = Head("standard", "r1", NOW, "d", 1)
    assert due(before, "r1", NOW + 1, frozenset())


def test_the_open_reservations_round_trip_and_a_document_without_them_says_unknown() -> None:
    summary = frozenset({("m5.large", "us-east-1a"), ("c5.large", "us-east-1b")})
    resolution = replace(_resolution((_type("m5.large"),)), open_reservations=summary)
    assert decode(encode(resolution)).open_reservations == summary
    assert decode(encode(replace(resolution, open_reservations=frozenset()))).open_reservations == (
        frozenset()
    )
    # A document written before the summary: unknown, never "none open".
    assert decode(encode(_resolution())).open_reservations is None


def test_the_document_round_trips_and_is_deterministic() -> None:
    gpu = _type("p3.2xlarge", ("us-east-1a",), gpu_count=1, gpu_name="V100", local_nvme_gb=None)
    resolution = _resolution((_type("m5.large"), gpu))
    data = encode(resolution)
    assert encode(resolution) == data
    back = decode(data)
    assert back == resolution
    assert back.instance_types[1].gpu_name == "V100"


def test_offered_answers_as_the_catalog_does() -> None:
    resolution = _resolution(
        (_type("m5.large"), _type("c5.large", ("us-east-1b",))),
        frozenset({"m5.large", "c5.large", "r5.large"}),
    )
    found = resolution.offered(("us-east-1a",), None)
    assert found is not None
    assert [(t.name, sorted(t.zones)) for t in found] == [("m5.large", ["us-east-1a"])]
    pinned = resolution.offered(ZONES, ("c5.large", "r5.large"))
    assert pinned is not None
    assert [t.name for t in pinned] == ["c5.large"]  # r5.large is known, not offered here
    # An empty pin is no pin, as the catalog reads it.
    assert len(resolution.offered(ZONES, ()) or []) == 2


def test_offered_cannot_say_for_an_unknown_name_or_another_zone() -> None:
    resolution = _resolution((_type("m5.large"),))
    # A name EC2 may not know is EC2's to name (UnknownRequirementValues), not "not offered".
    assert resolution.offered(ZONES, ("m5.lrage",)) is None
    assert resolution.offered(("us-east-1c",), None) is None


def test_every_item_stays_within_dynamodb_s_limit_whatever_the_region() -> None:
    # Ten thousand instance types with long, incompressible names: far beyond any region.
    rng = random.Random(7)
    names = {
        "".join(rng.choices(string.ascii_lowercase + string.digits, k=60)) for _ in range(10_000)
    }
    types = tuple(
        _type(n, gpu_name="".join(rng.choices(string.ascii_letters, k=40))) for n in sorted(names)
    )
    data = encode(_resolution(types))
    cut = parts(data)
    assert len(data) > PART_BYTES  # the bound is exercised: more than one part
    assert len(cut) > 1
    # Each part item: its bytes plus its key and attribute names.
    overhead = len("pk") + len("Resolution#") + 253 + len("sk") + len("Part#") + 24 + 10 + 4
    assert all(len(p) + overhead < ITEM_LIMIT_BYTES for p in cut)
    head = Head("standard", "r1", NOW, digest(data), len(cut))
    assert assemble(head, dict(enumerate(cut))) == _resolution(types)


def test_assemble_refuses_missing_or_foreign_parts() -> None:
    data = encode(_resolution((_type("m5.large"),)))
    cut = parts(data, 50)
    head = Head("standard", "r1", NOW, digest(data), len(cut))
    assert assemble(head, dict(enumerate(cut))) is not None
    assert assemble(head, dict(enumerate(cut[:-1]))) is None
    swapped = dict(enumerate(cut))
    swapped[0] = b"x" * len(cut[0])
    assert assemble(head, swapped) is None


@pytest.mark.parametrize("size", [1, 7, PART_BYTES])
def test_parts_join_back(size: int) -> None:
    data = bytes(range(256)) * 40
    assert b"".join(parts(data, size)) == data
    assert all(len(p) <= size for p in parts(data, size))
