"""Hierarchical cohorts (Kueue's Cohort, KEP-79): the Cohort document's rules, and admission
whose borrowing reaches up a tree of any depth (up to MAX_TREE_COHORTS cohorts) within each
level's limits."""

from __future__ import annotations

import random
from decimal import Decimal
from typing import Any

import pytest

from capacity_launcher.domain.accounting.cohort_tree import CohortTree, in_tree
from capacity_launcher.domain.accounting.quota_admission import Cohort, QuotaInstance
from capacity_launcher.domain.accounting.quota_leases import (
    LeaseAsk,
    admit_lease,
    tree_usage_items,
    usage_items,
)
from capacity_launcher.domain.apis.kueue.cohorts import (
    MAX_CHILD_COHORTS,
    MAX_TREE_COHORTS,
    check_tree,
    cohort_status,
    missing_parent,
    parse_cohort,
)
from capacity_launcher.domain.apis.kueue.cohorts import (
    Cohort as CohortDocument,
)
from capacity_launcher.domain.errors import ConfigConflict, ConfigValidationError, QuotaExceeded
from capacity_launcher.domain.quantities import GPU, Resources
from tests.unit.test_quota_admission import POOL, gpus, quota, usage


def cohort(
    name: str,
    parent: str | None = None,
    *,
    nominal: int | None = None,
    borrowing_limit: int | None = None,
    lending_limit: int | None = None,
    **extra: Any,
) -> CohortDocument:
    spec: dict[str, Any] = dict(extra)
    if parent is not None:
        spec["parentName"] = parent
    if nominal is not None:
        gpu: dict[str, Any] = {"name": GPU, "nominalQuota": str(nominal)}
        if borrowing_limit is not None:
            gpu["borrowingLimit"] = str(borrowing_limit)
        if lending_limit is not None:
            gpu["lendingLimit"] = str(lending_limit)
        spec["resourceGroups"] = [
            {"coveredResources": [GPU], "flavors": [{"name": POOL, "resources": [gpu]}]}
        ]
    return parse_cohort(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "Cohort",
            "metadata": {"name": name},
            "spec": spec,
        }
    )


def by_name(*documents: CohortDocument) -> dict[str, CohortDocument]:
    return {d.name: d for d in documents}


# The document ------------------------------------------------------------------------------


def test_a_cohort_as_kueue_writes_it_parses() -> None:
    org = cohort("org", "root", nominal=4, lending_limit=2)
    assert org.parent == "root"
    term = org.term(POOL, GPU)
    assert term is not None and term.nominal_quota == 4 and term.lending_limit == 2


def test_fair_sharing_weight_is_accepted_and_defaults_to_1() -> None:
    assert cohort("org", "root", fairSharing={"weight": "2.5"}).fair_weight == Decimal("2.5")
    assert cohort("org", "root", fairSharing={"weight": 0}).fair_weight == 0
    assert cohort("org", "root").fair_weight == 1
    assert cohort("org", "root", fairSharing={}).fair_weight == 1


@pytest.mark.parametrize(
    ("weight", "rule"),
    [(-1, "greater than or equal to 0"), ("0.0001", "thousandth"), (True, "number")],
)
def test_a_bad_fair_sharing_weight_is_refused_naming_the_field(weight: Any, rule: str) -> None:
    with pytest.raises(ConfigValidationError, match=rf"spec\.fairSharing\.weight.*{rule}"):
        cohort("org", "root", fairSharing={"weight": weight})


def test_an_unknown_fair_sharing_field_is_refused_naming_it() -> None:
    with pytest.raises(ConfigValidationError, match=r"spec\.fairSharing\.preemptionStrategy"):
        cohort("org", "root", fairSharing={"preemptionStrategy": "x"})


def test_limits_across_pools_are_refused_for_a_cohort() -> None:
    with pytest.raises(ConfigValidationError, match=r"resourceGroups\[0\]\.limits"):
        parse_cohort(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta1",
                "kind": "Cohort",
                "metadata": {"name": "org"},
                "spec": {
                    "resourceGroups": [
                        {
                            "coveredResources": [GPU],
                            "flavors": [
                                {"name": POOL, "resources": [{"name": GPU, "nominalQuota": "1"}]}
                            ],
                            "limits": {"gpu": "1"},
                        }
                    ]
                },
            }
        )


def test_a_cycle_of_parents_is_refused_naming_the_field() -> None:
    stored = [cohort("a", "b")]
    with pytest.raises(ConfigConflict, match=r"spec\.parentName: makes a cycle of parents"):
        check_tree(stored, cohort("b", "a"))
    with pytest.raises(ConfigConflict, match=r"spec\.parentName: a cohort may not be its own"):
        check_tree([], cohort("a", "a"))


def test_trees_deeper_than_two_levels_are_accepted_in_any_order() -> None:
    # A third and a fourth level, each applied last or first
    check_tree([cohort("org", "root"), cohort("root")], cohort("team", "org"))
    check_tree([cohort("team", "org"), cohort("root")], cohort("org", "root"))
    check_tree([cohort("team", "org"), cohort("org", "root")], cohort("root"))
    stored = [cohort("root"), cohort("l1", "root"), cohort("l2", "l1")]
    check_tree(stored, cohort("l3", "l2"))


def test_a_cycle_through_many_levels_is_refused_whatever_the_order() -> None:
    stored = [cohort("a", "b"), cohort("b", "c")]
    with pytest.raises(ConfigConflict, match=r"spec\.parentName: makes a cycle of parents"):
        check_tree(stored, cohort("c", "a"))
    with pytest.raises(ConfigConflict, match=r"\(b -> c -> a -> b\)"):
        check_tree([cohort("c", "a"), cohort("a", "b")], cohort("b", "c"))


def test_a_tree_holds_a_bounded_number_of_cohorts_at_any_depth() -> None:
    chain = [cohort("c0")] + [cohort(f"c{i}", f"c{i - 1}") for i in range(1, MAX_TREE_COHORTS)]
    check_tree(chain[:-1], chain[-1])  # a chain of MAX_TREE_COHORTS levels
    with pytest.raises(
        ConfigConflict,
        match=rf"spec\.parentName: the tree of c0 would hold "
        rf"{MAX_TREE_COHORTS + 1} cohorts",
    ):
        check_tree(chain, cohort("one-more", f"c{MAX_TREE_COHORTS - 1}"))
    # joining two parts that are each within the bound is checked on the whole
    top, bottom = (
        chain[:20],
        [cohort("b0", "c19")] + [cohort(f"b{i}", f"b{i - 1}") for i in range(1, 12)],
    )
    with pytest.raises(ConfigConflict, match="would hold 32 cohorts"):
        check_tree(top[:-1] + bottom, top[-1])


def test_a_parent_has_a_bounded_number_of_children() -> None:
    stored = [cohort(f"c{i}", "root") for i in range(MAX_CHILD_COHORTS)]
    check_tree(stored[:-1], stored[-1])
    with pytest.raises(ConfigConflict, match=f"at most {MAX_CHILD_COHORTS}"):
        check_tree(stored, cohort("one-more", "root"))


def test_a_parent_not_applied_yet_is_accepted_and_named_missing() -> None:
    org = cohort("org", "root")
    check_tree([], org)
    assert missing_parent(by_name(org), org) == "root"
    assert missing_parent(by_name(org, cohort("root")), org) is None


# The decision ------------------------------------------------------------------------------
#
# root (nominal 2 of its own)
# ├── org-a: quota a (nominal 2, lends all), quota b (nominal 0, borrows)
# └── org-b: quota c (nominal 4, lends all)


def _tree(**documents: Any) -> tuple[list[Any], dict[str, CohortDocument]]:
    quotas = [
        quota("a", 2, cohort="org-a"),
        quota("b", 0, cohort="org-a"),
        quota("c", 4, cohort="org-b"),
    ]
    default = by_name(cohort("root", nominal=2), cohort("org-a", "root"), cohort("org-b", "root"))
    return quotas, default | documents


def test_borrowing_reaches_up_two_levels() -> None:
    quotas, cohorts = _tree()
    tree = CohortTree(quotas, cohorts, usage())
    # b's own cohort lends 2 (a), the parent adds its own 2 and org-b's lent 4.
    assert tree.available("b", POOL, GPU) == 8
    admitted = tree.admit("b", POOL, gpus(8))
    assert admitted.borrowed == {GPU: Decimal(8)}
    with pytest.raises(QuotaExceeded, match="short by 1"):
        tree.admit("b", POOL, gpus(9))


def test_the_flat_cohort_alone_would_lend_only_its_members() -> None:
    quotas, _ = _tree()
    assert Cohort.of(quotas[1], quotas, usage()).ledger(POOL, GPU).allocatable("b") == 2


def test_use_anywhere_in_the_tree_is_counted() -> None:
    quotas, cohorts = _tree()
    tree = CohortTree(quotas, cohorts, usage(c=3, a=1))
    assert tree.available("b", POOL, GPU) == 4  # 8 less the 4 in use
    assert tree.available("c", POOL, GPU) == 4  # the same 4: c lends all of its own


def test_a_cohorts_lending_limit_stops_borrowing_at_its_level() -> None:
    quotas, cohorts = _tree(**by_name(cohort("org-b", "root", nominal=0, lending_limit=1)))
    tree = CohortTree(quotas, cohorts, usage())
    # org-b keeps all but 1 of its 4: b reaches 2 (a) + 2 (root) + 1 (org-b).
    assert tree.available("b", POOL, GPU) == 5
    # c, inside org-b, still has its whole nominal quota and root's lent part.
    assert tree.available("c", POOL, GPU) == 4 + 2 + 2


def test_a_cohorts_borrowing_limit_stops_borrowing_at_its_level() -> None:
    quotas, cohorts = _tree(**by_name(cohort("org-a", "root", nominal=0, borrowing_limit=1)))
    tree = CohortTree(quotas, cohorts, usage())
    assert tree.available("b", POOL, GPU) == 2 + 1
    with pytest.raises(QuotaExceeded):
        tree.admit("b", POOL, gpus(4))


def test_a_quotas_borrowing_limit_still_holds_in_a_tree() -> None:
    quotas, cohorts = _tree()
    quotas[1] = quota("b", 0, cohort="org-a", borrowing_limit=3)
    assert CohortTree(quotas, cohorts, usage()).available("b", POOL, GPU) == 3


def test_a_quota_that_does_not_borrow_stays_within_its_nominal_quota() -> None:
    quotas, cohorts = _tree()
    quotas[0] = quota("a", 2, cohort="org-a", borrowing=False)
    assert CohortTree(quotas, cohorts, usage()).available("a", POOL, GPU) == 2


def test_the_tree_never_runs_more_than_its_quotas() -> None:
    """Random admissions through the tree: the use summed over the tree never exceeds the sum
    of every quota's and cohort's nominal quota, nor any quota its nominal + borrowingLimit."""
    draw = random.Random(37)
    for _ in range(200):
        quotas = [
            quota("a", draw.randint(0, 4), cohort="org-a", lending_limit=draw.randint(0, 0)),
            quota("b", draw.randint(0, 4), cohort="org-a", borrowing_limit=draw.randint(0, 6)),
            quota("c", draw.randint(0, 4), cohort="org-b"),
            quota("d", draw.randint(0, 4), cohort="root"),
        ]
        own = {"root": draw.randint(0, 3), "org-a": draw.randint(0, 3), "org-b": 0}
        cohorts = by_name(
            cohort("root", nominal=own["root"]),
            cohort("org-a", "root", nominal=own["org-a"], lending_limit=draw.randint(0, 3)),
            cohort("org-b", "root", borrowing_limit=draw.randint(0, 3), nominal=0),
        )
        used = {q.name: 0 for q in quotas}
        for _ in range(30):
            who = draw.choice(quotas).name
            ask = draw.randint(1, 3)
            tree = CohortTree(quotas, cohorts, usage(**used))
            try:
                tree.admit(who, POOL, gpus(ask))
            except QuotaExceeded:
                continue
            used[who] += ask
        tree = CohortTree(quotas, cohorts, usage(**used))
        for name in ("org-a", "org-b"):
            node = ("cohort", name)
            inside = tree._used(node, POOL, GPU)  # what the cohort's quotas use above theirs
            subtree, kept = tree._subtree(node, POOL, GPU), tree._guaranteed(node, POOL, GPU)
            limit = cohorts[name].term(POOL, GPU)
            assert limit is not None
            if limit.borrowing_limit is not None:  # the level's borrowingLimit held
                assert max(0, inside - kept) <= subtree - kept + limit.borrowing_limit
        total = sum(int(q.flavors()[0].resources[0].nominal_quota) for q in quotas)
        assert sum(used.values()) <= total + sum(own.values())
        b = quotas[1].flavors()[0].resources[0]
        assert b.borrowing_limit is not None
        assert used["b"] <= b.nominal_quota + b.borrowing_limit


@pytest.mark.parametrize("seed", range(30))
def test_one_cohort_in_a_tree_decides_as_the_flat_cohort(seed: int) -> None:
    """A root cohort with no quota of its own and no children: the tree's arithmetic is the
    flat cohort's (Ledger.allocatable), whatever the members' terms and use."""
    draw = random.Random(seed)
    quotas = []
    for name in ("p", "q", "r"):
        nominal, borrows = draw.randint(0, 5), draw.random() < 0.8
        quotas.append(
            quota(
                name,
                nominal,
                borrowing=borrows,
                borrowing_limit=draw.choice([None, draw.randint(0, 4)]) if borrows else None,
                lending_limit=draw.choice([None, draw.randint(0, nominal)]),
            )
        )
    used = usage(**{q.name: draw.randint(0, 6) for q in quotas})
    tree = CohortTree(quotas, by_name(cohort("research")), used)
    ledger = Cohort.of(quotas[0], quotas, used).ledger(POOL, GPU)
    for q in quotas:
        assert tree.available(q.name, POOL, GPU) == ledger.allocatable(q.name)


# Which decides, and what it reads ----------------------------------------------------------


def test_a_cohort_no_document_names_stays_flat() -> None:
    quotas, cohorts = _tree()
    flat = quota("x", 2, cohort="elsewhere")
    assert not in_tree(cohorts, flat)
    assert tree_usage_items(flat, cohorts, POOL) == usage_items(flat, POOL)
    ask = LeaseAsk(POOL, "b", gpus(1), 8, 1)
    assert admit_lease(quotas, ask, usage()) == 2  # no documents: the flat cohort
    assert admit_lease(quotas, ask, usage(), cohorts) == 8


def test_a_parent_not_applied_leaves_the_cohort_flat() -> None:
    quotas, _ = _tree()
    cohorts = by_name(cohort("org-a", "root"))
    assert not in_tree(cohorts, quotas[1])
    assert admit_lease(quotas, LeaseAsk(POOL, "b", gpus(1), 8, 1), usage(), cohorts) == 2


def test_a_tree_admission_reads_every_cohort_of_the_tree() -> None:
    quotas, cohorts = _tree()
    assert tree_usage_items(quotas[1], cohorts, POOL) == [
        (f"QuotaUsage#org-a#{POOL}", POOL),
        (f"QuotaUsage#org-b#{POOL}", POOL),
        (f"QuotaUsage#root#{POOL}", POOL),
    ]


def test_the_usage_read_bounds_one_transaction() -> None:
    from capacity_launcher.domain.accounting.quota_admission import LEASE_ITEMS, TRANSACTION_ITEMS
    from capacity_launcher.domain.apis.quotas import MAX_FLAVORS

    # the lease's own items, its own cohort's item in each pool of its group, every other
    # cohort's item of the tree
    assert LEASE_ITEMS + MAX_FLAVORS + (MAX_TREE_COHORTS - 1) <= TRANSACTION_ITEMS
    assert Resources.ZERO.amount(GPU) == 0


# Deeper trees -------------------------------------------------------------------------------
#
# root (nominal 2 of its own)
# ├── mid
# │   ├── leaf: quota a (nominal 2), quota b (nominal 0, borrows)
# │   └── leaf2: quota c (nominal 1)
# └── other: quota d (nominal 4)


def _deep(**documents: Any) -> tuple[list[Any], dict[str, CohortDocument]]:
    quotas = [
        quota("a", 2, cohort="leaf"),
        quota("b", 0, cohort="leaf"),
        quota("c", 1, cohort="leaf2"),
        quota("d", 4, cohort="other"),
    ]
    default = by_name(
        cohort("root", nominal=2),
        cohort("mid", "root"),
        cohort("leaf", "mid"),
        cohort("leaf2", "mid"),
        cohort("other", "root"),
    )
    return quotas, default | documents


def _admitted(quotas: list[Any], cohorts: dict[str, CohortDocument], who: str, **used: int) -> int:
    """How many single GPUs ``who`` is admitted, deciding on the usage items the lease reads
    (`tree_usage_items`) only, as the launcher does."""
    own = next(q for q in quotas if q.name == who)
    read = {key.split("#")[1] for key, _ in tree_usage_items(own, cohorts, POOL)}
    cohort_of = {q.name: q.spec.cohort for q in quotas}
    seen = {k: v for k, v in usage(**used).items() if cohort_of[k[0]] in read}
    try:
        return admit_lease(quotas, LeaseAsk(POOL, who, gpus(1), 20, 1), seen, cohorts)
    except QuotaExceeded:
        return 0


def test_borrowing_reaches_up_three_levels() -> None:
    quotas, cohorts = _deep()
    # a's 2 in leaf, c's 1 in mid, the root's own 2 and d's 4
    assert _admitted(quotas, cohorts, "b") == 9
    # use in another branch two levels up is counted: d uses 3 of its 4
    assert _admitted(quotas, cohorts, "b", d=3) == 6
    assert _admitted(quotas, cohorts, "d", b=8) == 1
    # the whole tree is read: every cohort's item in the pool
    assert [k for k, _ in tree_usage_items(quotas[1], cohorts, POOL)] == [
        f"QuotaUsage#{name}#{POOL}" for name in ("leaf", "leaf2", "mid", "other", "root")
    ]


def test_a_middle_cohorts_limits_hold_at_its_level() -> None:
    # mid may take 1 from above: b reaches a's 2, c's 1 and 1 more
    quotas, cohorts = _deep(**by_name(cohort("mid", "root", nominal=0, borrowing_limit=1)))
    assert _admitted(quotas, cohorts, "b") == 4
    # d's own branch is not bounded by mid's limit: its 4, the root's 2, and what mid lends (3)
    assert _admitted(quotas, cohorts, "d") == 9
    # mid lends 1 of what its subtree holds: d reaches its 4, the root's 2 and that 1
    quotas, cohorts = _deep(**by_name(cohort("mid", "root", nominal=0, lending_limit=1)))
    assert _admitted(quotas, cohorts, "d") == 7
    assert _admitted(quotas, cohorts, "b") == 9  # within mid, its members still have it all


def test_borrowing_reaches_up_four_levels_within_each_levels_limits() -> None:
    # root (4 of its own, quota z 1) <- l1 (borrows at most 3) <- l2 (2 of its own) <- l3: x
    quotas = [quota("x", 0, cohort="l3"), quota("z", 1, cohort="root")]
    cohorts = by_name(
        cohort("root", nominal=4),
        cohort("l1", "root", nominal=0, borrowing_limit=3),
        cohort("l2", "l1", nominal=2),
        cohort("l3", "l2"),
    )
    # l2's 2, and 3 more from the root past l1's borrowingLimit
    assert _admitted(quotas, cohorts, "x") == 5
    # z's use at the root leaves 2 of the root's 5 (4 + 1) for l1
    assert _admitted(quotas, cohorts, "x", z=3) == 4
    # l2 keeping its own 2 (lends none) does not keep them from its own subtree
    kept = cohorts | by_name(cohort("l2", "l1", nominal=2, lending_limit=0))
    assert _admitted(quotas, kept, "x") == 5
    # the tree holds 7 (the root's 4, l2's 2, z's 1): x holding 5 leaves z 2, whoever lends
    assert _admitted(quotas, kept, "z", x=5) == 2
    assert _admitted(quotas, cohorts, "z", x=5) == 2
    assert _admitted(quotas, cohorts, "z", x=6) == 1


def test_a_cycle_stored_anyway_is_reported_and_nothing_borrows_through_it() -> None:
    quotas = [quota("x", 1, cohort="a"), quota("y", 3, cohort="b"), quota("w", 0, cohort="c")]
    # a <-> b, and c under a (a cycle written into the table by hand: apply refuses it)
    cohorts = by_name(cohort("a", "b"), cohort("b", "a"), cohort("c", "a"))
    statuses = {name: cohort_status(cohorts, quotas, c) for name, c in cohorts.items()}
    for name in ("a", "b", "c"):
        [ready] = statuses[name]["conditions"]
        assert (ready["status"], ready["reason"]) == ("False", "CycleDetected"), name
    assert "(a -> b -> a)" in statuses["a"]["conditions"][0]["message"]
    # each stands alone: x keeps its 1 and borrows none of y's 3; c lends w nothing
    assert not in_tree(cohorts, quotas[0])
    assert _admitted(quotas, cohorts, "x") == 1
    assert _admitted(quotas, cohorts, "w") == 0


# Reclaim across the tree ----------------------------------------------------------------------
#
# root
# ├── mid
# │   └── leaf: quota b (nominal 0, borrows, priority 0)
# └── other: quota d (nominal 4, priority 10, reclaims LowerPriority), quota e (nominal 0)


def _lent_across(**used: int) -> tuple[CohortTree, list[Any]]:
    quotas = [
        quota("b", 0, cohort="leaf"),
        quota("d", 4, cohort="other", priority=10, reclaim="LowerPriority"),
        quota("e", 0, cohort="other", priority=20),
    ]
    cohorts = by_name(
        cohort("root"), cohort("mid", "root"), cohort("leaf", "mid"), cohort("other", "root")
    )
    return CohortTree(quotas, cohorts, usage(**used)), quotas


def _instance(name: str, owner: str, count: int, at: str) -> QuotaInstance:
    return QuotaInstance(name, owner, POOL, gpus(count), at)


def test_a_quota_whose_lent_quota_another_branch_holds_is_told_to_reclaim_it() -> None:
    # Given b, two levels down in another branch, holding 3 of d's 4
    tree, _ = _lent_across(b=3)
    # When d asks for 2 of its own nominal quota
    with pytest.raises(
        QuotaExceeded,
        match="nominal quota is lent out in the tree of cohort other: 1 must be reclaimed first",
    ) as refused:
        tree.admit("d", POOL, gpus(2))
    # Then the refusal carries what must come back
    assert refused.value.reclaim == {GPU: Decimal(1)}
    # while asking past its nominal quota is no reclaim: it would borrow
    with pytest.raises(QuotaExceeded, match="short by") as borrowing:
        tree.admit("d", POOL, gpus(5))
    assert not borrowing.value.reclaim


def test_reclaim_across_the_tree_names_the_borrower_in_another_branch() -> None:
    tree, _ = _lent_across(b=3)
    instances = [
        _instance("i-old", "b", 2, "2026-11-01T00:00:00"),
        _instance("i-new", "b", 1, "2026-11-02T00:00:00"),
    ]
    # the newest that frees enough, under d's LowerPriority: b's priority 0 is lower
    plan = tree.reclaim_plan("d", POOL, {GPU: Decimal(1)}, instances)
    assert plan is not None and plan.enforced
    assert [i.instance_id for i in plan.instances] == ["i-new"]
    # two back take both, newest first
    plan = tree.reclaim_plan("d", POOL, {GPU: Decimal(2)}, instances)
    assert plan is not None and [i.instance_id for i in plan.instances] == ["i-new", "i-old"]
    # more than b borrows cannot be freed
    assert tree.reclaim_plan("d", POOL, {GPU: Decimal(4)}, instances) is None


def test_reclaim_across_the_tree_keeps_the_lenders_policy() -> None:
    # e (priority 20) also borrows d's quota: LowerPriority does not let d take it back from e,
    # so the choice among every borrower is only asked
    tree, _ = _lent_across(e=3)
    instances = [_instance("i-e", "e", 3, "2026-11-02T00:00:00")]
    plan = tree.reclaim_plan("d", POOL, {GPU: Decimal(1)}, instances)
    assert plan is not None and not plan.enforced
    assert [i.instance_id for i in plan.instances] == ["i-e"]
