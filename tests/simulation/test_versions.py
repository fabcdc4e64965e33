"""Issue 26 in the simulation: documents drawn in served versions, applied as the CLI applies
them, and the invariant that the stored hub is the hub meant (tests/simulation/versions.py)."""

from __future__ import annotations

import copy
import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from capacity_launcher.adapters.config_store import ConfigStore
from capacity_launcher.domain.apis.documents import parse_document, to_document
from capacity_launcher.domain.apis.served_versions import REGISTRY
from capacity_launcher.service.configuration import Configuration
from capacity_launcher.startup import system_clock
from tests.simulation.operations import _document, quota_document
from tests.simulation.versions import (
    VersionCounts,
    apply_as_written,
    stored_as_meant,
    version_stream,
    written_as,
)

TABLE = "state"


def _pool(name: str = "pool-0", weight: int | None = 7) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "nodeClassRef": "class-none",
        "requirements": [
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]},
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        ],
        "limits": {"instances": "3"},
    }
    if weight is not None:
        spec["weight"] = weight
    return _document("NodePool", name, spec)


def _class(name: str = "class-none") -> dict[str, Any]:
    return _document(
        "NodeClass",
        name,
        {
            "imageId": "ami-0123456789abcdef0",
            "subnetIds": ["subnet-0123456789abcdef0"],
            "securityGroupIds": ["sg-0123456789abcdef0"],
            "tags": {"team": "ml"},
            "capacityReservationSpec": {"capacityReservationPreference": "none"},
        },
    )


def _labels(seed: int, documents: list[dict[str, Any]]) -> list[str]:
    stream = version_stream(seed)
    return [written_as(document, stream).label for document in documents]


def test_the_seed_decides_every_version_drawn() -> None:
    documents = [_class(), _pool(), quota_document("quota-a")] * 10
    assert _labels(3, documents) == _labels(3, documents)
    assert _labels(3, documents) != _labels(4, documents)


def test_every_version_that_can_say_a_kind_is_drawn() -> None:
    stream = version_stream(1)
    pools = Counter(written_as(_pool(weight=None), stream).label for _ in range(200))
    classes = Counter(written_as(_class(), stream).label for _ in range(200))
    assert set(pools) == {v.label for v in REGISTRY.served_for("NodePool")} - {
        "karpenter.sh/v1alpha4 Provisioner"  # a pool without its provider reads back as nothing
    }
    assert set(classes) == {v.label for v in REGISTRY.served_for("NodeClass")}


def test_a_version_that_cannot_say_the_hub_is_counted_and_another_drawn() -> None:
    counts = VersionCounts()
    stream = version_stream(2)
    for _ in range(40):
        written = written_as(quota_document("quota-a"), stream)
        counts.note(written)
        # OME reservations name no requesters: a quota is always written as the hub
        assert written.label == "capacity-launcher/v1 CapacityQuota"
    assert counts.refused["ome.io/v1beta1 CapacityReservation: convert refused (spec.requesters)"]
    weighted = [written_as(_pool(weight=7), stream) for _ in range(40)]
    assert all(w.label != "karpenter.sh/v1alpha4 Provisioner" for w in weighted)
    assert any(
        ("karpenter.sh/v1alpha4 Provisioner", "convert refused (spec.weight)") in w.refused
        for w in weighted
    )


def test_an_invalid_hub_is_written_as_it_is() -> None:
    invalid = _pool()
    invalid["spec"]["limits"] = {"instances": "-3"}
    written = written_as(invalid, version_stream(1))
    assert written.document is invalid and written.refused == ()


def test_the_invariant_finds_a_stored_hub_that_is_not_the_one_meant() -> None:
    meant = _pool()
    stored = json.dumps(to_document(parse_document(meant)))
    assert stored_as_meant(meant, stored) is None
    lost = copy.deepcopy(meant)
    del lost["spec"]["weight"]
    assert stored_as_meant(meant, json.dumps(lost)) == "differs at spec.weight"
    assert stored_as_meant(meant, None) == "nothing stored"


@pytest.fixture
def store() -> Iterator[tuple[Configuration, Any]]:
    with mock_aws():
        db = boto3.client("dynamodb", region_name="us-east-1")
        db.create_table(
            TableName=TABLE,
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        config = ConfigStore(TABLE, db, clock=system_clock)
        yield Configuration(config, config.priority_classes()), db


@pytest.mark.parametrize("seed", range(6))
def test_every_version_drawn_stores_the_hub_meant(
    store: tuple[Configuration, Any], seed: int
) -> None:
    config, db = store
    stream = version_stream(seed)
    for meant in (_class(), _pool(weight=None), _pool("pool-1"), quota_document("quota-b")):
        written = written_as(meant, stream)
        apply_as_written(config, written.document)
        item = db.get_item(
            TableName=TABLE,
            Key={"pk": {"S": meant["kind"]}, "sk": {"S": meant["metadata"]["name"]}},
        )["Item"]
        assert stored_as_meant(meant, item["document"]["S"]) is None, written.label
