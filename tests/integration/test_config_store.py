"""The config store as workers see it: a cache never turns a miss into a rejection, a stored
document that no longer parses affects only itself, and deleting a class cannot race an apply."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import Any

import pytest

from capacity_launcher.adapters import aws
from capacity_launcher.adapters.config_store import ConfigStore
from capacity_launcher.domain.apis.documents import parse_document
from capacity_launcher.domain.errors import ConfigConflict
from capacity_launcher.domain.records.status import RequestStatus
from capacity_launcher.service.configuration import Configuration
from capacity_launcher.service.pool_listing import every
from capacity_launcher.settings import Settings, get_settings
from capacity_launcher.startup import system_clock
from capacity_launcher_cli.config_commands import get_config
from tests.integration.test_launch_into_reservations import ZONE, setup_pool
from tests.support.cloud import (
    Cloud,
    capacity_type,
    default_security_group,
    instance_type,
    launch_request,
    node_class,
    node_pool,
)


def _pool(name: str, *types: str) -> dict[str, Any]:
    return node_pool(
        name, "standard", requirements=[capacity_type("on-demand"), instance_type(*types)]
    )


def test_a_pool_applied_after_the_cache_was_filled_is_found(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given a warm launcher whose copy of the pools was filled a moment ago
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    assert cloud.send(launch_request("warm-1", nodePool="general")) == []
    # When a new class and a pool naming it are applied, and a request names the pool at once
    late_class = node_class("late", [subnets[ZONE]], image)
    late_class["spec"]["securityGroupIds"] = [default_security_group(cloud.ec2)]
    fresh_pool = _pool("fresh", "m5.large")
    fresh_pool["spec"]["nodeClassRef"] = "late"
    cloud.apply(late_class, fresh_pool)
    cloud.send(launch_request("fresh-1", nodePool="fresh"))
    # Then the request is served, not Rejected as unknown
    record = cloud.record("fresh-1")
    assert record is not None and record.status is RequestStatus.FULFILLED, record


def test_a_stale_cache_never_decides_that_no_pool_fits(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given a warm launcher that knows only a pool for m5.large
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    assert cloud.send(launch_request("warm-2", nodePool="general")) == []
    # When a pool for c5.large is applied and a request asks for c5.large without naming a pool
    cloud.apply(_pool("compute", "c5.large"))
    cloud.send(launch_request("pick-1", requirements=[instance_type("c5.large")]))
    # Then the new pool is chosen
    record = cloud.record("pick-1")
    assert record is not None and record.status is RequestStatus.FULFILLED, record
    assert record.node_pool == "compute"


def _store_raw(cloud: Cloud, kind: str, name: str, document: dict[str, Any]) -> None:
    """A document as an older release (or a hand edit) left it: not valid for today's model."""
    aws.client("dynamodb").put_item(
        TableName=cloud.names.state_table,
        Item={
            "pk": {"S": kind},
            "sk": {"S": name},
            "document": {"S": json.dumps(document)},
        },
    )


@dataclass
class _Deployment:
    state_table: str
    limit_lease_seconds: int = 900

    def client(self, service: str) -> Any:
        return aws.client(service)

    def settings(self) -> Settings:
        return get_settings()


def test_a_stored_pool_that_no_longer_parses_affects_only_itself(
    cloud: Cloud, subnets: dict[str, str], image: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a valid pool, and a stored pool whose weight today's model refuses
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    broken = _pool("broken", "m5.large")
    broken["spec"]["weight"] = 5000
    _store_raw(cloud, "NodePool", "broken", broken)
    # When requests name each of them, and one names no pool
    handed_back = cloud.send(
        launch_request("good-1", nodePool="general"),
        launch_request("bad-1", nodePool="broken"),
        launch_request("any-1"),
    )
    # Then nothing goes back to the queue: the good ones are served...
    assert handed_back == []
    for request_id in ("good-1", "any-1"):
        record = cloud.record(request_id)
        assert record is not None and record.status is RequestStatus.FULFILLED, record
    # ...and the one naming the broken pool is rejected with a reason naming it
    bad = cloud.record("bad-1")
    assert bad is not None and bad.status is RequestStatus.REJECTED
    assert [e.code for e in bad.errors] == ["InvalidNodePool"]
    assert "'broken'" in bad.errors[0].message and "weight" in bad.errors[0].message
    # And `get nodepools` lists the good pool and reports the broken one as invalid
    args = argparse.Namespace(resource="nodepools", output="json", names=[])
    assert get_config(args, _Deployment(cloud.names.state_table)) == 0  # type: ignore[arg-type]
    out = capsys.readouterr().out  # the service's JSON log lines come first, then the listing
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line == "{")  # the List, indented
    listed = json.loads("\n".join(lines[start:]))["items"]
    assert [p["metadata"]["name"] for p in listed] == ["general", "broken"]
    assert "weight" in listed[1]["status"]["invalid"]


def test_a_stored_class_that_no_longer_parses_rejects_only_its_pools(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    cloud.apply(
        node_class("other", [subnets[ZONE]], image),
        node_pool("other", "other", requirements=[capacity_type("on-demand")]),
    )
    _store_raw(cloud, "NodeClass", "other", {"kind": "NodeClass", "metadata": {"name": "other"}})

    cloud.send(
        launch_request("good-2", nodePool="general"), launch_request("bad-2", nodePool="other")
    )

    good, bad = cloud.record("good-2"), cloud.record("bad-2")
    assert good is not None and good.status is RequestStatus.FULFILLED
    assert bad is not None and bad.status is RequestStatus.REJECTED
    assert [e.code for e in bad.errors] == ["InvalidNodeClass"]
    store = ConfigStore(cloud.names.state_table, aws.client("dynamodb"), clock=system_clock)
    assert [c.metadata.name for c in store.node_classes()] == ["standard"]
    assert [(d.kind, d.name) for d in store.invalid()] == [("NodeClass", "other")]


def test_deleting_a_class_cannot_race_an_apply_that_references_it(cloud: Cloud) -> None:
    # Given a class no pool uses yet
    store = ConfigStore(cloud.names.state_table, aws.client("dynamodb"), clock=system_clock)
    cloud.apply(node_class("shared", ["subnet-0123456789abcdef0"], "ami-0123456789abcdef0"))
    db = aws.client("dynamodb")
    raced: list[str] = []

    def apply_first(**_: Any) -> None:
        # Another operator's apply lands between the delete's check and its write.
        if not raced:
            raced.append("pool")
            store.apply(parse_document(node_pool("late", "shared")))

    db.meta.events.register("before-call.dynamodb.TransactWriteItems", apply_first)
    # When the class is deleted while the pool naming it is applied
    with pytest.raises(ConfigConflict, match="late"):
        _configuration(store).delete("NodeClass", "shared")
    # Then the class is still there for the pool that names it
    assert raced == ["pool"]
    assert store.node_class("shared").metadata.name == "shared"
    assert store.node_pool("late").spec.node_class_ref == "shared"


def _quota(name: str, requesters: list[str], pool: str = "training") -> Any:
    return parse_document(
        {
            "apiVersion": "capacity-launcher/v1",
            "kind": "CapacityQuota",
            "metadata": {"name": name},
            "spec": {
                "requesters": requesters,
                "cohort": "research",
                "resourceGroups": [
                    {
                        "coveredResources": ["nvidia.com/gpu", "memory"],
                        "flavors": [
                            {
                                "name": pool,
                                "resources": [
                                    {"name": "nvidia.com/gpu", "nominalQuota": "32"},
                                    {"name": "memory", "nominalQuota": "8Ti"},
                                ],
                            }
                        ],
                    }
                ],
            },
        }
    )


def test_quotas_are_stored_read_back_and_deleted_like_the_other_kinds(cloud: Cloud) -> None:
    store = ConfigStore(cloud.names.state_table, aws.client("dynamodb"), clock=system_clock)
    configuration = _configuration(store)
    team_a = _quota("team-a", ["team-a"])

    configuration.apply(team_a)
    configuration.apply(_quota("team-b", ["team-b"]))

    assert store.capacity_quota("team-a") == team_a
    assert [q.name for q in store.capacity_quotas()] == ["team-a", "team-b"]
    # Re-applying the same quota is not a conflict with itself
    configuration.apply(team_a)
    configuration.delete("CapacityQuota", "team-b")
    assert [q.name for q in store.capacity_quotas(fresh=True)] == ["team-a"]
    _store_raw(cloud, "CapacityQuota", "old", {"kind": "CapacityQuota"})
    assert [(d.kind, d.name) for d in store.invalid()] == [("CapacityQuota", "old")]


def test_a_requester_already_covered_in_a_pool_is_refused_naming_both_quotas(
    cloud: Cloud,
) -> None:
    store = ConfigStore(cloud.names.state_table, aws.client("dynamodb"), clock=system_clock)
    configuration = _configuration(store)
    configuration.apply(_quota("team-a", ["team-a", "shared"]))

    with pytest.raises(ConfigConflict, match="'shared' is already covered in flavor training"):
        configuration.apply(_quota("team-b", ["team-b", "shared"]))

    # In another pool the same requester may have another quota
    configuration.apply(_quota("team-b", ["team-b", "shared"], pool="batch"))
    assert [q.name for q in store.capacity_quotas(fresh=True)] == ["team-a", "team-b"]


def test_two_applies_that_conflict_only_together_cannot_both_succeed(cloud: Cloud) -> None:
    # Given an apply whose check has passed when another operator's quota lands first
    store = ConfigStore(cloud.names.state_table, aws.client("dynamodb"), clock=system_clock)
    db = aws.client("dynamodb")
    raced: list[str] = []

    def apply_first(**_: Any) -> None:
        if not raced:
            raced.append("team-b")
            other = ConfigStore(cloud.names.state_table, db, clock=system_clock)
            _configuration(other).apply(_quota("team-b", ["shared"]))

    db.meta.events.register("before-call.dynamodb.TransactWriteItems", apply_first)
    # When both cover the same requester in the same pool
    with pytest.raises(ConfigConflict, match="'shared'"):
        _configuration(store).apply(_quota("team-a", ["shared"]))
    # Then only the first is stored
    assert raced == ["team-b"]
    assert [q.name for q in store.capacity_quotas(fresh=True)] == ["team-b"]


def _configuration(store: ConfigStore) -> Configuration:
    """The configuration use cases over `store`: what an operator's apply and delete go
    through (the checks across documents)."""
    return Configuration(store, store.priority_classes())


def test_a_pool_set_past_its_ttl_is_read_again_only_when_the_pools_changed(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    """A warm container's copy of the NodePools, past its TTL, costs one GetItem of their
    generation while nothing was applied or deleted, not the whole partition (issue 38: the
    cost of a request naming no pool against the number of pools); a change is seen at once."""
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    cloud.apply(*(_pool(f"other-{n}", "m5.large") for n in range(5)))
    settings = get_settings()
    # cache_seconds=0: every read is past its TTL, as a warm container's next look would be
    store = ConfigStore(settings.state_table_name, aws.client("dynamodb"), 0, clock=system_clock)
    calls: list[str] = []
    aws.client("dynamodb").meta.events.register(
        "before-call.dynamodb", lambda model, **_: calls.append(model.name)
    )
    first = store.pool_set()
    assert len(every(first)) == 6 and calls.count("Query") == 1
    calls.clear()
    # When it is read again with nothing changed: the generation only
    again = store.pool_set()
    assert calls == ["GetItem"]
    assert again == first
    # When another writer (the CLI) applies a pool, the next read sees it
    cloud.apply(_pool("late", "m5.large"))
    calls.clear()
    changed = store.pool_set()
    assert calls == ["GetItem", "Query"]
    assert {p.metadata.name for p in every(changed)} == {p.metadata.name for p in every(first)} | {
        "late"
    }
    assert changed.generation > first.generation
    # And a delete is seen too
    cloud.adapters().config_store().delete_pool("late")
    assert "late" not in {p.metadata.name for p in every(store.pool_set())}


def test_the_pools_are_listed_again_only_when_their_generation_moved(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given a reader of every NodePool that keeps its listing (the sync's parts list them each
    # minute)
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    reader = ConfigStore(get_settings().state_table_name, clock=system_clock, keep_pools=True)
    listed: list[str] = []

    def note(params: dict[str, Any], **_: Any) -> None:
        if params.get("ExpressionAttributeValues", {}).get(":kind") == {"S": "NodePool"}:
            listed.append("NodePool")

    aws.client("dynamodb").meta.events.register(
        "provide-client-params.dynamodb.Query", lambda params, **kw: note(params)
    )

    def names() -> list[str]:
        return sorted(p.metadata.name for p in reader.node_pools())

    assert names() == ["general"]
    # When nothing changed, the partition is not listed again (issue 38: the generation says so)
    assert names() == ["general"]
    assert len(listed) == 1
    # When another writer applies a pool, or deletes one, the next read lists them again
    cloud.apply(_pool("second", "m5.large"))
    assert names() == ["general", "second"]
    cloud.delete("NodePool", "general")
    assert names() == ["second"]
    assert len(listed) == 3
