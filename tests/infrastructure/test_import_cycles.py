"""The import-circle check `make lint` runs (import_cycles.py) finds circles, and only circles."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.infrastructure.import_cycles import PACKAGES, cycles, import_graph


def test_a_circle_closed_by_an_import_inside_a_function_is_found() -> None:
    graph = {"d.config": {"d.errors", "d.quotas"}, "d.quotas": {"d.config"}, "d.errors": set()}
    assert cycles(graph) == [["d.config", "d.quotas"]]


def test_two_separate_circles_are_each_reported_and_a_chain_is_not() -> None:
    graph = {"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"e"}, "e": {"c"}, "f": {"a"}}
    assert cycles(graph) == [["a", "b"], ["c", "d", "e"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_a_long_chain_does_not_exhaust_the_stack() -> None:
    graph = {f"m{i}": {f"m{i + 1}"} for i in range(5000)}
    graph["m5000"] = {"m0"}
    assert len(cycles(graph)[0]) == 5001


def test_type_checking_imports_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "circled"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from circled import b\n")
    (package / "b.py").write_text(
        textwrap.dedent(
            """
            from typing import TYPE_CHECKING
            if TYPE_CHECKING:
                from circled import a
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert cycles(import_graph(["circled"])) == [["circled.a", "circled.b"]]


def test_the_project_has_no_import_circle() -> None:
    assert cycles(import_graph(PACKAGES)) == []
