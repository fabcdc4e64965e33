"""The stage every benchmark shares: an in-process cloud (moto + moto_capacity + the template's
resources), quiet logs, and a NodeClass/NodePool over a few instance types and zones."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from capacity_launcher.observability import logger
from tests.support.cloud import (
    Cloud,
    an_image,
    capacity_type,
    default_security_group,
    default_subnets,
    instance_type,
    local_cloud,
    node_class,
    node_pool,
)

REGION = "us-east-1"
ZONES = ("us-east-1a", "us-east-1b")
TYPES = ("m5.large", "c5.large", "m5.xlarge", "c5.xlarge")
POOL = "bench"


@contextmanager
def bench_cloud(**environment: str) -> Iterator[Cloud]:
    """A fresh cloud (its own moto state), with the launcher's logs silenced."""
    patch = pytest.MonkeyPatch()
    logger.setLevel(logging.ERROR)
    for name, value in environment.items():
        patch.setenv(name, value)
    try:
        with local_cloud(patch) as cloud:
            yield cloud
    finally:
        patch.undo()


def apply_pool(
    cloud: Cloud,
    *,
    capacity_types: tuple[str, ...] = ("on-demand",),
    types: tuple[str, ...] = TYPES,
    selector_tags: dict[str, str] | None = None,
) -> dict[str, str]:
    """One NodeClass over both zones and one NodePool; returns zone → subnet."""
    subnets = {z: s for z, s in default_subnets(cloud.ec2).items() if z in ZONES}
    spec: dict[str, Any] = {"securityGroupIds": [default_security_group(cloud.ec2)]}
    if selector_tags:
        spec["capacityReservationSelectorTerms"] = [{"tags": selector_tags}]
    cloud.apply(
        node_class("bench-class", list(subnets.values()), an_image(cloud.ec2), **spec),
        node_pool(
            POOL,
            "bench-class",
            requirements=[capacity_type(*capacity_types), instance_type(*types)],
        ),
    )
    return subnets


def request(request_id: str, count: int = 1) -> dict[str, Any]:
    return {"requestId": request_id, "nodePool": POOL, "count": count}
