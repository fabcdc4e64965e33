"""A condition expression parsed once for its text; each call only puts its names and values in.

moto parses a `ConditionExpression` (and a `FilterExpression`, a `KeyConditionExpression`'s
filter) from its text at every use: the handler parses it for the names and values it uses
(`expr_attr_names_found`), the backend once more for the condition it evaluates
(`ConditionExpressionParser.parse`: a lexer compiling its six patterns for each token, then six
passes over the tokens). The launcher writes the same few conditions over and over.

What the parse makes of a text does not depend on the call's names and values: the parser only
looks each `#name` and `:value` up (`_lookup_expression_attribute_name`/`_value`, in the text's
order, before any pass reads the tokens' structure) and carries what it found in its nodes, which
only the last step reads (`_make_op_condition`, building the condition objects). So the text is
parsed once, by moto's own `parse`, with lookups that answer placeholders and remember the order
they were asked in, and stopped before that last step. A call then looks its names and values up
with moto's own lookups in that same order (a missing one raises what moto raises, at the same
point), puts them in the kept nodes' place, records the names and values found as moto does, and
builds its condition with moto's `_make_op_condition`. A text whose parse fails is parsed by moto
at every call, and so is an empty one (moto answers it without parsing), a parser subclass's, and
anything but a `str`.
"""

from collections.abc import Callable
from typing import Any, NamedTuple

from moto.dynamodb.comparisons import ConditionExpressionParser

# Distinct texts kept: a service writes a handful; more, and all are parsed again.
_MOST_KEPT = 1024


class _Slot:
    """Where a name's or a value's lookup went, in the order the parser asked for them."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index


class _Lookups:
    """The parser's names or values while a text is parsed once: each key asked for is noted,
    and answered by a placeholder."""

    def __init__(self, kind: str, asked: list[tuple[str, str]]) -> None:
        self.kind = kind
        self.asked = asked

    def __getitem__(self, key: str) -> _Slot:
        self.asked.append((self.kind, key))
        return _Slot(len(self.asked) - 1)


class _Parsed(NamedTuple):
    """What a text's parse is, whatever the call's names and values."""

    root: Any  # moto's node tree, placeholders where it looked a name or a value up
    holding: frozenset[int]  # ids of its nodes with a placeholder at or below them
    asked: tuple[tuple[str, str], ...]  # ("name" | "value", key), in the order moto looks them up
    names_found: tuple[str, ...]
    values_found: tuple[str, ...]


class _Stop(Exception):
    """Raised in place of `_make_op_condition` to hand back the parsed tree."""

    def __init__(self, root: Any) -> None:
        self.root = root


# a text -> its parse, or None where moto's parse of it failed
_PARSED: dict[str, _Parsed | None] = {}


def parsed_once(original: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """The hook's replacement for moto's `ConditionExpressionParser.parse`."""

    def parse(self: Any) -> Any:
        text = self.condition_expression
        if type(self) is not ConditionExpressionParser or type(text) is not str or not text:
            return original(self)
        if text in _PARSED:
            kept = _PARSED[text]
        else:
            kept = _parse(original, text)
            if len(_PARSED) >= _MOST_KEPT:
                _PARSED.clear()
            _PARSED[text] = kept
        if kept is None:
            return original(self)
        found = [
            self._lookup_expression_attribute_name(key)
            if kind == "name"
            else self._lookup_expression_attribute_value(key)
            for kind, key in kept.asked
        ]
        self.expr_attr_names_found.extend(kept.names_found)
        self.expr_attr_values_found.extend(kept.values_found)
        return self._make_op_condition(_filled(kept.root, found, kept.holding))

    return parse


def _parse(original: Callable[[Any], Any], text: str) -> _Parsed | None:
    asked: list[tuple[str, str]] = []
    probe = ConditionExpressionParser(
        text,
        _Lookups("name", asked),  # type: ignore[arg-type]
        _Lookups("value", asked),  # type: ignore[arg-type]
    )

    def stop(root: Any) -> Any:
        raise _Stop(root)

    probe._make_op_condition = stop  # type: ignore[method-assign,assignment]
    try:
        original(probe)
    except _Stop as stopped:
        holding: set[int] = set()
        _holding(stopped.root, holding)
        return _Parsed(
            stopped.root,
            frozenset(holding),
            tuple(asked),
            tuple(probe.expr_attr_names_found),
            tuple(probe.expr_attr_values_found),
        )
    except Exception:  # moto refuses the text (or its names): it does so at every call
        return None
    return None  # pragma: no cover - moto's parse always ends in `_make_op_condition`


def _filled(node: Any, found: list[Any], holding: frozenset[int]) -> Any:
    """The kept tree with this call's names and values in their placeholders' place; the nodes
    without a placeholder at or below them (not `holding`) are the kept ones (moto only reads
    them)."""
    if id(node) not in holding:
        return node
    value = node.value
    if type(value) is _Slot:
        value = found[value.index]
    return node._replace(
        value=value, children=[_filled(child, found, holding) for child in node.children]
    )


def _holding(node: Any, into: set[int]) -> bool:
    """Whether a placeholder is at or below this node; notes the ids of those that hold one."""
    below = [_holding(child, into) for child in node.children]
    if type(node.value) is _Slot or any(below):
        into.add(id(node))
        return True
    return False
