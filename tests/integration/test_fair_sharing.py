"""Issue 37, fair sharing on the local cloud: waiting requests of one priority are admitted by the
dominant resource share of their team's quota (`spec.fairSharing.weight`), then arrival. Two
borrowing teams of one cohort, weights 1 and 3, wait at a full pool; each instance a lender ends
makes room for one, and the wake admits the team furthest below its share. Through a Cohort
tree, the subtree furthest below its share within its parent goes first.
"""

from __future__ import annotations

import moto_capacity
from capacity_launcher.domain.records.status import RequestStatus
from local_cloud.documents import capacity_quota
from tests.integration.test_cohort_tree import apply, cohort
from tests.integration.test_launch_into_reservations import ZONE, setup_pool
from tests.integration.test_queue_for_room import POOL, end, queue, record_of, until
from tests.support.cloud import Cloud, launch_request

WAITERS = ("a-w1", "a-w2", "a-w3", "b-w1", "b-w2", "b-w3")


def _settle(cloud: Cloud) -> list[str]:
    """Deliver the wake's messages until none is left; the requests admitted, in order."""
    admitted = []
    while delivered := cloud.deliver_queued():
        admitted += [r for r in delivered if record_of(cloud, r).status is RequestStatus.FULFILLED]
    return admitted


def test_waiting_requests_of_two_teams_weighted_1_and_3_are_admitted_by_their_shares(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "8"})
    moto_capacity.set_capacity("us-east-1", "m5.large", ZONE, "on-demand", 100)
    # Given a cohort lending 8 instances: a lender (6) and two teams of 1 that borrow, team-b
    # weighing 3 times team-a
    cloud.apply(
        capacity_quota("lender", POOL, {"instances": "6"}),
        capacity_quota("team-a", POOL, {"instances": "1"}, allowBorrowing=True),
        capacity_quota(
            "team-b", POOL, {"instances": "1"}, allowBorrowing=True, fairSharing={"weight": 3}
        ),
    )
    # And the pool full: the lender runs 4, each team 2 (one borrowed each: a's share 1/8, b's
    # 1/8 / 3)
    cloud.send(launch_request("lent", nodePool=POOL, requester="lender", count=4))
    cloud.send(launch_request("a-0", nodePool=POOL, requester="team-a", count=2))
    cloud.send(launch_request("b-0", nodePool=POOL, requester="team-b", count=2))
    lender = record_of(cloud, "lent")
    assert lender.launched == 4
    # And three requests of each team waiting, team-a's first
    for request_id in WAITERS:
        moto_capacity.advance_clock(1)
        team = f"team-{request_id[0]}"
        body = launch_request(
            request_id, nodePool=POOL, requester=team, waitForCapacityUntil=until(days=1)
        )
        cloud.send(body)
        assert record_of(cloud, request_id).status is RequestStatus.WAITING
    assert queue() == list(WAITERS)  # the queue's own order: arrival
    # When the lender's instances end one at a time (room for one each)
    admitted = []
    for at in range(4):
        end(cloud, lender, at)
        admitted.append(_settle(cloud))
    # Then the team furthest below its weighted share goes first each time: b (1/24 < 1/8),
    # b (2/24 < 1/8), then a tie (3/24 = 1/8) that arrival breaks (a-w1), then b (3/24 < 2/8)
    assert admitted == [["b-w1"], ["b-w2"], ["a-w1"], ["b-w3"]]
    assert queue() == ["a-w2", "a-w3"]


def test_of_two_sibling_cohorts_the_one_borrowing_less_of_its_parent_is_admitted_first(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "8"})
    moto_capacity.set_capacity("us-east-1", "m5.large", ZONE, "on-demand", 100)
    # Given a tree: org (a lender of 6 in it) over vision (team-a of 1, team-a2 of 0) and speech
    # (team-c of 1), every team borrowing
    for document in (cohort("org"), cohort("vision", "org"), cohort("speech", "org")):
        assert apply(cloud, document) == []
    cloud.apply(
        capacity_quota("lender", POOL, {"instances": "6"}, cohort="org"),
        capacity_quota("team-a", POOL, {"instances": "1"}, cohort="vision", allowBorrowing=True),
        capacity_quota("team-a2", POOL, {"instances": "0"}, cohort="vision", allowBorrowing=True),
        capacity_quota("team-c", POOL, {"instances": "1"}, cohort="speech", allowBorrowing=True),
    )
    # And the pool full: the lender runs 4, team-a 1 and team-c 1 (within their nominal quota),
    # team-a2 2 (borrowed): vision uses 2 above its own 1 of org's 8, speech nothing above its 1
    cloud.send(launch_request("lent", nodePool=POOL, requester="lender", count=4))
    cloud.send(launch_request("a-0", nodePool=POOL, requester="team-a", count=1))
    cloud.send(launch_request("a2-0", nodePool=POOL, requester="team-a2", count=2))
    cloud.send(launch_request("c-0", nodePool=POOL, requester="team-c", count=1))
    lender = record_of(cloud, "lent")
    assert lender.launched == 4
    # And team-a's request waiting before team-c's: neither quota borrows, so flat they tie and
    # arrival would admit team-a's first
    for request_id, team in (("a-w1", "team-a"), ("c-w1", "team-c")):
        moto_capacity.advance_clock(1)
        body = launch_request(
            request_id, nodePool=POOL, requester=team, waitForCapacityUntil=until(days=1)
        )
        cloud.send(body)
        assert record_of(cloud, request_id).status is RequestStatus.WAITING
    assert queue() == ["a-w1", "c-w1"]
    # When one of the lender's instances ends (room for one)
    end(cloud, lender, 0)
    # Then speech's request goes first: its subtree borrows nothing, vision's 2/8
    assert _settle(cloud) == ["c-w1"]
    assert queue() == ["a-w1"]
    # And team-a's next, when room appears again
    end(cloud, lender, 1)
    assert _settle(cloud) == ["a-w1"]
