"""Admission against CapacityQuotas: nominal, borrowing, the cohort's total, and reclaim."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from capacity_launcher.domain.accounting.quota_admission import (
    AdmissionKind,
    Cohort,
    QuotaInstance,
    UsageKey,
)
from capacity_launcher.domain.accounting.quota_leases import governing, most_admitted
from capacity_launcher.domain.apis.quotas import CapacityQuota, parse_quota
from capacity_launcher.domain.errors import QuotaExceeded
from capacity_launcher.domain.quantities import GPU, INSTANCES, Resources

POOL = "gpu-training"


def quota(
    name: str,
    gpus: int,
    *,
    priority: int = 0,
    cohort: str | None = "research",
    borrowing: bool = True,
    borrowing_limit: int | None = None,
    lending_limit: int | None = None,
    instances: int | None = None,
    reclaim: str = "Never",
    requesters: list[str] | None = None,
) -> CapacityQuota:
    gpu: dict[str, Any] = {"name": GPU, "nominalQuota": str(gpus)}
    if borrowing_limit is not None:
        gpu["borrowingLimit"] = str(borrowing_limit)
    if lending_limit is not None:
        gpu["lendingLimit"] = str(lending_limit)
    resources = [gpu]
    if instances is not None:
        resources.append({"name": INSTANCES, "nominalQuota": str(instances)})
    spec: dict[str, Any] = {
        "requesters": requesters or [name],
        "priority": priority,
        "resourceGroups": [
            {
                "coveredResources": [r["name"] for r in resources],
                "flavors": [{"name": POOL, "resources": resources}],
            }
        ],
    }
    if cohort is not None:
        spec |= {
            "cohort": cohort,
            "allowBorrowing": borrowing,
            "preemption": {"reclaimWithinCohort": reclaim},
        }
    return parse_quota(
        {
            "apiVersion": "capacity-launcher/v1",
            "kind": "CapacityQuota",
            "metadata": {"name": name},
            "spec": spec,
        }
    )


def gpus(count: int) -> Resources:
    return Resources(gpu=count, instances=1)


def usage(**by_requester: int) -> dict[UsageKey, Resources]:
    return {(requester, POOL): Resources(gpu=n) for requester, n in by_requester.items()}


def test_within_nominal_is_admitted_without_borrowing() -> None:
    # Given team-a with 32 GPUs of nominal quota, using 24
    cohort = Cohort([quota("team-a", 32), quota("team-b", 16)], usage(**{"team-a": 24}))

    # When it asks for 8 more
    admission = cohort.admit("team-a", POOL, Resources(gpu=8))

    # Then they fit its nominal quota
    assert admission.kind is AdmissionKind.WITHIN_NOMINAL
    assert admission.borrowed == {}


def test_beyond_nominal_borrows_idle_quota_from_the_lowest_priority_lender_first() -> None:
    # Given three teams in a cohort; team-c at its nominal quota, the others idle
    quotas = [
        quota("team-a", 8, priority=100),
        quota("team-b", 8, priority=10),
        quota("team-c", 8, borrowing_limit=12),
    ]
    cohort = Cohort(quotas, usage(**{"team-c": 8}))

    # When team-c asks for 12 more
    admission = cohort.admit("team-c", POOL, Resources(gpu=12))

    # Then it borrows 12: 8 from team-b (priority 10) first, then 4 from team-a
    assert admission.kind is AdmissionKind.BORROWING
    assert admission.borrowed == {GPU: Decimal(12)}
    assert admission.lenders == {GPU: {"team-b": Decimal(8), "team-a": Decimal(4)}}


def test_borrowing_past_the_limit_is_refused_naming_quota_flavor_and_resource() -> None:
    cohort = Cohort([quota("team-a", 32), quota("team-b", 16, borrowing_limit=4)], {})

    with pytest.raises(QuotaExceeded) as refused:
        cohort.admit("team-b", POOL, Resources(gpu=21))

    assert (refused.value.quota, refused.value.flavor, refused.value.resource) == (
        "team-b",
        POOL,
        GPU,
    )
    assert "nominalQuota + borrowingLimit 20" in str(refused.value)
    assert refused.value.code == "QuotaExceeded"
    assert refused.value.reclaim == {}


def test_a_quota_that_does_not_borrow_stops_at_its_nominal_quota() -> None:
    cohort = Cohort([quota("team-a", 32), quota("team-b", 16, borrowing=False)], {})

    with pytest.raises(QuotaExceeded, match="over nominalQuota 16"):
        cohort.admit("team-b", POOL, Resources(gpu=17))


def test_borrowing_is_refused_when_the_cohort_has_nothing_idle() -> None:
    # Given team-a uses all its quota
    cohort = Cohort([quota("team-a", 8), quota("team-b", 8)], usage(**{"team-a": 8, "team-b": 8}))

    with pytest.raises(QuotaExceeded, match="no idle quota to lend"):
        cohort.admit("team-b", POOL, Resources(gpu=1))


def test_lending_limit_keeps_part_of_a_quota_for_its_owner() -> None:
    # Given team-a lends at most 2 of its 8 GPUs
    quotas = [quota("team-a", 8, lending_limit=2), quota("team-b", 8)]
    cohort = Cohort(quotas, usage(**{"team-b": 8}))

    # When team-b borrows 2, and then asks for 1 more
    assert cohort.admit("team-b", POOL, Resources(gpu=2)).borrowed == {GPU: Decimal(2)}
    borrowed = Cohort(quotas, usage(**{"team-b": 10}))

    # Then the third is refused: the rest of team-a's quota is not lendable
    with pytest.raises(QuotaExceeded):
        borrowed.admit("team-b", POOL, Resources(gpu=1))
    assert borrowed.admit("team-a", POOL, Resources(gpu=6)).kind is AdmissionKind.WITHIN_NOMINAL


def test_a_lender_whose_quota_is_lent_out_is_told_what_to_reclaim() -> None:
    # Given team-b borrowed 8 of team-a's 12 idle GPUs: 4 of the cohort's 24 are free
    quotas = [quota("team-a", 16, reclaim="LowerPriority", priority=100), quota("team-b", 8)]
    cohort = Cohort(quotas, usage(**{"team-a": 4, "team-b": 16}))

    # When team-a asks for 8 within its nominal quota
    with pytest.raises(QuotaExceeded) as refused:
        cohort.admit("team-a", POOL, Resources(gpu=8))

    # Then the cohort's total would be exceeded: 4 must come back first
    assert refused.value.reclaim == {GPU: Decimal(4)}
    assert "lent out" in str(refused.value)


def instance(name: str, requester: str, gpu: int, at: str) -> QuotaInstance:
    return QuotaInstance(name, requester, POOL, Resources(gpu=gpu, instances=1), at)


def test_reclaim_releases_the_lowest_priority_newest_borrowed_instances() -> None:
    # Given team-a (priority 100) lent 8 GPUs to team-b (10) and 8 to team-c (50)
    quotas = [
        quota("team-a", 16, priority=100, reclaim="LowerPriority"),
        quota("team-b", 4, priority=10),
        quota("team-c", 4, priority=50),
    ]
    running = [
        instance("i-b-old", "team-b", 4, "2026-11-20T10:00:00Z"),
        instance("i-b-mid", "team-b", 4, "2026-11-21T10:00:00Z"),
        instance("i-b-new", "team-b", 4, "2026-11-22T10:00:00Z"),
        instance("i-c-old", "team-c", 4, "2026-11-20T09:00:00Z"),
        instance("i-c-new", "team-c", 4, "2026-11-22T11:00:00Z"),
        instance("i-c-newest", "team-c", 4, "2026-11-22T12:00:00Z"),
    ]
    cohort = Cohort(quotas, usage(**{"team-b": 12, "team-c": 12}))

    # When team-a needs 12 back
    chosen = cohort.reclaim("team-a", POOL, {GPU: Decimal(12)}, running)

    # Then team-b's two newest go first (its oldest is within its own nominal), then team-c's newest
    assert chosen is not None
    assert [i.instance_id for i in chosen] == ["i-b-new", "i-b-mid", "i-c-newest"]


def test_reclaim_respects_the_lenders_policy() -> None:
    running = [instance("i-b", "team-b", 4, "2026-11-22T10:00:00Z")]
    used = usage(**{"team-b": 8})
    for policy, priority, expected in (
        ("Never", 100, None),
        ("LowerPriority", 10, None),  # team-b's priority is not lower
        ("LowerPriority", 100, ["i-b"]),
        ("Any", 10, ["i-b"]),
    ):
        quotas = [
            quota("team-a", 8, priority=priority, reclaim=policy),
            quota("team-b", 4, priority=10),
        ]
        chosen = Cohort(quotas, used).reclaim("team-a", POOL, {GPU: Decimal(4)}, running)
        assert (None if chosen is None else [i.instance_id for i in chosen]) == expected, policy


def test_a_reclaim_plan_is_enforced_as_the_policy_allows_and_otherwise_only_asked() -> None:
    running = [instance("i-b", "team-b", 4, "2026-11-22T10:00:00Z")]
    used = usage(**{"team-b": 8})
    for policy, priority, enforced in (
        ("Never", 100, False),
        ("LowerPriority", 10, False),  # team-b's priority is not lower: only asked
        ("LowerPriority", 100, True),
        ("Any", 10, True),
    ):
        quotas = [
            quota("team-a", 8, priority=priority, reclaim=policy),
            quota("team-b", 4, priority=10),
        ]
        plan = Cohort(quotas, used).reclaim_plan("team-a", POOL, {GPU: Decimal(4)}, running)
        assert plan is not None, policy
        assert ([i.instance_id for i in plan.instances], plan.enforced) == (["i-b"], enforced)
    # Whatever the policy, never within a borrower's own nominal quota: no plan at all
    quotas = [quota("team-a", 8, reclaim="Any"), quota("team-b", 6)]
    whole = [instance("i-b", "team-b", 8, "2026-11-22T10:00:00Z")]
    cohort = Cohort(quotas, usage(**{"team-b": 8}))
    assert cohort.reclaim_plan("team-a", POOL, {GPU: Decimal(2)}, whole) is None


def test_releasable_keeps_what_an_owner_no_longer_borrows() -> None:
    # Given team-b (nominal 4 GPUs) named for two 4-GPU instances, but now using only 8
    quotas = [quota("team-a", 8, reclaim="Any"), quota("team-b", 4)]
    named = [
        instance("i-new", "team-b", 4, "2026-11-22T11:00:00Z"),
        instance("i-old", "team-b", 4, "2026-11-22T10:00:00Z"),
    ]
    cohort = Cohort(quotas, usage(**{"team-b": 8}))
    # Then only the first still borrowed goes; the second is within its nominal quota now
    assert [i.instance_id for i in cohort.releasable(POOL, [GPU], named)] == ["i-new"]
    # and when team-b borrows 8, both go
    wider = Cohort(quotas, usage(**{"team-b": 12}))
    assert [i.instance_id for i in wider.releasable(POOL, [GPU], named)] == ["i-new", "i-old"]


def test_reclaim_never_takes_an_instance_that_is_partly_within_nominal() -> None:
    # Given team-b borrows 2 GPUs, on one 8-GPU instance
    quotas = [quota("team-a", 8, reclaim="Any"), quota("team-b", 6)]
    running = [instance("i-b", "team-b", 8, "2026-11-22T10:00:00Z")]

    chosen = Cohort(quotas, usage(**{"team-b": 8})).reclaim(
        "team-a", POOL, {GPU: Decimal(2)}, running
    )

    # Then nothing is released: 6 of its GPUs are team-b's own nominal quota
    assert chosen is None


def test_quotas_without_a_cohort_neither_lend_nor_borrow() -> None:
    quotas = [quota("team-a", 8, cohort=None), quota("team-b", 8, cohort=None)]
    team_a = Cohort.of(quotas[0], quotas, usage(**{"team-b": 0}))

    assert list(team_a.quotas) == ["team-a"]
    with pytest.raises(QuotaExceeded, match="over nominalQuota 8"):
        team_a.admit("team-a", POOL, Resources(gpu=9))


def test_a_resource_the_quota_does_not_cover_is_not_limited() -> None:
    cohort = Cohort([quota("team-a", 8)], {})

    admission = cohort.admit("team-a", POOL, Resources(gpu=8, cpu=Decimal(1000), instances=50))

    assert admission.kind is AdmissionKind.WITHIN_NOMINAL


def test_every_covered_resource_is_checked() -> None:
    cohort = Cohort([quota("team-a", 64, instances=2, cohort=None)], {})

    with pytest.raises(QuotaExceeded) as refused:
        cohort.admit("team-a", POOL, Resources(gpu=24, instances=3))

    assert refused.value.resource == INSTANCES


def test_a_group_limit_caps_use_across_pools() -> None:
    # Given a budget of 16 GPUs across two pools, each of which alone may take all of it
    document = {
        "apiVersion": "capacity-launcher/v1",
        "kind": "CapacityQuota",
        "metadata": {"name": "team-a"},
        "spec": {
            "requesters": ["team-a"],
            "resourceGroups": [
                {
                    "coveredResources": [GPU],
                    "limits": {GPU: "16"},
                    "flavors": [
                        {"name": "pool-a", "resources": [{"name": GPU, "nominalQuota": "16"}]},
                        {"name": "pool-b", "resources": [{"name": GPU, "nominalQuota": "16"}]},
                    ],
                }
            ],
        },
    }
    budget = parse_quota(document)
    cohort = Cohort([budget], {("team-a", "pool-a"): Resources(gpu=12)})

    # Then pool-b takes 4 but not 5
    assert cohort.admit("team-a", "pool-b", Resources(gpu=4)).kind is AdmissionKind.WITHIN_NOMINAL
    with pytest.raises(QuotaExceeded, match="across NodePools pool-a, pool-b"):
        cohort.admit("team-a", "pool-b", Resources(gpu=5))


# -- properties -------------------------------------------------------------------------------


@dataclass
class World:
    """A cohort's quotas and the instances admitted so far, replayed through ``admit``."""

    quotas: list[CapacityQuota]
    running: list[QuotaInstance] = field(default_factory=list)
    clock: int = 0

    def usage(self) -> dict[UsageKey, Resources]:
        used: dict[UsageKey, Resources] = {}
        for i in self.running:
            key = (i.requester, i.flavor)
            used[key] = used.get(key, Resources.ZERO) + i.resources
        return used

    def cohort(self) -> Cohort:
        return Cohort(self.quotas, self.usage())

    def launch(self, requester: str, each: Resources, count: int) -> None:
        for _ in range(count):
            self.clock += 1
            hours, seconds = divmod(self.clock, 3600)
            at = f"2026-11-22T{hours:02d}:{seconds // 60:02d}:{seconds % 60:02d}Z"
            self.running.append(QuotaInstance(f"i-{self.clock}", requester, POOL, each, at))


quota_terms = st.fixed_dictionaries(
    {
        "gpus": st.integers(0, 24),
        "priority": st.integers(0, 3),
        "borrowing": st.booleans(),
        "borrowing_limit": st.none() | st.integers(0, 16),
        "lending_limit": st.none() | st.integers(0, 24),
        "instances": st.none() | st.integers(0, 6),
        "reclaim": st.sampled_from(["Never", "LowerPriority", "Any"]),
    }
)
steps = st.lists(
    st.tuples(
        st.integers(0, 3),  # which quota (mod count)
        st.sampled_from([1, 2, 4, 8]),  # GPUs per instance
        st.integers(1, 3),  # instances
        st.booleans(),  # release the oldest instance first
    ),
    min_size=1,
    max_size=30,
)


def _world(terms: list[dict[str, Any]]) -> World:
    quotas = []
    for index, term in enumerate(terms):
        term = dict(term)
        if not term["borrowing"]:
            term["borrowing_limit"] = None
        if term["lending_limit"] is not None:
            term["lending_limit"] = min(term["lending_limit"], term["gpus"])
        quotas.append(quota(f"team-{index}", **term))
    return World(quotas)


def _most(q: CapacityQuota, resource: str) -> Decimal | None:
    flavor = q.flavor(POOL)
    assert flavor is not None
    term = flavor.resource(resource)
    if term is None:
        return None
    if not q.spec.allow_borrowing:
        return term.nominal_quota
    return None if term.borrowing_limit is None else term.nominal_quota + term.borrowing_limit


def _check_invariants(world: World) -> None:
    cohort = world.cohort()
    for resource in (GPU, INSTANCES):
        ledger = cohort.ledger(POOL, resource)
        # Never over nominal + borrowingLimit
        for q in world.quotas:
            bound = _most(q, resource)
            if bound is not None:
                assert cohort.used(q.name, POOL).amount(resource) <= bound
        # The cohort never runs more than the sum of its members' nominal quotas
        total = sum((ledger.used[name] for name in ledger.terms), Decimal(0))
        nominal = sum((t.nominal_quota for t in ledger.terms.values()), Decimal(0))
        assert total <= nominal
        assert ledger.pool_used <= ledger.pool


@settings(max_examples=200, deadline=None)
@given(terms=st.lists(quota_terms, min_size=1, max_size=4), plan=steps)
def test_admission_keeps_every_quota_and_the_cohort_within_bounds(
    terms: list[dict[str, Any]], plan: list[tuple[int, int, int, bool]]
) -> None:
    world = _world(terms)
    for which, per_instance, count, release in plan:
        if release and world.running:
            world.running.pop(0)
        q = world.quotas[which % len(world.quotas)]
        each = Resources(gpu=per_instance, instances=1)
        try:
            admission = world.cohort().admit(q.name, POOL, each * count)
        except QuotaExceeded:
            continue
        event(f"admitted {admission.kind}")
        world.launch(q.spec.requesters[0], each, count)
        _check_invariants(world)


@settings(max_examples=200, deadline=None)
@given(terms=st.lists(quota_terms, min_size=2, max_size=4), plan=steps)
def test_reclaim_takes_only_borrowed_quota_and_then_admits_the_lender(
    terms: list[dict[str, Any]], plan: list[tuple[int, int, int, bool]]
) -> None:
    world = _world(terms)
    for which, per_instance, count, _ in plan:
        q = world.quotas[which % len(world.quotas)]
        each = Resources(gpu=per_instance, instances=1)
        try:
            world.cohort().admit(q.name, POOL, each * count)
        except QuotaExceeded as refused:
            if not refused.reclaim:
                continue
            cohort = world.cohort()
            chosen = cohort.reclaim(q.name, POOL, refused.reclaim, world.running)
            if chosen is None:
                continue
            event("reclaimed")
            _check_reclaim(world, cohort, q, chosen, refused.reclaim)
            ids = {i.instance_id for i in chosen}
            world.running = [i for i in world.running if i.instance_id not in ids]
            # Then the lender's request fits once the borrowed instances are released
            world.cohort().admit(q.name, POOL, each * count)
        world.launch(q.spec.requesters[0], each, count)
        _check_invariants(world)


def _check_reclaim(
    world: World,
    cohort: Cohort,
    lender: CapacityQuota,
    chosen: list[QuotaInstance],
    short: dict[str, Decimal],
) -> None:
    owners = {r: q for q in world.quotas for r in q.spec.requesters}
    policy = lender.spec.preemption.reclaim_within_cohort
    assert policy != "Never"
    for resource in short:
        ledger = cohort.ledger(POOL, resource)
        released: dict[str, Decimal] = {}
        for victim in chosen:
            owner = owners[victim.requester]
            assert owner.name != lender.name
            if policy == "LowerPriority":
                assert owner.spec.priority < lender.spec.priority
            if owner.name in ledger.terms:
                released[owner.name] = released.get(owner.name, Decimal(0)) + (
                    victim.resources.amount(resource)
                )
        # Never within a borrower's own nominal quota
        for name, amount in released.items():
            assert amount <= ledger.borrowed(name)


@settings(max_examples=200, deadline=None)
@given(
    nominal=st.integers(0, 12),
    lender=st.integers(0, 12),
    used=st.integers(0, 12),
    wanted=st.integers(1, 8),
    least=st.integers(1, 8),
)
def test_most_admitted_is_the_largest_admitted_count_from_min_count(
    nominal: int, lender: int, used: int, wanted: int, least: int
) -> None:
    cohort = Cohort(
        [quota("team-a", nominal, borrowing_limit=3), quota("team-b", lender)],
        usage(**{"team-a": min(used, nominal)}),
    )
    one = gpus(1)

    def admits(n: int) -> bool:
        try:
            cohort.admit("team-a", POOL, one * n)
        except QuotaExceeded:
            return False
        return True

    if not admits(least):
        with pytest.raises(QuotaExceeded):
            most_admitted(cohort, "team-a", POOL, one, wanted, least)
        return
    found = most_admitted(cohort, "team-a", POOL, one, wanted, least)
    top = max(wanted, least)
    assert found == max(n for n in range(least, top + 1) if admits(n))


def test_a_pool_quotas_name_is_only_for_the_requesters_they_cover() -> None:
    quotas = [quota("team-a", 4)]
    assert governing(quotas, "team-a", POOL) is quotas[0]
    assert governing(quotas, "team-z", "other-pool") is None
    for stranger in ("team-z", None):
        with pytest.raises(QuotaExceeded) as refused:
            governing(quotas, stranger, POOL)
        assert (refused.value.quota, refused.value.flavor) == (None, POOL)
        assert "team-a" in refused.value.reason
