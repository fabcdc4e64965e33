"""Fixtures for the launcher's integration tests: a fresh in-process cloud per test, and
botocore's retries without their waits (a test that throttles a call sees every retry, not the
seconds of back-off between them: tests/support/retries.py)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from capacity_launcher.adapters import aws
from tests.support.cloud import Cloud, an_image, default_subnets, local_cloud
from tests.support.retries import retries_without_sleeping


@pytest.fixture(autouse=True)
def _retries_without_sleeping() -> Iterator[None]:
    """botocore retries every faulted call as configured; only its back-off is not slept."""
    with retries_without_sleeping():
        yield


@pytest.fixture
def cloud(monkeypatch: pytest.MonkeyPatch) -> Iterator[Cloud]:
    with local_cloud(monkeypatch) as c:
        yield c


@pytest.fixture
def subnets(cloud: Cloud) -> dict[str, str]:
    return default_subnets(cloud.ec2)


@pytest.fixture
def image(cloud: Cloud) -> str:
    return an_image(cloud.ec2)


@pytest.fixture
def ec2_calls(cloud: Cloud) -> Counter[str]:
    """Counts every EC2 API call the service makes (by operation name)."""
    calls: Counter[str] = Counter()

    def count(model: Any, **_: Any) -> None:
        calls[model.name] += 1

    aws.client("ec2").meta.events.register("before-call.ec2", lambda **kw: count(kw["model"]))
    return calls


@pytest.fixture
def fleet_inputs(cloud: Cloud) -> list[dict[str, Any]]:
    """Every CreateFleet input the service sends."""
    seen: list[dict[str, Any]] = []

    def record(params: dict[str, Any], **_: object) -> None:
        seen.append(params)

    aws.client("ec2").meta.events.register(
        "provide-client-params.ec2.CreateFleet", lambda params, **kw: record(params)
    )
    return seen


@pytest.fixture
def karpenter_cloud() -> Iterator[Cloud]:
    """The local cloud with what Karpenter's examples expect (discovery-tagged network, the
    aliases' public parameters)."""
    with local_cloud(None, example_network=True) as cloud:
        yield cloud
