"""The update validator's walks over an expression's tree, without rebuilding a map at each node.

moto validates and runs an UpdateItem's expression with ten processors
(`UpdateExpressionValidator.get_ast_processors`), each walking the whole tree depth first
(`DepthFirstTraverser.traverse_node_recursively`). At every node of every walk it asks the
processor which node classes it processes (`nodes_to_be_processed`, a tuple built from a dict of
bound methods the processor builds again, `_processing_map`), and calls the processor's
`pre_processing_of_child` before each child, a no-op for all but one of them. That bookkeeping,
not the processing, was most of the walks' cost (about 3% of an integration test's CPU here).

Here a walk asks for the classes once, at its start (every moto processor answers the same
classes whatever its state: the map's keys are fixed in its code), and calls
`pre_processing_of_child` only for a processor that defines one. Everything else is moto's, in
moto's order: children left to right, each before its parent, the node handed to moto's `process`
and its answer put in its parent's place.

The nodes' classes are abstract (`abc.ABCMeta`), and each `isinstance` with one went through
`ABCMeta.__instancecheck__`, a Python call: the walks, and `Node.find_clauses` (three whole-tree
searches for each UpdateItem's clause counts, one more for its overlapping paths), answer it once
per concrete class and then from that answer. The answer is the same: moto registers no virtual
subclass of its nodes, so a class is a node's, an `Expression`'s, ... by its bases alone.
"""

from collections.abc import Callable
from typing import Any

from moto.dynamodb.parsing.ast_nodes import (  # type: ignore[attr-defined]
    DepthFirstTraverser,
    Expression,
    Node,
    UpdateExpressionFunction,
)

_NO_PRE_PROCESSING = DepthFirstTraverser.pre_processing_of_child
_RECURSIVELY = DepthFirstTraverser.traverse_node_recursively
# a class -> whether its instances are `Node`s
_IS_NODE: dict[type, bool] = {}
# a class -> whether `find_clauses` looks into its instances (an `Expression`, a function)
_SEARCHED: dict[type, bool] = {}


def _is_node(cls: type) -> bool:
    known = _IS_NODE.get(cls)
    if known is None:
        known = _IS_NODE[cls] = issubclass(cls, Node)
    return known


def walked_once_per_map(original: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """The hook's replacement for moto's `DepthFirstTraverser.traverse`."""

    def traverse(self: Any, node: Any) -> Any:
        if type(self).traverse_node_recursively is not _RECURSIVELY:
            return original(self, node)  # a processor that walks its own way
        kinds = self.nodes_to_be_processed()
        processed: dict[type, bool] = {}  # a class -> whether it is one of `kinds`
        process = self.process
        pre = self.pre_processing_of_child
        if getattr(pre, "__func__", None) is _NO_PRE_PROCESSING:
            pre = None

        def walk(node: Any, child_id: int) -> Any:
            cls = type(node)
            if _is_node(cls):
                parent = node.parent
                children = node.children
                if children is not None:
                    for index, child in enumerate(children):
                        if pre is not None:
                            pre(node, index)
                        walk(child, index)
                matches = processed.get(cls)
                if matches is None:
                    matches = processed[cls] = issubclass(cls, kinds)
                if matches:
                    node = process(node)
                    node.parent = parent
                    if parent:
                        parent.children[child_id] = node
            return node

        return walk(node, -1)

    return traverse


def searched_by_class(original: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """The hook's replacement for moto's `Node.find_clauses`: the clauses of `clause_types` (by
    exact class) among the node's children, and those of the `Expression`s and functions among
    them, in moto's order."""

    def find_clauses(self: Any, clause_types: Any) -> list[Any]:
        clauses: list[Any] = []
        for child in self.children or []:
            cls = type(child)
            if cls in clause_types:
                clauses.append(child)
                continue
            searched = _SEARCHED.get(cls)
            if searched is None:
                searched = _SEARCHED[cls] = issubclass(cls, (Expression, UpdateExpressionFunction))
            if searched:
                clauses.extend(child.find_clauses(clause_types))
        return clauses

    return find_clauses
