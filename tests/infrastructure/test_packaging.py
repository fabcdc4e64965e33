"""`pip install .` gives a working client and CLI: every package is listed (subpackages too),
and every third-party module the shipped code imports is a declared runtime dependency (the local
cloud's, of the `local` extra)."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
FIRST_PARTY = {"capacity_launcher", "capacity_launcher_cli", "capacity_launcher_client",
               "local_cloud", "moto_capacity"}  # fmt: skip
# What runs without the `local` extra: the client, the CLI and the layer's package.
RUNTIME = ("capacity_launcher", "capacity_launcher_client", "capacity_launcher_cli")
LOCAL = ("local_cloud", "moto_capacity")


def _name(requirement: str) -> str:
    return re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _package_root(package: str) -> Path:
    return REPO / PROJECT["tool"]["setuptools"]["package-dir"][package]


def _imported_distributions(package: str) -> set[str]:
    modules: set[str] = set()
    for source in _package_root(package).rglob("*.py"):
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                modules |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                modules.add(node.module.split(".")[0])
    third_party = modules - FIRST_PARTY - set(sys.stdlib_module_names) - {"__future__"}
    found = importlib.metadata.packages_distributions()
    return {_name(d) for module in third_party for d in found.get(module, [module])}


def _with_requirements(names: set[str]) -> set[str]:
    """The names and what they require (their own runtime requirements, and extras named)."""
    allowed = set(names)
    for name in names:
        for requirement in importlib.metadata.requires(name) or []:
            allowed.add(_name(requirement))
    return allowed


def test_every_package_and_subpackage_is_listed() -> None:
    listed = set(PROJECT["tool"]["setuptools"]["packages"])
    for top in PROJECT["tool"]["setuptools"]["package-dir"]:
        root = _package_root(top)
        found = {
            ".".join((top, *init.parent.relative_to(root).parts))
            for init in root.rglob("__init__.py")
        }
        assert found <= listed, sorted(found - listed)


def test_what_the_client_and_the_cli_import_is_a_runtime_dependency() -> None:
    declared = {_name(r) for r in PROJECT["project"]["dependencies"]}

    imported = set().union(*(_imported_distributions(p) for p in RUNTIME))

    assert imported, "the packages import third-party modules: the check must see them"
    assert imported <= declared, sorted(imported - declared)


def test_what_the_local_cloud_imports_comes_with_the_local_extra() -> None:
    declared = {_name(r) for r in PROJECT["project"]["dependencies"]}
    local = {_name(r) for r in PROJECT["project"]["optional-dependencies"]["local"]}

    imported = set().union(*(_imported_distributions(p) for p in LOCAL))

    assert "moto" in imported
    assert imported <= _with_requirements(declared | local), sorted(
        imported - _with_requirements(declared | local)
    )
