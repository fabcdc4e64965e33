"""Issue 37, hierarchical fair sharing (Kueue's fair sharing through a Cohort tree): among waiting
requests of one priority, the shares of the subtrees they come from decide, level by level from
the root down, before the quota's own share (domain/accounting/fair_sharing.py,
CohortTree.dominant_share); without a tree the order is the flat one."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from capacity_launcher.domain.accounting import fair_sharing
from capacity_launcher.domain.accounting.cohort_tree import CohortTree
from capacity_launcher.domain.accounting.fair_sharing import INFINITE, fair_order, shares
from capacity_launcher.domain.apis.kueue.cohorts import Cohort
from capacity_launcher.domain.apis.quotas import CapacityQuota
from capacity_launcher.service.admission_queue import AdmissionQueue
from tests.unit.test_admission_queue import Held, Items, Sent
from tests.unit.test_cohort_tree import cohort
from tests.unit.test_fair_sharing import POOL, Usage, _of, _quota, _using


def _cohort(name: str, parent: str | None = None, weight: Any = None) -> Cohort:
    if weight is None:
        return cohort(name, parent)
    return cohort(name, parent, fairSharing={"weight": weight})


def _tree(*cohorts: Cohort) -> dict[str, Cohort]:
    return {c.name: c for c in cohorts}


def _order(
    window: list[Any],
    quotas: list[CapacityQuota],
    cohorts: dict[str, Cohort],
    usage: dict[tuple[str, str], Any],
) -> list[str]:
    teams = fair_sharing.governing(window, POOL, quotas)
    share = shares(teams, quotas, usage, POOL, cohorts)
    return [e.request_id for e in fair_order(window, share)]


# Depth 2: org over cohorts a and b, and an idle lender of 10 in org itself. In a, qa keeps within
# its nominal 2 while qa2 (nominal 0) borrows 6: subtree a borrows 6 of org's 14. In b, qb
# borrows 1 (of its nominal 2): subtree b borrows 1 of 14. Flat, qa's share (0) is below qb's
# (1/2) and qa waited first; through the tree b is further below its share.
DEPTH_2 = _tree(_cohort("org"), _cohort("a", "org"), _cohort("b", "org"))
QA, QA2 = _quota("qa", "2", cohort="a"), _quota("qa2", "0", cohort="a")
QB, IDLE = _quota("qb", "2", cohort="b"), _quota("idle", "10", cohort="org")
QUOTAS_2 = [QA, QA2, QB, IDLE]
USAGE_2 = _using(qa=2, qa2=6, qb=3)
WINDOW_2 = [_of("a1", "qa"), _of("b1", "qb", at=1)]


def test_depth_2_the_sibling_cohort_borrowing_least_of_its_parent_goes_first() -> None:
    assert _order(WINDOW_2, QUOTAS_2, {}, USAGE_2) == ["a1", "b1"]  # flat: qa's share is 0
    assert _order(WINDOW_2, QUOTAS_2, DEPTH_2, USAGE_2) == ["b1", "a1"]
    tree = CohortTree(QUOTAS_2, DEPTH_2, USAGE_2)
    assert tree.dominant_share(("cohort", "a"), POOL) == Decimal(6) / 14
    assert tree.dominant_share(("cohort", "b"), POOL) == Decimal(1) / 14
    assert tree.dominant_share(("cohort", "org"), POOL) == 0  # a root has no parent


def test_depth_2_a_cohort_s_weight_divides_its_share() -> None:
    light = _tree(_cohort("org"), _cohort("a", "org", weight=2), _cohort("b", "org", "0.1"))
    assert _order(WINDOW_2, QUOTAS_2, light, USAGE_2) == ["a1", "b1"]  # a: 6/14/2, b: 1/14/0.1
    zero = _tree(_cohort("org"), _cohort("a", "org"), _cohort("b", "org", weight=0))
    assert CohortTree(QUOTAS_2, zero, USAGE_2).dominant_share(("cohort", "b"), POOL) == INFINITE
    assert _order(WINDOW_2, QUOTAS_2, zero, USAGE_2) == ["a1", "b1"]


def test_depth_2_a_quota_in_the_parent_competes_with_the_child_cohorts() -> None:
    window = [_of("a1", "qa"), _of("i1", "idle", at=1)]  # idle borrows nothing: share 0
    assert _order(window, QUOTAS_2, DEPTH_2, USAGE_2) == ["i1", "a1"]


# Depth 3: org over mid and other; mid over x and y; an idle lender of 20 in org. x's qx keeps
# within its nominal 1; y's qy (nominal 0) borrows 6, so mid borrows 6 of org's 22. other's qo
# borrows 2 of its nominal 1: other borrows 2 of 22. Flat, qx (share 0) goes before qo (2/1).
DEPTH_3 = _tree(
    _cohort("org"),
    _cohort("mid", "org"),
    _cohort("other", "org"),
    _cohort("x", "mid"),
    _cohort("y", "mid"),
)
QX, QY = _quota("qx", "1", cohort="x"), _quota("qy", "0", cohort="y")
QO, IDLE_3 = _quota("qo", "1", cohort="other"), _quota("idle", "20", cohort="org")
QUOTAS_3 = [QX, QY, QO, IDLE_3]
USAGE_3 = _using(qx=1, qy=6, qo=3)


def test_depth_3_the_top_level_decides_before_the_levels_below() -> None:
    window = [_of("x1", "qx"), _of("o1", "qo", at=1)]
    assert _order(window, QUOTAS_3, {}, USAGE_3) == ["x1", "o1"]
    # mid (6/22) is further over its share than other (2/22), whatever x's own share (0).
    assert _order(window, QUOTAS_3, DEPTH_3, USAGE_3) == ["o1", "x1"]


def test_depth_3_under_one_cohort_the_sibling_subtrees_decide() -> None:
    window = [_of("y1", "qy"), _of("x1", "qx", at=1)]
    # Flat, each is alone in its cohort, neither with a share: arrival. Under mid, y borrows.
    assert _order(window, QUOTAS_3, {}, USAGE_3) == ["y1", "x1"]
    assert _order(window, QUOTAS_3, DEPTH_3, USAGE_3) == ["x1", "y1"]
    tree = CohortTree(QUOTAS_3, DEPTH_3, USAGE_3)
    assert tree.dominant_share(("cohort", "y"), POOL) == Decimal(6) / 22  # mid could hold 22
    assert tree.dominant_share(("cohort", "x"), POOL) == 0


def test_depth_3_priority_and_a_blocking_entry_still_come_first() -> None:
    window = [_of("x1", "qx", 1), _of("o1", "qo", at=1)]
    assert _order(window, QUOTAS_3, DEPTH_3, USAGE_3) == ["x1", "o1"]


def test_cohort_documents_that_make_no_tree_keep_the_flat_order() -> None:
    flat = [_quota("a"), _quota("b", weight=3)]
    window = [_of("a1", "a"), _of("a2", "a", at=1), _of("b1", "b", at=2)]
    usage = _using(a=6, b=8)
    alone = _tree(_cohort("c"))  # a Cohort of the quotas' cohort, no parent, no quota
    teams = fair_sharing.governing(window, POOL, flat)
    assert shares(teams, flat, usage, POOL, alone) == shares(teams, flat, usage, POOL)
    assert _order(window, flat, alone, usage) == _order(window, flat, {}, usage)


def test_the_wake_reads_every_cohort_of_the_tree_in_one_read_and_admits_by_the_tree() -> None:
    items = Items(*WINDOW_2)
    usage = Usage(USAGE_2)
    sent = Sent()
    admission = AdmissionQueue(
        items, Held("a1", "b1"), sent, lambda: QUOTAS_2, usage, lambda: DEPTH_2
    )

    assert admission.wake(POOL) == "b1"
    assert usage.reads == [["QuotaUsage#a#p", "QuotaUsage#b#p", "QuotaUsage#org#p"]]
    assert items.queries == 1 and len(sent.sent) == 1
