"""Which launch templates no NodeClass can use any more (domain/capacity/template_lifecycle.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from capacity_launcher.domain.capacity.template_lifecycle import (
    ManagedTemplate,
    Unusable,
    target_tag,
    unusable,
)

NOW = datetime(2026, 11, 26, 12, tzinfo=UTC)
GRACE = timedelta(hours=1)


def _t(
    name: str,
    age_hours: float,
    node_class: str | None = "a",
    basis: str | None = "b1",
    target: str | None = None,
    used_hours_ago: float | None = None,
) -> ManagedTemplate:
    used = None if used_hours_ago is None else NOW - timedelta(hours=used_hours_ago)
    return ManagedTemplate(name, NOW - timedelta(hours=age_hours), node_class, basis, target, used)


def _why(
    templates: list[ManagedTemplate],
    classes: tuple[str, ...] = ("a",),
    targets: tuple[str, ...] = (),
) -> dict[str, Unusable]:
    return {t.name: why for t, why in unusable(templates, classes, targets, NOW, GRACE)}


def test_a_deleted_node_class_frees_its_settled_templates_first() -> None:
    found = unusable(
        [_t("keep", 5), _t("old", 5, "gone"), _t("fresh", 0.5, "gone")], ["a"], [], NOW, GRACE
    )
    assert [(t.name, why) for t, why in found] == [("old", Unusable.NODE_CLASS_DELETED)]


def test_a_newer_basis_supersedes_the_old_only_once_it_is_an_hour_old() -> None:
    old = [_t("b1-x", 48), _t("b1-y", 30)]
    assert _why([*old, _t("b2-x", 0.5, basis="b2")]) == {}
    assert _why([*old, _t("b2-x", 2, basis="b2")]) == {
        "b1-x": Unusable.SUPERSEDED,
        "b1-y": Unusable.SUPERSEDED,
    }
    # a late template of the old basis (a launcher still on it for a while) does not make it
    # current again: the new basis is in use (marked used since)
    current = _t("b2-x", 2, basis="b2", used_hours_ago=0.1)
    assert "b1-late" in _why([*old, current, _t("b1-late", 1.5)])


def test_a_reverted_node_class_keeps_the_template_in_use_and_frees_the_one_it_replaced() -> None:
    # Given content b1 (two days old), changed to b2 two hours ago, and reverted to b1 within
    # the hour: launchers found b1's template again and marked it used minutes ago
    b1 = _t("b1-x", 48, used_hours_ago=0.2)
    b2 = _t("b2-x", 2, basis="b2", used_hours_ago=1.5)
    # Then the template in use stays, and the one no launch has used for an hour goes
    assert _why([b1, b2]) == {"b2-x": Unusable.SUPERSEDED}
    # and within the hour of its last use, b2's stays too
    assert _why([b1, _t("b2-x", 2, basis="b2", used_hours_ago=0.5)]) == {}


def test_a_template_in_use_is_never_superseded_by_a_newer_one_unused() -> None:
    # A launcher on stale configuration made b2 once; every launch since uses b1
    assert _why([_t("b1-x", 48, used_hours_ago=0.1), _t("b2-x", 3, basis="b2")]) == {
        "b2-x": Unusable.SUPERSEDED
    }


def test_templates_without_a_basis_tag_are_superseded_once_settled() -> None:
    assert _why([_t("legacy", 2, basis=None), _t("new", 0.1, basis=None)]) == {
        "legacy": Unusable.SUPERSEDED
    }


def test_a_template_whose_target_is_gone_is_unusable() -> None:
    templates = [_t("cr-live", 2, target="cr-1"), _t("cr-gone", 2, target="cr-2")]
    assert _why(templates, targets=("cr-1",)) == {"cr-gone": Unusable.TARGET_GONE}


def test_long_group_arns_are_compared_by_their_hash() -> None:
    arn = "arn:aws:resource-groups:us-east-1:123456789012:group/" + "g" * 300
    assert len(target_tag(arn)) <= 256 and target_tag(arn) != target_tag(arn + "x")
    assert _why([_t("group", 2, target=target_tag(arn))], targets=(arn,)) == {}
