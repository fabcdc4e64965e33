"""An update expression parsed once for its text, not at every use, and copied by unpickling.

moto parses a request's `UpdateExpression` twice for each UpdateItem (`DynamoHandler.update_item`
for the placeholders it names, `DynamoDBBackend.update_item` to validate and run it) and once
more for each update of a transaction, every time from its text: tokens, then the tree (about
8% of an UpdateItem's CPU here; the launcher writes the same few expressions over and over). The
tree is a function of the text alone. moto only reads the tree it gets (`find_clauses`), and
its validator works on a deep copy of it (`Validator.__init__`), which is what it then changes and
runs: so the one tree parsed from a text is handed to each use of that text. A text moto refuses
is parsed (and refused) every time.

That deep copy (`copy.deepcopy` of the tree, its parent links included) cost another 10% of an
UpdateItem: the kept tree is pickled once, and the validator's copy of it is unpickled, the same
objects (pickle and deepcopy both rebuild plain objects by `__reduce_ex__`) at a quarter of the
cost. A tree that does not pickle is deep-copied as moto does.
"""

import pickle
from collections.abc import Callable
from typing import Any

from . import static_checks

# (the parser class, an update expression's text) -> its tree, as moto parsed it
_PARSED: dict[tuple[type, str], Any] = {}
# id of a kept tree -> (the tree, the tree pickled or None where it does not pickle, its key)
_PICKLED: dict[int, tuple[Any, bytes | None, tuple[type, str]]] = {}
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
                _PICKLED.clear()
            _PARSED[key] = tree
            _PICKLED[id(tree)] = (tree, _pickled(tree), key)
        return tree

    return classmethod(parse)


def _pickled(tree: Any) -> bytes | None:
    try:
        return pickle.dumps(tree, pickle.HIGHEST_PROTOCOL)
    except Exception:  # a tree pickle cannot rebuild is deep-copied instead
        return None


class _Kept:
    """A kept tree as moto's validator receives it: its deep copy is the tree unpickled."""

    __slots__ = ("pickled",)

    def __init__(self, pickled: bytes) -> None:
        self.pickled = pickled

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return pickle.loads(self.pickled)  # noqa: S301 - our own bytes, pickled from moto's tree


def copied_by_unpickling(original: Callable[..., None]) -> Callable[..., None]:
    """The hook's replacement for moto's `Validator.__init__`, which keeps a deep copy of the tree
    it is given (and nothing else of it): a kept tree's copy is unpickled, and the checks its text
    has passed are left out (`static_checks.py`)."""

    def __init__(self: Any, expression: Any, *args: Any, **kwargs: Any) -> None:
        kept = _PICKLED.get(id(expression))
        if kept is None or kept[0] is not expression:
            original(self, expression, *args, **kwargs)
            return
        if kept[1] is not None:
            expression = _Kept(kept[1])
        original(self, expression, *args, **kwargs)
        static_checks.skipping_passed(self, kept[2])

    return __init__
