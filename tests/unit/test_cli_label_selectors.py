"""`get -l`: kubectl's equality-based selectors on kept metadata.labels."""

from __future__ import annotations

import argparse

import pytest

from capacity_launcher_cli.label_selectors import matches, selector

LABELS = {"team": "ml", "tier": "gpu"}


@pytest.mark.parametrize(
    ("text", "selected"),
    [
        ("team=ml", True),
        ("team==ml", True),
        ("team=ml,tier=gpu", True),
        ("team=ml,tier=cpu", False),
        ("team!=batch", True),
        ("team!=ml", False),
        ("owner!=x", True),  # as kubectl: no such label is not equal
        ("tier", True),
        ("owner", False),
        ("!owner", True),
        ("!team", False),
        ("karpenter.sh/nodepool=x", False),
    ],
)
def test_a_selector_selects_as_kubectl_does(text: str, selected: bool) -> None:
    assert matches(LABELS, selector(text)) is selected


def test_a_document_without_labels_is_selected_only_by_absence() -> None:
    assert matches(None, selector("!team"))
    assert not matches(None, selector("team=ml"))


@pytest.mark.parametrize("text", ["team in (ml,batch)", "=ml", "bad key=x"])
def test_a_selector_outside_the_subset_is_a_usage_error(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="expected key=value, key!=value"):
        selector(text)
