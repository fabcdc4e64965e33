"""A NodePool or NodeClass applied just before a request governs it, on a warm launcher whose copy
of the configuration is younger than its cache lifetime (CI found Karpenter's instance-store
example, re-applied as `default`, served under the previous `default`'s requirements). The lease
conditions on the revisions of the pool and class the request was resolved with; a request
resolved on an older copy is resolved again on the stored documents."""

from __future__ import annotations

import hashlib
import json
import time
from decimal import Decimal
from typing import Any

import pytest

import moto_capacity
from capacity_launcher.adapters import aws
from capacity_launcher.adapters.config_store import ConfigStore
from capacity_launcher.adapters.launch_records import LaunchRecords
from capacity_launcher.adapters.pool_leases import PoolLeaseStore
from capacity_launcher.adapters.pool_usage_store import PoolUsageStore
from capacity_launcher.domain.accounting.quota_leases import LeaseAsk
from capacity_launcher.domain.apis.documents import Revisions, parse_document
from capacity_launcher.domain.errors import NodePoolChanged
from capacity_launcher.domain.quantities import Resources
from capacity_launcher.domain.records.status import RequestStatus
from capacity_launcher.settings import get_settings
from local_cloud.documents import capacity_quota
from tests.integration.test_launch_into_reservations import (
    ZONE,
    expire_idempotency_claims,
    setup_pool,
)
from tests.support.cloud import Cloud, capacity_type, instance_type, launch_request, node_pool
from tests.support.leases import take


def warm(cloud: Cloud, subnets: dict[str, str], image: str) -> None:
    """`general` allows m5.large only, and the launcher has just served it (its copy of the pool
    and class is loaded: its cache lives 10 s, and every step below happens within it)."""
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), types=("m5.large",))
    cloud.send(launch_request("warm", nodePool="general"))
    record = cloud.record("warm")
    assert record is not None and record.status is RequestStatus.FULFILLED, record


def test_requirements_applied_just_before_a_request_govern_it(cloud, subnets, image):
    # Given a warm launcher whose copy of `general` allows m5.large only
    warm(cloud, subnets, image)
    # When `general` is applied again allowing c5.large only, and a request for it comes at once
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), types=("c5.large",))
    cloud.send(launch_request("after-apply", nodePool="general"))
    # Then it launches a c5.large, as the stored pool says (it launched an m5.large)
    record = cloud.record("after-apply")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    assert [i.instance_type for i in record.instances] == ["c5.large"], record.to_detail()


def test_a_node_class_applied_just_before_a_request_governs_it(cloud, subnets, image):
    # Given a warm launcher whose copy of `standard` launches into subnets of one zone
    warm(cloud, subnets, image)
    # When `standard` is applied again with another zone's subnet only, and a request comes
    zone = sorted(subnets)[-1]
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), zones=(zone,))
    cloud.send(launch_request("after-class", nodePool="general"))
    # Then it launches in the stored class's zone
    record = cloud.record("after-class")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    assert [i.zone for i in record.instances] == [zone], record.to_detail()


def test_a_request_the_applied_pool_no_longer_allows_is_rejected_on_it(cloud, subnets, image):
    # Given a warm launcher whose copy of `general` allows m5.large
    warm(cloud, subnets, image)
    # When `general` is applied again without m5.large, and a request for an m5.large comes
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), types=("c5.large",))
    cloud.send(launch_request("gone", nodePool="general", requirements=[instance_type("m5.large")]))
    # Then it is rejected on the stored pool's requirements, and nothing more is launched
    record = cloud.record("gone")
    assert record is not None and record.status is RequestStatus.REJECTED, record.to_detail()
    assert [e.code for e in record.errors] == ["RequirementsConflict"], record.to_detail()
    assert len(cloud.managed_instances()) == 1


def test_a_request_naming_no_pool_goes_where_the_stored_pools_send_it(cloud, subnets, image):
    # Given `general` (m5.large) and `spare` (m5.large or c5.large) in a warm launcher's copy
    warm(cloud, subnets, image)
    spare = [capacity_type("on-demand"), instance_type("c5.large", "m5.large")]
    cloud.apply(node_pool("spare", "standard", requirements=spare))
    # When `general` is applied again allowing only r5.large, and a request for an m5.large
    # naming no pool comes at once (the copy sends it to `general`, first by name)
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), types=("r5.large",))
    cloud.send(launch_request("any-pool", requirements=[instance_type("m5.large")]))
    # Then it is served by `spare`: the stored `general` cannot take it
    record = cloud.record("any-pool")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    assert record.node_pool == "spare", record.to_detail()
    assert [i.instance_type for i in record.instances] == ["m5.large"], record.to_detail()


def test_a_lease_decided_on_another_revision_is_not_taken(cloud, subnets, image):
    # Given `general` as applied, and the revisions of an older copy of it
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), types=("c5.large",))
    store = cloud.adapters().config_store()
    stored_pool, stored_class = store.node_pool("general"), store.node_class("standard")
    m5_only = [instance_type("m5.large")]
    older = parse_document(node_pool("general", "standard", requirements=m5_only))
    leases = PoolLeaseStore(get_settings().state_table_name, 900, clock=time.time)
    one = Resources(Decimal(2), 4096, 0, 1)

    def take_as(lease_id: str, seen: Revisions) -> object:
        return take(leases, "general", lease_id, one, 1, 1, None, unleased=True, seen=seen)

    # When a lease is asked with the older copy's revision, then with the stored one's
    with pytest.raises(NodePoolChanged, match="NodePool general was applied after"):
        take_as("older", Revisions.of(older, stored_class))  # type: ignore[arg-type]
    taken = take_as("current", Revisions.of(stored_pool, stored_class))
    # Then only the second is leased
    assert taken is not None
    assert [lease.lease_id for lease in leases.leases()] == ["current"]


@pytest.mark.parametrize(
    ("kind", "name", "field"),
    [("NodePool", "general", "weight"), ("NodeClass", "standard", "tags")],
)
def test_a_document_stored_in_another_spelling_is_served(cloud, subnets, image, kind, name, field):
    # Given `general` and `standard` as stored by a version of the service (a CLI or a launcher
    # one release apart) whose model leaves a defaulted field out: the stored revision is the
    # digest of that spelling, not of the one this version dumps
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), types=("m5.large",))
    respell(kind, name, field)
    # When a request for the pool comes
    handed_back = cloud.send(launch_request("other-spelling", nodePool="general"))
    # Then it is served: the stored document is the one it was resolved with (it was handed
    # back at every delivery, the lease taking the spelling for an apply)
    assert handed_back == []
    record = cloud.record("other-spelling")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()


def respell(kind: str, name: str, field: str) -> None:
    """The stored document without its `spec.<field>`, and the revision of that spelling."""
    db, table = aws.client("dynamodb"), get_settings().state_table_name
    item_key = {"pk": {"S": kind}, "sk": {"S": name}}
    document = json.loads(db.get_item(TableName=table, Key=item_key)["Item"]["document"]["S"])
    del document["spec"][field]
    body = json.dumps(document, sort_keys=True)
    db.update_item(
        TableName=table,
        Key=item_key,
        UpdateExpression="SET #document = :document, revision = :revision",
        ExpressionAttributeNames={"#document": "document"},
        ExpressionAttributeValues={
            ":document": {"S": body},
            ":revision": {"S": hashlib.sha256(body.encode()).hexdigest()[:32]},
        },
    )


def test_a_pool_passed_over_twice_in_a_delivery_is_noted_once(cloud, subnets, image):
    # Given `general` (m5.large, full at 1 instance) before `spare` (m5.large or c5.large), in a
    # warm launcher's copy of both
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "1"})
    spare = [capacity_type("on-demand"), instance_type("c5.large", "m5.large")]
    cloud.apply(node_pool("spare", "standard", requirements=spare))
    cloud.send(launch_request("fills", requirements=[instance_type("m5.large")]))
    # When `spare` is applied again (r5.large or m5.large), and a request naming no pool comes:
    # `general` passes it on, `spare`'s lease finds the copy older, and it is resolved again
    spare = [capacity_type("on-demand"), instance_type("r5.large", "m5.large")]
    cloud.apply(node_pool("spare", "standard", requirements=spare))
    cloud.send(launch_request("twice", requirements=[instance_type("m5.large")]))
    # Then `spare` serves it, and its record says once that `general` passed it over
    record = cloud.record("twice")
    assert record is not None and record.node_pool == "spare", record.to_detail()
    assert [e.code for e in record.errors] == ["NodePoolPassedOver"], record.to_detail()


@pytest.mark.parametrize("named", [True, False])
def test_a_pool_applied_again_as_it_was_keeps_the_launchers_copy(
    cloud, subnets, image, monkeypatch, named
):
    # Given a warm launcher, and `general` and `standard` applied again exactly as they were
    warm(cloud, subnets, image)
    cloud.send(launch_request("listed"))  # its listing of the pools is loaded too
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), types=("m5.large",))
    forgotten: list[bool] = []
    monkeypatch.setattr(ConfigStore, "forget", lambda self: forgotten.append(True))
    # When a request for the pool comes, or one naming no pool (the same pools are stored: the
    # NodePools' generation stands)
    pool = {"nodePool": "general"} if named else {}
    cloud.send(launch_request("same-again", **pool))
    # Then it is served from the copy: the same document has the same revision
    record = cloud.record("same-again")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    assert forgotten == []


def test_a_pool_applied_just_before_a_request_naming_no_pool_is_one_it_chooses_from(
    cloud, subnets, image
):
    # Given a warm launcher that chose `general` (m5.large) for a request naming no pool (its
    # copy of the pool listing is loaded)
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), types=("m5.large",))
    cloud.send(launch_request("listed"))
    # When a heavier pool allowing m5.large is applied, and a request naming no pool comes at once
    heavy = [capacity_type("on-demand"), instance_type("m5.large")]
    cloud.apply(node_pool("heavy", "standard", weight=50, requirements=heavy))
    cloud.send(launch_request("after-new-pool"))
    # Then it lands in the new pool, first by weight (it landed in `general`, from the listing)
    record = cloud.record("after-new-pool")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    assert record.node_pool == "heavy", record.to_detail()
    assert record.errors == [], record.to_detail()


def test_a_pool_deleted_just_before_a_request_naming_no_pool_is_not_chosen(cloud, subnets, image):
    # Given `heavy` (weight 50) chosen by a warm launcher for a request naming no pool
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), types=("m5.large",))
    heavy = [capacity_type("on-demand"), instance_type("m5.large")]
    cloud.apply(node_pool("heavy", "standard", weight=50, requirements=heavy))
    cloud.send(launch_request("listed"))
    assert cloud.record("listed").node_pool == "heavy"  # type: ignore[union-attr]
    # When `heavy` is deleted, and a request naming no pool comes at once
    cloud.delete("NodePool", "heavy")
    cloud.send(launch_request("after-deletion"))
    # Then it lands in `general`, and its record does not speak of a pool it never saw stored
    record = cloud.record("after-deletion")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    assert record.node_pool == "general", record.to_detail()


class Crash(BaseException):
    """The worker dies (its time ran out, it was killed): nothing after this runs."""


def crash(*_: object, **__: object) -> bool:
    raise Crash


def test_a_lease_a_dead_worker_left_makes_no_room_for_types_larger_than_it_holds(
    cloud, subnets, image, monkeypatch
):
    # Given a pool limited to 20 cpu allowing m5.large (2 cpu), and a worker that leased for
    # one m5.large and died before it wrote its launch intent (its lease is left open)
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"cpu": "20"})
    with monkeypatch.context() as dying:
        dying.setattr(LaunchRecords, "write_intent", crash)
        dying.setattr(PoolLeaseStore, "cancel", lambda *_, **__: False)
        with pytest.raises(Crash):
            cloud.send(launch_request("dead", nodePool="general"), batch=cloud.fresh_batch())
    # When the pool is applied again allowing m5.4xlarge only (16 cpu), a request takes 16 of
    # the 18 cpu left, and the dead worker's request is delivered again
    types = ("m5.4xlarge",)
    setup_pool(
        cloud, subnets, image, capacity_types=("on-demand",), types=types, limits={"cpu": "20"}
    )
    cloud.send(launch_request("fills", nodePool="general"))
    expire_idempotency_claims(cloud)
    cloud.send(launch_request("dead", nodePool="general"), batch=cloud.fresh_batch())
    # Then it launches nothing past the limit (it launched an m5.4xlarge under its 2-cpu lease,
    # and the pool ran 32 cpu of 20): its lease is given back and a new one finds no room
    usage = PoolUsageStore(get_settings().state_table_name).usage("general")
    assert usage.cpu == 16, usage
    record = cloud.record("dead")
    assert record is not None and record.status is RequestStatus.FAILED, record.to_detail()
    assert [e.code for e in record.errors] == ["LimitExceeded"], record.to_detail()


def served_by_spare(cloud: Cloud, **fields: Any) -> None:
    """`spare` (m5.large) is applied, a request naming no pool comes at once: `spare` serves it."""
    spare = [capacity_type("on-demand"), instance_type("m5.large")]
    cloud.apply(node_pool("spare", "standard", requirements=spare))
    cloud.send(launch_request("after-spare", **fields))
    record = cloud.record("after-spare")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    assert record.node_pool == "spare", record.to_detail()


def test_a_pool_applied_just_before_a_request_naming_no_pool_serves_it_when_the_listed_are_full(
    cloud, subnets, image
):
    # Given a warm launcher whose listing holds only `general`, full at 1 instance
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "1"})
    cloud.send(launch_request("fills"))
    assert cloud.record("fills").node_pool == "general"  # type: ignore[union-attr]
    # When `spare` (m5.large) is applied, and a request naming no pool comes at once, for more
    # instances than `general`'s limits hold (its refusal is decided on the usage read, with no
    # lease written)
    # Then `spare` serves it (it ended Failed in `general`, LimitExceeded, on the listing)
    served_by_spare(cloud, count=2, minCount=1)


def test_a_pool_applied_just_before_a_request_naming_no_pool_serves_it_when_its_quota_refuses(
    cloud, subnets, image
):
    # Given a warm launcher whose listing holds only `general`, where team-a's quota of 1 is used
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "10"})
    cloud.apply(capacity_quota("team-a", "general", {"instances": "1"}))
    cloud.send(launch_request("fills", requester="team-a"))
    assert cloud.record("fills").node_pool == "general"  # type: ignore[union-attr]
    # When `spare` (m5.large, no quota) is applied, and team-a asks at once naming no pool
    # Then `spare` serves it (it ended Failed in `general`, QuotaExceeded, on the listing)
    served_by_spare(cloud, requester="team-a")


def test_a_request_resolved_again_into_the_pool_that_passed_it_over_is_not_noted_passed_over(
    cloud, subnets, image, monkeypatch
):
    # Given `general` (m5.large, full at 1 instance) before `spare` (m5.large or c5.large), in a
    # warm launcher's listing
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "1"})
    spare = [capacity_type("on-demand"), instance_type("c5.large", "m5.large")]
    cloud.apply(node_pool("spare", "standard", requirements=spare))
    cloud.send(launch_request("fills", requirements=[instance_type("m5.large")]))
    # When a request naming no pool comes, `general` passes it on, and `general` is applied
    # again with room for 5 just before `spare` leases for it (it is resolved again)
    write = PoolLeaseStore.write

    def write_after_apply(self: PoolLeaseStore, ask: LeaseAsk, *args: Any) -> Any:
        if ask.pool == "spare":
            monkeypatch.setattr(PoolLeaseStore, "write", write)
            limits = {"instances": "5"}
            setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits=limits)
        return write(self, ask, *args)

    monkeypatch.setattr(PoolLeaseStore, "write", write_after_apply)
    cloud.send(launch_request("grown", requirements=[instance_type("m5.large")]))
    # Then `general` serves it, and its record does not say `general` passed it over
    record = cloud.record("grown")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    assert record.node_pool == "general", record.to_detail()
    assert record.errors == [], record.to_detail()


def test_a_pool_applied_just_before_a_request_naming_no_pool_serves_it_when_the_listed_wait(
    cloud, subnets, image
):
    # Given a warm launcher whose listing holds only `general`, which launches nothing while one
    # of its instances is not yet ready (limits.unready 0), and one that is not
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"unready": 0})
    cloud.send(launch_request("unready"))
    assert cloud.record("unready").node_pool == "general"  # type: ignore[union-attr]
    # When `spare` (m5.large) is applied, and a request naming no pool comes at once
    # Then `spare` serves it (it ended Failed in `general`, on the listing)
    served_by_spare(cloud)


def test_a_pool_applied_just_before_a_request_naming_no_pool_serves_it_when_the_listed_never_can(
    cloud, subnets, image
):
    # Given a warm launcher whose listing holds only `general`, whose limits (1 cpu) never fit an
    # m5.large (2 cpu): a request naming no pool is rejected there before anything is leased
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"cpu": "1"})
    cloud.send(launch_request("never"))
    assert cloud.record("never").status is RequestStatus.REJECTED  # type: ignore[union-attr]
    # When `spare` (m5.large) is applied, and a request naming no pool comes at once
    # Then `spare` serves it (it was Rejected in `general`, LimitExceeded, on the listing)
    served_by_spare(cloud)


def dies_after_its_lease(cloud: Cloud, monkeypatch: pytest.MonkeyPatch, request_id: str) -> None:
    """A worker of a container of its own leases for `request_id` and dies before it writes its
    launch intent: its lease is left open, and nothing was launched under it."""
    with monkeypatch.context() as dying:
        dying.setattr(LaunchRecords, "write_intent", crash)
        dying.setattr(PoolLeaseStore, "cancel", lambda *_, **__: False)
        with pytest.raises(Crash):
            cloud.send(launch_request(request_id, nodePool="general"), batch=cloud.fresh_batch())


@pytest.mark.parametrize("applied", ["NodePool", "NodeClass"])
def test_an_apply_just_before_a_redelivery_governs_the_lease_it_takes_up(
    cloud, subnets, image, monkeypatch, applied
):
    # Given a warm launcher whose copy of `general` allows m5.large in one zone's subnet, and a
    # worker that leased for one m5.large and died before it wrote its launch intent
    limits = {"cpu": "20"}
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits=limits)
    cloud.send(launch_request("warm", nodePool="general"))
    dies_after_its_lease(cloud, monkeypatch, "dead")
    # When `general` is applied again allowing c5.large only (2 cpu: the open lease holds room
    # for one), or `standard` with another zone's subnet only, and the request is delivered
    # again, at once, to the warm launcher
    zone = sorted(subnets)[-1]
    change = {"types": ("c5.large",)} if applied == "NodePool" else {"zones": (zone,)}
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits=limits, **change)
    expire_idempotency_claims(cloud)
    cloud.send(launch_request("dead", nodePool="general"))
    # Then it launches as the stored documents say, under the lease it took up (it launched an
    # m5.large in the first zone, under requirements nobody applies any more)
    record = cloud.record("dead")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    landed = [(i.instance_type, i.zone) for i in record.instances]
    wanted = ("c5.large", ZONE) if applied == "NodePool" else ("m5.large", zone)
    assert landed == [wanted], record.to_detail()
    usage = PoolUsageStore(get_settings().state_table_name).usage("general")
    assert (
        usage.cpu == 4
        and PoolLeaseStore(get_settings().state_table_name, 900, clock=time.time).leases() == []
    )


@pytest.mark.parametrize(
    ("kind", "name", "field"),
    [("NodePool", "general", "weight"), ("NodeClass", "standard", "tags")],
)
def test_a_lease_a_dead_worker_left_is_taken_up_under_another_spelling(
    cloud, subnets, image, monkeypatch, kind, name, field
):
    # Given a worker that leased for one m5.large and died before it wrote its launch intent,
    # and `general` and `standard` then stored by a version of the service that spells one of
    # them otherwise (the same document, another revision)
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"cpu": "20"})
    cloud.send(launch_request("warm", nodePool="general"))
    dies_after_its_lease(cloud, monkeypatch, "dead")
    respell(kind, name, field)
    # When the request is delivered again to the warm launcher
    expire_idempotency_claims(cloud)
    handed_back = cloud.send(launch_request("dead", nodePool="general"))
    # Then it is served under the lease it took up: the stored documents are the ones it was
    # resolved with
    assert handed_back == []
    record = cloud.record("dead")
    assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
    usage = PoolUsageStore(get_settings().state_table_name).usage("general")
    assert (
        usage.cpu == 4
        and PoolLeaseStore(get_settings().state_table_name, 900, clock=time.time).leases() == []
    )


def test_a_replay_whose_lease_holds_room_for_none_of_the_types_allowed_now_says_why(
    cloud, subnets, image, monkeypatch
):
    # Given a request for 2 m5.large (minCount 1) whose worker launched the 1 EC2 had and died
    # before it settled its lease (its intent is done, its lease for 2 m5.large is left open)
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"cpu": "40"})
    moto_capacity.set_capacity("us-east-1", "m5.large", ZONE, "on-demand", 1)
    with monkeypatch.context() as dying:
        dying.setattr(PoolLeaseStore, "taken", crash)  # the settle's first step
        dying.setattr(PoolLeaseStore, "cancel", lambda *_, **__: False)
        with pytest.raises(Crash):
            cloud.send(launch_request("short", nodePool="general", count=2, minCount=1))
    # When the pool is applied again allowing m5.4xlarge only (16 cpu: the lease holds 4), and
    # the request is delivered again
    types = ("m5.4xlarge",)
    setup_pool(
        cloud, subnets, image, capacity_types=("on-demand",), types=types, limits={"cpu": "40"}
    )
    expire_idempotency_claims(cloud)
    again = launch_request("short", nodePool="general", count=2, minCount=1)
    cloud.send(again, batch=cloud.fresh_batch())
    # Then it keeps what its intent launched and launches nothing more under a lease sized for
    # types the pool no longer allows; its record says why it got less than it asked (it said
    # nothing: `errors: []`, and a `candidatesLeftOut` blaming the room the limits left, which
    # holds two m5.4xlarge)
    record = cloud.record("short")
    assert record is not None and record.status is RequestStatus.PARTIALLY_FULFILLED, record
    assert [i.instance_type for i in record.instances] == ["m5.large"], record.to_detail()
    assert [e.code for e in record.errors] == ["LeaseHoldsNoCandidate"], record.to_detail()
    message = record.errors[0].message
    assert "earlier delivery" in message and "(m5.4xlarge)" in message, message
    assert "keeps the 1 instance(s)" in message, message
    assert record.candidates_left_out is None, record.to_detail()


def test_a_lease_taken_up_beside_new_ones_covers_only_the_types_they_cover(
    cloud, subnets, image, monkeypatch
):
    # Given `general` allowing c5.xlarge (4 cpu, 8 GiB) and r5.large (2 cpu, 16 GiB) within
    # 12 GiB, and a worker that leased for one c5.xlarge (no r5.large fit) and died before it
    # wrote its launch intent (its lease is left open, covering c5.xlarge only)
    types = ("c5.xlarge", "r5.large")
    setup_pool(
        cloud, subnets, image, capacity_types=("on-demand",), types=types, limits={"memory": "12Gi"}
    )
    dies_after_its_lease(cloud, monkeypatch, "dead")
    # When `general` is applied again with room for 6 cpu (the open lease holds 4 of them), and
    # a new request comes in one batch with the dead worker's, first: its lease covers r5.large
    # only (2 cpu left beside the open lease)
    setup_pool(
        cloud, subnets, image, capacity_types=("on-demand",), types=types, limits={"cpu": "6"}
    )
    expire_idempotency_claims(cloud)
    new, dead = (launch_request(r, nodePool="general") for r in ("new", "dead"))
    assert cloud.send(new, dead, batch=cloud.fresh_batch()) == []
    # Then both launch an r5.large: the open lease, covering no type the new one's covers, is
    # given back and a lease taken anew over r5.large (the group launched nothing: no type was
    # left that every lease covered)
    for request_id in ("new", "dead"):
        record = cloud.record(request_id)
        assert record is not None and record.status is RequestStatus.FULFILLED, record.to_detail()
        assert [i.instance_type for i in record.instances] == ["r5.large"], record.to_detail()
    usage = PoolUsageStore(get_settings().state_table_name).usage("general")
    assert (
        usage.cpu == 4
        and PoolLeaseStore(get_settings().state_table_name, 900, clock=time.time).leases() == []
    )
