"""The reservation rules in one place (domain/capacity/reservations.py) and what fleet errors blame
(domain/capacity/fleet.py), without AWS: each rule as the launcher, the sync and the CLI now
share it."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from capacity_launcher.domain.apis.config import NodeClass
from capacity_launcher.domain.apis.documents import parse_document
from capacity_launcher.domain.capacity.fleet import FleetError, blame
from capacity_launcher.domain.capacity.offerings import ON_DEMAND, SPOT, Offering
from capacity_launcher.domain.capacity.reservation_state import (
    ANYWHERE,
    STALE_AFTER_SECONDS,
    Coverage,
    ReservationScope,
    StoredReservation,
    covered,
    flag_holds,
    more_room_seen,
    most_room_first,
    unchanged,
)
from capacity_launcher.domain.capacity.reservations import (
    TARGET_ID_FIELD,
    ReservationSnapshot,
    ReservedTarget,
    reservation_use,
    selection_of,
    selector_key,
    target_key,
)

GROUP = "arn:aws:resource-groups:us-east-1:123456789012:group/gpu"
CR_A = "cr-0aaaaaaaaaaaaaaaa"
CR_B = "cr-0bbbbbbbbbbbbbbbb"
CR_C = "cr-0cccccccccccccccc"


def node_class(**reservations: Any) -> NodeClass:
    document = parse_document(
        {
            "apiVersion": "capacity-launcher/v1",
            "kind": "NodeClass",
            "metadata": {"name": "gpu"},
            "spec": {
                "imageId": "ami-0123456789abcdef0",
                "subnetIds": ["subnet-0123456789abcdef0"],
                "securityGroupIds": ["sg-0123456789abcdef0"],
                **reservations,
            },
        }
    )
    assert isinstance(document, NodeClass)
    return document


def reservation(rid: str, **fields: Any) -> ReservationSnapshot:
    base = ReservationSnapshot(rid, "p5.48xlarge", "us-east-1a", "active", 4, 4)
    return replace(base, **fields)


def test_a_target_id_is_one_source_named_by_its_document_field():
    # Given a NodeClass targeting one reservation by id
    selection = selection_of(
        node_class(
            capacityReservationSpec={"capacityReservationTarget": {"capacityReservationId": CR_A}}
        )
    )
    # Then it is one source, resolved from one coverage key, and it names that id
    assert selection.target == ReservedTarget(reservation_id=CR_A)
    assert selection.coverage_keys() == [target_key(CR_A)]
    assert selection.named() == [(TARGET_ID_FIELD, CR_A)]
    (source,) = selection.resolve({CR_A: reservation(CR_A)}, {})
    assert [r.reservation_id for r in source.reservations] == [CR_A]
    # and an id EC2 does not have is a source with nothing in it, reported missing
    (empty,) = selection.resolve({}, {})
    assert empty.reservations == ()
    assert selection.missing([empty]) == [(TARGET_ID_FIELD, CR_A)]


def test_a_group_reaches_only_the_members_known_in_id_order():
    selection = selection_of(
        node_class(
            capacityReservationSpec={
                "capacityReservationTarget": {"capacityReservationResourceGroupArn": GROUP}
            }
        )
    )
    members = {target_key(GROUP): [CR_B, CR_C, CR_A]}
    known = {CR_A: reservation(CR_A), CR_B: reservation(CR_B)}
    (source,) = selection.resolve(known, members)
    assert source.target == ReservedTarget(group_arn=GROUP)
    assert [r.reservation_id for r in source.reservations] == [CR_A, CR_B]
    assert selection.named() == []


def test_selector_terms_match_each_reservation_once_as_ec2_filters_them():
    # Given one term by tag and one by id, and candidates the sync listed for each
    selection = selection_of(
        node_class(capacityReservationSelectorTerms=[{"tags": {"team": "ml"}}, {"id": CR_C}])
    )
    by_tag, by_id = selection.terms
    known = {
        CR_A: reservation(CR_A, tags={"team": "ml"}),
        CR_B: reservation(CR_B, tags={"team": "ml"}, state="expired"),
        CR_C: reservation(CR_C, tags={"team": "ml"}, state="expired"),
    }
    members = {selector_key(by_tag): [CR_A, CR_B, CR_C], selector_key(by_id): [CR_C]}
    # Then each match is its own source: a term by tags takes active ones only, a term by id any
    sources = selection.resolve(known, members)
    assert [s.target.reservation_id for s in sources] == [CR_A, CR_C]
    assert selection.named() == [("spec.capacityReservationSelectorTerms[1].id", CR_C)]
    # and the id it names is reported when it is not active
    assert selection.missing(sources) == [("spec.capacityReservationSelectorTerms[1].id", CR_C)]


def test_a_node_class_without_reservations_selects_nothing():
    selection = selection_of(node_class())
    assert not selection
    assert selection.coverage_keys() == []
    assert selection.resolve({}, {}) == []


def test_coverage_is_trusted_only_when_recent_and_every_member_parses():
    keys = [target_key(GROUP)]
    now = 10_000.0
    fresh = {keys[0]: Coverage(keys[0], now - 1, (CR_A,))}
    assert covered(keys, fresh, set(), now)
    stale = {keys[0]: Coverage(keys[0], now - STALE_AFTER_SECONDS - 1, (CR_A,))}
    assert not covered(keys, stale, set(), now)
    assert not covered(keys, fresh, {CR_A}, now)
    assert not covered(keys, {}, set(), now)


def test_a_request_scope_keeps_the_members_it_could_launch_into_and_every_named_one():
    # Given a coverage item whose members sit in two zones and two types, one of unknown placement
    placements = {CR_A: ("m5.large", "us-east-1a"), CR_B: ("c5.large", "us-east-1a")}
    unknown = "cr-0dddddddddddddddd"
    coverage = Coverage(
        "k", 0.0, (CR_A, CR_B, CR_C, unknown), {**placements, CR_C: ("m5.large", "us-east-1b")}
    )
    scope = ReservationScope(frozenset({"us-east-1a"}), frozenset({"m5.large"}))
    # Then the scope admits only the one in its zone and type, and the one it cannot place
    assert coverage.members_in(scope) == (CR_A, unknown)
    # and a member the NodeClass names by id is kept wherever it is
    assert coverage.members_in(scope, keep={CR_C}) == (CR_A, CR_C, unknown)
    # and no pinned type admits every type in the zones
    assert coverage.members_in(ReservationScope(frozenset({"us-east-1a"}))) == (
        CR_A,
        CR_B,
        unknown,
    )
    assert coverage.members_in(ANYWHERE) == coverage.members


@pytest.mark.parametrize(
    ("available", "exhausted", "count", "claimable"),
    [(4, False, 2, 2), (1, False, 5, 1), (0, False, 1, 0), (3, True, 1, 0)],
)
def test_a_claim_takes_at_most_what_is_available_and_nothing_of_an_exhausted_one(
    available, exhausted, count, claimable
):
    snapshot = reservation(CR_A, available=available, exhausted=exhausted)
    assert snapshot.claimable(count) == claimable


SYNCED = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("exhausted", "seconds_since_sync", "holds"),
    [(False, 0, False), (True, 0, True), (True, STALE_AFTER_SECONDS, True), (True, 301, False)],
)
def test_a_flag_holds_while_a_sync_may_still_lift_it(exhausted, seconds_since_sync, holds):
    stored = StoredReservation(reservation(CR_A, exhausted=exhausted), synced_at=SYNCED)
    assert flag_holds(stored, SYNCED + timedelta(seconds=seconds_since_sync)) is holds


@pytest.mark.parametrize(("heartbeat_after", "holds"), [(None, False), (200, True), (50, False)])
def test_a_flag_on_a_snapshot_the_sync_found_unchanged_holds_while_the_sync_keeps_looking(
    heartbeat_after, holds
):
    # The snapshot was written 400 s ago; the sync has looked since (its coverage) and found
    # nothing to write: the flag holds as long as it would on a snapshot written at that look.
    stored = StoredReservation(reservation(CR_A, exhausted=True), synced_at=SYNCED)
    now = SYNCED + timedelta(seconds=STALE_AFTER_SECONDS + 100)
    heartbeat = None if heartbeat_after is None else SYNCED + timedelta(seconds=heartbeat_after)
    assert flag_holds(stored, now, heartbeat) is holds


@pytest.mark.parametrize(
    ("change", "same"),
    [
        ({}, True),
        ({"available": 1}, False),
        ({"state": "expired"}, False),
        ({"tags": {"team": "ml"}}, False),
    ],
)
def test_a_snapshot_is_unchanged_only_when_ec2_usage_and_announcements_are(change, same):
    prev = StoredReservation(
        reservation(CR_A, available=2), {"team-a": 1}, frozenset({"exhausted"}), SYNCED, 7
    )
    later = SYNCED + timedelta(minutes=1)
    new = StoredReservation(
        replace(prev.snapshot, **change), {"team-a": 1}, prev.announced, later, 8
    )
    assert unchanged(prev, new) is same
    assert not unchanged(prev, replace(new, snapshot=prev.snapshot, usage_by_requester={}))
    assert not unchanged(prev, replace(new, snapshot=prev.snapshot, announced=frozenset()))
    assert not unchanged(None, new)


@pytest.mark.parametrize(
    ("held", "seen", "seconds_since_sync", "more"),
    [
        # grown, or freed by an instance not ours, since the sync
        ({"available": 0}, {"available": 2}, 10, True),
        ({"available": 2}, {"available": 2}, 10, False),
        ({"available": 3}, {"available": 1}, 10, False),  # claims EC2 has not counted yet
        ({"available": 0}, {"available": 2, "state": "expired"}, 10, False),
        # a flag holds while a sync may lift it; after that, any room EC2 shows is room
        ({"available": 1, "exhausted": True}, {"available": 2}, 10, False),
        ({"available": 1, "exhausted": True}, {"available": 1}, 400, True),
        ({"available": 1, "exhausted": True}, {"available": 0}, 400, False),
    ],
)
def test_more_room_seen_by_a_look_after_the_snapshot_was_read(held, seen, seconds_since_sync, more):
    stored = StoredReservation(reservation(CR_A, **held), synced_at=SYNCED)
    now = SYNCED + timedelta(seconds=seconds_since_sync)
    assert more_room_seen(stored, reservation(CR_A, **seen), now) is more


def test_how_an_attempt_uses_reservations():
    plain = node_class()
    closed = node_class(capacityReservationSpec={"capacityReservationPreference": "none"})
    target = ReservedTarget(group_arn=GROUP)
    assert reservation_use(plain, target).preference == "capacity-reservations-only"
    assert reservation_use(plain, target).target == target
    assert reservation_use(plain, None).preference == "open"
    assert reservation_use(closed, None).preference == "none"
    assert reservation_use(plain, None, spot=True).preference == "none"


def test_fleet_errors_blame_the_offerings_they_name():
    a = Offering(ON_DEMAND, "m5.large", "us-east-1a")
    b = Offering(ON_DEMAND, "m5.large", "us-east-1b")
    s = Offering(SPOT, "m5.large", "us-east-1a")
    errors = [
        FleetError("InsufficientInstanceCapacity", "none in a", "m5.large", "us-east-1a", None),
        FleetError("InvalidAMIID.NotFound", "no such image", None, None, None),
        FleetError("RequestLimitExceeded", "slow down", "m5.large", "us-east-1b", None),
    ]
    blamed = blame(errors, [a, b, s])
    # An override's error blames its (type, zone); a throttle blames nothing and is not fatal
    assert blamed.dry == [a, s]
    assert [(o, code) for o, code in blamed.hits] == [
        (a, "InsufficientInstanceCapacity"),
        (s, "InsufficientInstanceCapacity"),
    ]
    assert [(e.code, e.message) for e in blamed.fatal] == [
        ("InvalidAMIID.NotFound", "spec.imageId: no such image")
    ]
    assert blamed.unavailable_marks(errors) == [
        (a.key, "InsufficientInstanceCapacity", "none in a"),
        (s.key, "InsufficientInstanceCapacity", "none in a"),
    ]


def test_one_fatal_error_on_every_override_is_blamed_once():
    # Given EC2's answer to a fleet whose image does not exist: the same error on each override
    # (red team 2: the record listed it five times)
    errors = [
        FleetError("InvalidAMIID.NotFound", "no such image", "m5.large", zone, None)
        for zone in ("us-east-1a", "us-east-1b", "us-east-1c")
    ]
    # Then the request is told once
    blamed = blame(errors, [Offering(ON_DEMAND, "m5.large", "us-east-1a")])
    assert [(e.code, e.message) for e in blamed.fatal] == [
        ("InvalidAMIID.NotFound", "spec.imageId: no such image")
    ]


def test_a_spot_error_stands_for_every_spot_offering():
    # Given a spot error on one override (no service-linked role: no spot launch can succeed)
    code = "AuthFailure.ServiceLinkedRoleCreationNotPermitted"
    s1 = Offering(SPOT, "m5.large", "us-east-1a")
    s2 = Offering(SPOT, "c5.large", "us-east-1b")
    errors = [FleetError(code, "no role", "m5.large", "us-east-1a", None)]
    blamed = blame(errors, [s1, s2])
    # Then every spot offering is dry, cached under `spot` alone, and the record says why
    assert blamed.dry == [s1, s2]
    assert blamed.unavailable_marks(errors) == [(SPOT, code, "no role")]
    assert [(e.code, e.message) for e in blamed.fatal] == [(code, "no role")]


def test_a_launcher_reads_the_snapshots_with_the_most_room_first():
    # The sync saw A with 1 slot, B with 3, C full and D with 3; E is of unknown room (a coverage
    # item stored before room was kept); F is named by id (its absence must be reported)
    room = {"A": 1, "B": 3, "C": 0, "D": 3}
    seen = Coverage("Covered#x", 0.0, ("A", "B", "C", "D", "E"), {}, room)
    other = Coverage("Covered#y", 0.0, ("F",), {}, {"F": 0})
    order = most_room_first({"A", "B", "C", "D", "E", "F"}, [seen, other], named={"F"})
    # Named first, then unknown room, then the most room first (equal ones by id), full ones last
    assert order == ["F", "E", "B", "D", "A", "C"]


def test_a_launch_into_a_group_reads_first_the_members_the_last_one_landed_in():
    # The sync saw A with 1 slot, B with 3, C full and D with 3; the container's last launch
    # into the group landed in A and in C (EC2 chose them)
    room = {"A": 1, "B": 3, "C": 0, "D": 3}
    seen = Coverage("Covered#target:group", 0.0, ("A", "B", "C", "D"), {}, room)
    order = most_room_first({"A", "B", "C", "D"}, [seen], landed={"A", "C"})
    # A first (where EC2 most likely puts the next launch), then the most room first; C, which
    # the sync saw full, keeps its place last
    assert order == ["A", "B", "D", "C"]
