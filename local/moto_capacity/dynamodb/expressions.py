"""An update expression parsed once for its text, not at every use.

moto parses a request's `UpdateExpression` twice for each UpdateItem (`DynamoHandler.update_item`
for the placeholders it names, `DynamoDBBackend.update_item` to validate and run it) and once
more for each update of a transaction, every time from its text: tokens, then the tree (about
8% of an UpdateItem's CPU here; the launcher writes the same few expressions over and over). The
tree is a function of the text alone. moto only reads the tree it gets (`find_clauses`), and
its validator works on a deep copy of it (`Validator.__init__`), which is what it then changes and
runs: so the one tree parsed from a text is handed to each use of that text. A text moto refuses
is parsed (and refused) every time.
"""

from collections.abc import Callable
from typing import Any

# (the parser class, an update expression's text) -> its tree, as moto parsed it
_PARSED: dict[tuple[type, str], Any] = {}
# Distinct texts kept: a service writes a handful; more, and all are parsed again.
_MOST_KEPT = 1024


def parsed_once(original: Any) -> Any:
    """The hook's replacement for moto's `UpdateExpressionParser.make` (a classmethod)."""
    make: Callable[[type, str], Any] = original.__func__

    def parse(cls: type, expression_str: str) -> Any:
        if type(expression_str) is not str:
            return make(cls, expression_str)
        key = (cls, expression_str)
        tree = _PARSED.get(key)
        if tree is None:
            tree = make(cls, expression_str)
            if len(_PARSED) >= _MOST_KEPT:
                _PARSED.clear()
            _PARSED[key] = tree
        return tree

    return classmethod(parse)
