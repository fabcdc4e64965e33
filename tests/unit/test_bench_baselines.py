"""A benchmark measured beside its baseline runs its own file over the baseline's tree
(`benchmarks/revisions.measured_in`: this file, the baseline's layers, local, tests and
benchmarks): every module of the project it imports when loaded must be in that tree, or the
baseline's measurement dies on an ImportError before it measures anything. What only this
revision has is imported inside the functions that use it."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# Where `measured_in` puts a tree's code on the path.
ROOTS = ("layers/core", "local", ".")


def _baseline(tree: ast.Module) -> str | None:
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "BASELINE" for t in node.targets)
            and isinstance(node.value, ast.Constant)
        ):
            return str(node.value.value)
    return None


def _files(module: str) -> tuple[str, ...]:
    """Where `module` stands in a tree, by root: its file or its package's `__init__.py`."""
    path = module.replace(".", "/")
    return tuple(
        str(Path(root) / name) for root in ROOTS for name in (f"{path}.py", f"{path}/__init__.py")
    )


def _loaded(tree: ast.Module) -> list[str]:
    """The project's modules the file imports when it is loaded (at its top level)."""
    found = []
    for node in tree.body:
        names = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        found += [n for n in names if any((REPO / f).is_file() for f in _files(n))]
    return found


def _measured_beside_a_baseline() -> list[Path]:
    return sorted(
        p
        for p in (REPO / "benchmarks").glob("*.py")
        if "measured_in(root, __file__" in p.read_text()
        and _baseline(ast.parse(p.read_text())) is not None
    )


def _tree(revision: str) -> set[str] | None:
    listed = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", revision],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    return set(listed.stdout.splitlines()) if listed.returncode == 0 else None


def test_there_are_benchmarks_measured_beside_a_baseline() -> None:
    assert len(_measured_beside_a_baseline()) >= 3


@pytest.mark.parametrize("path", _measured_beside_a_baseline(), ids=lambda p: p.stem)
def test_what_a_benchmark_imports_when_loaded_is_in_its_baselines_tree(path: Path) -> None:
    tree = ast.parse(path.read_text())
    revision = _baseline(tree)
    assert revision is not None
    files = _tree(revision)
    if files is None:
        pytest.skip(f"{revision} is not in this clone's history")
    missing = [m for m in _loaded(tree) if not any(f in files for f in _files(m))]
    assert missing == [], f"{path.name} imports at its top what {revision} does not have"
