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
"""

from collections.abc import Callable
from typing import Any

from moto.dynamodb.parsing.ast_nodes import DepthFirstTraverser, Node  # type: ignore[attr-defined]

_NO_PRE_PROCESSING = DepthFirstTraverser.pre_processing_of_child
_RECURSIVELY = DepthFirstTraverser.traverse_node_recursively


def walked_once_per_map(original: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """The hook's replacement for moto's `DepthFirstTraverser.traverse`."""

    def traverse(self: Any, node: Any) -> Any:
        if (
            type(self).traverse_node_recursively
            is not DepthFirstTraverser.traverse_node_recursively
        ):
            return original(self, node)  # a processor that walks its own way
        kinds = self.nodes_to_be_processed()
        process = self.process
        pre = self.pre_processing_of_child
        if getattr(pre, "__func__", None) is _NO_PRE_PROCESSING:
            pre = None

        def walk(node: Any, child_id: int) -> Any:
            if isinstance(node, Node):
                parent = node.parent
                children = node.children
                if children is not None:
                    for index, child in enumerate(children):
                        if pre is not None:
                            pre(node, index)
                        walk(child, index)
                if isinstance(node, kinds):
                    node = process(node)
                    node.parent = parent
                    if parent:
                        parent.children[child_id] = node
            return node

        return walk(node, -1)

    return traverse
