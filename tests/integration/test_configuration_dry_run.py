"""The configuration use case's no-write mode (`Configuration.check`: `apply --dry-run=server`
and `diff`): it refuses what `apply` refuses, with the same error, answers what apply would wait
for (references not applied yet: docs/karpenter.md, "Applied in any order"), and writes
nothing."""

from __future__ import annotations

from typing import Any

import pytest

from capacity_launcher.adapters import aws
from capacity_launcher.adapters.config_store import ConfigStore
from capacity_launcher.domain.apis.documents import parse_document
from capacity_launcher.domain.apis.priority_classes import parse_priority_class
from capacity_launcher.domain.errors import CapacityLauncherError
from capacity_launcher.service.configuration import Configuration
from capacity_launcher.startup import system_clock
from tests.integration.test_config_store import _quota
from tests.support.cloud import Cloud, node_class, node_pool


def _configuration(cloud: Cloud) -> Configuration:
    store = ConfigStore(cloud.names.state_table, aws.client("dynamodb"), clock=system_clock)
    return Configuration(store, store.priority_classes())


def _items(cloud: Cloud) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = aws.client("dynamodb").scan(TableName=cloud.names.state_table)[
        "Items"
    ]
    return sorted(found, key=lambda i: (i["pk"]["S"], i["sk"]["S"]))


def _priority_class(name: str, value: int, global_default: bool = False) -> Any:
    return parse_priority_class(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
            "globalDefault": global_default,
        }
    )


def _refusal(configuration: Configuration, document: Any, dry_run: bool) -> str:
    act = configuration.check if dry_run else configuration.apply
    with pytest.raises(CapacityLauncherError) as refused:
        act(document)
    return str(refused.value)


def test_check_refuses_what_apply_refuses_with_the_same_error_and_writes_nothing(
    cloud: Cloud,
) -> None:
    # Given stored documents: a quota, a PriorityClass that is the global default
    configuration = _configuration(cloud)
    configuration.apply(_quota("team-a", ["team-a", "shared"]))
    configuration.apply(_priority_class("high", 1000, global_default=True))
    before = _items(cloud)
    refused = [
        _quota("team-b", ["team-b", "shared"]),  # covers a requester team-a covers
        _priority_class("high", 2000),  # changes a class's value
        _priority_class("other", 10, global_default=True),  # a second global default
    ]

    for document in refused:
        # When each is checked, then applied
        checked = _refusal(configuration, document, dry_run=True)
        # Then the check wrote nothing, and said what the apply says
        assert _items(cloud) == before, document
        assert checked == _refusal(configuration, document, dry_run=False)


def test_check_passes_what_apply_stores_and_writes_nothing(cloud: Cloud) -> None:
    configuration = _configuration(cloud)
    before = _items(cloud)
    new_class = parse_document(node_class("fresh", ["subnet-0123456789abcdef0"], "ami-0123"))
    pool = parse_document(node_pool("fresh", "fresh"))

    # a pool naming a class applied before it in the same apply waits for nothing
    assert configuration.check(new_class) == []
    assert configuration.check(pool, applied_with=[new_class]) == []
    configuration.check(_quota("team-c", ["team-c"]))
    configuration.check(_priority_class("low", 1))
    # a pool naming a class nowhere is applied all the same, waiting for it, as apply says
    orphan = parse_document(node_pool("orphan", "no-such-class"))
    (waiting,) = configuration.check(orphan)
    assert waiting.field == "spec.nodeClassRef" and "no-such-class" in waiting.rule

    assert _items(cloud) == before
