"""moto's answers serialized at the cost of their values, not of their keys' aliases.

moto 5.2 serializes every answer by walking the operation's output shape; for each member of
each structure its attribute picker asks six alias providers (the model's name, the shape's name,
prefixes of the parent shape and of the object's class, the object's own `Meta` aliases) which
keys might hold the value, building a provider object per question. A DynamoDB `Scan` of a
thousand items asks that ten times per attribute value (`S`, `N`, `B`, `SS`, ... `NULL`,
`BOOL`): most of the CPU of a large read went into re-deriving the same answer.

The keys a member may be read from depend only on the object's class, the member's shape (its
name, its serialization name, its parent structure) and the member's key, so they are derived
once per such combination and remembered. What the picker then does with them (the first key
whose value the object has wins, then the response transformers) is moto's own code, unchanged,
so every answer is byte for byte what moto sends. Objects with their own `Meta` aliases, and
pickers given other alias providers, are asked as moto asks, every time.
"""

from collections.abc import Callable, Generator
from typing import Any

from moto.core import serialize

# (class of the object, shape, its parent, key) -> the keys to try, in moto's order.
_Question = tuple[type, object, object, str]
_REMEMBERED: dict[_Question, tuple[str, ...]] = {}
# Shapes live as long as the service models that moto caches; a bound all the same, against
# models built for one answer (an error's stand-in operation).
_MOST_REMEMBERED = 200_000


class RememberingAttributePicker(serialize.XFormedAttributePicker):
    """moto's XFormedAttributePicker, remembering the keys it tries for each member."""

    def get_possible_keys(self, context: serialize.AttributePickerContext) -> Generator[str]:
        obj = context.obj
        if self.alias_providers is not serialize.DEFAULT_ALIAS_PROVIDERS or hasattr(obj, "Meta"):
            yield from super().get_possible_keys(context)
            return
        shape = context.shape
        question = (obj.__class__, shape, getattr(shape, "parent", None), context.key)
        keys = _REMEMBERED.get(question)
        if keys is None:
            try:
                keys = tuple(super().get_possible_keys(context))
            except Exception:  # a provider moto would ask only after an earlier key missed
                yield from super().get_possible_keys(context)
                return
            if len(_REMEMBERED) >= _MOST_REMEMBERED:
                _REMEMBERED.clear()
            _REMEMBERED[question] = keys
        yield from keys


def remembering(original: Callable[..., Any]) -> type[RememberingAttributePicker]:
    """The hook's replacement for moto's picker class (`core.patching.hook`)."""
    del original
    return RememberingAttributePicker
