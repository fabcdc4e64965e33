"""A pool's members are held at a quota generation (domain/apis/quota_sets.py): an admission
there holds them first when an apply or delete naming the pool came since (docs/quotas.md,
"Members held after an apply")."""

from __future__ import annotations

from capacity_launcher.domain.apis.quota_sets import QuotaSet


def test_members_held_behind_the_pools_generation_are_not_current_until_noted() -> None:
    # Given quotas read at pool generations general 3 and spare 1, general's members held at 2
    quotas = QuotaSet(7, pool_generations={"general": 3, "spare": 1}, pool_holds={"general": 2})
    # Then general's are behind (an apply naming it since), and spare's never noted (0 < 1)
    assert not quotas.holds_current("general")
    assert not quotas.holds_current("spare")
    # and a pool no quota ever named (generation 0) is current
    assert quotas.holds_current("gpu")
    # When general's are noted held at 3
    held = quotas.members_held("general", 3)
    # Then they are current there, and nothing else changed
    assert held.holds_current("general") and not held.holds_current("spare")
    assert held.pool_generations == quotas.pool_generations
    assert quotas.holds_current("general") is False  # the set noted is a new one


def test_a_note_for_another_generation_says_nothing_of_this_copy() -> None:
    quotas = QuotaSet(7, pool_generations={"general": 3}, pool_holds={"general": 2})
    # A note made at generation 4 (a newer apply) or 2 does not make this copy's 3 current
    assert quotas.members_held("general", 4) is quotas
    assert quotas.members_held("general", 2) is quotas
    # and quotas read from no store have nothing to hold
    assert QuotaSet(None).holds_current("general")
