"""Fail on any import circle among the project's own modules (`make lint` runs this).

import-linter's contracts hold the layers apart, but not a circle inside one layer (the domain once
had `config -> quotas -> requester_origins -> config`, closed by an import inside a function).
Every import counts here: module level, inside functions, and under `if TYPE_CHECKING:`, since a
circle of any of them means the modules cannot be understood, or moved, one at a time.

    python -m tests.infrastructure.import_cycles [PACKAGE ...]
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping

import grimp

PACKAGES = (
    "capacity_launcher",
    "moto_capacity",
    "local_cloud",
    "capacity_launcher_cli",
    "capacity_launcher_client",
)


def import_graph(packages: Iterable[str]) -> dict[str, set[str]]:
    """Each module of the packages, and the modules of the packages it imports directly."""
    names = tuple(packages)
    graph = grimp.build_graph(*names, exclude_type_checking_imports=False, cache_dir=None)
    return {
        module: {m for m in graph.find_modules_directly_imported_by(module) if m != module}
        for module in graph.modules
    }


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root not in index:
            _visit(root, graph, index, low, stack, on_stack, found)
    return sorted(sorted(component) for component in found)


def _visit(
    root: str,
    graph: Mapping[str, set[str]],
    index: dict[str, int],
    low: dict[str, int],
    stack: list[str],
    on_stack: set[str],
    found: list[list[str]],
) -> None:
    work = [(root, iter(sorted(graph.get(root, ()))))]
    _enter(root, index, low, stack, on_stack)
    while work:
        node, successors = work[-1]
        successor = next(successors, None)
        if successor is None:
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                _pop_component(node, stack, on_stack, found)
        elif successor not in index:
            _enter(successor, index, low, stack, on_stack)
            work.append((successor, iter(sorted(graph.get(successor, ())))))
        elif successor in on_stack:
            low[node] = min(low[node], index[successor])


def _enter(
    node: str, index: dict[str, int], low: dict[str, int], stack: list[str], on_stack: set[str]
) -> None:
    index[node] = low[node] = len(index)
    stack.append(node)
    on_stack.add(node)


def _pop_component(node: str, stack: list[str], on_stack: set[str], found: list[list[str]]) -> None:
    component = []
    while True:
        member = stack.pop()
        on_stack.discard(member)
        component.append(member)
        if member == node:
            break
    if len(component) > 1:
        found.append(component)


def main(argv: list[str]) -> int:
    packages = argv or list(PACKAGES)
    circles = cycles(import_graph(packages))
    for circle in circles:
        print("import circle: " + " <-> ".join(circle), file=sys.stderr)
    if circles:
        print(f"{len(circles)} import circle(s) in {', '.join(packages)}", file=sys.stderr)
        return 1
    print(f"no import circle in {', '.join(packages)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
