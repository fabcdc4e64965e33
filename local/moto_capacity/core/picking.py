"""moto's answers serialized at the cost of their values, not of their keys' aliases.

moto 5.2 serializes every answer by walking the operation's output shape; for each member of
each structure its attribute picker asks six alias providers (the model's name, the shape's name,
prefixes of the parent shape and of the object's class, the object's own `Meta` aliases) which
keys might hold the value, building a provider object per question. A DynamoDB `Scan` of a
thousand items asks that ten times per attribute value (`S`, `N`, `B`, `SS`, ... `NULL`,
`BOOL`): most of the CPU of a large read went into re-deriving the same answer.

The keys a member may be read from depend only on the object's class, the member's shape (its
name, its serialization name, its parent structure) and the member's key, so they are derived
once per such combination and remembered (`RememberingAttributePicker`). What the picker then
does with them (the first key whose value the object has wins, then the response transformers)
is moto's own code, unchanged. A plain dict (DynamoDB's items, most JSON answers) is read
straight from those keys (`reading_dicts_directly`), as moto's picker reads it, when the answer
has no response transformers. Every answer is byte for byte what moto sends. Objects with their
own `Meta` aliases, and pickers given other alias providers, are asked as moto asks, every time.
"""

from collections.abc import Callable, Generator
from typing import Any

from moto.core import serialize

# (class of the object, shape, its parent, key) -> the keys to try, in moto's order.
_Question = tuple[type, object, object, str]
_REMEMBERED: dict[_Question, tuple[str, ...]] = {}
# (shape, its parent, key) -> the keys a plain dict's member is read from; None: read by moto.
_READ_FROM_DICTS: dict[tuple[object, object, str], tuple[str, ...] | None] = {}
# Shapes live as long as the service models that moto caches; a bound all the same, against
# models built for one answer (an error's stand-in operation).
_MOST_REMEMBERED = 200_000


class RememberingAttributePicker(serialize.XFormedAttributePicker):
    """moto's XFormedAttributePicker, remembering the keys it tries for each member."""

    def get_possible_keys(self, context: serialize.AttributePickerContext) -> Generator[str]:
        keys = self.remembered_keys(context.obj, context.shape, context.key)
        if keys is None:
            yield from super().get_possible_keys(context)
            return
        yield from keys

    def remembered_keys(self, obj: Any, shape: Any, key: str) -> tuple[str, ...] | None:
        """The keys moto tries for `key` of `obj`, in its order; None where moto must be asked
        each time (an object's own `Meta` aliases, other alias providers)."""
        if self.alias_providers is not serialize.DEFAULT_ALIAS_PROVIDERS or hasattr(obj, "Meta"):
            return None
        question = (obj.__class__, shape, getattr(shape, "parent", None), key)
        keys = _REMEMBERED.get(question)
        if keys is None:
            context = serialize.AttributePickerContext(obj=obj, key=key, shape=shape)
            try:
                keys = tuple(super().get_possible_keys(context))
            except Exception:  # a provider moto would ask only after an earlier key missed
                return None
            if len(_REMEMBERED) >= _MOST_REMEMBERED:
                _REMEMBERED.clear()
            _REMEMBERED[question] = keys
        return keys


def remembering(original: Callable[..., Any]) -> type[RememberingAttributePicker]:
    """The hook's replacement for moto's picker class (`core.patching.hook`)."""
    del original
    return RememberingAttributePicker


def reading_dicts_directly(original: Callable[..., Any]) -> Callable[..., Any]:
    """The hook's replacement for moto's `ResponseSerializer.get_value`: a plain dict's member is
    its first remembered key the dict holds (moto's picker: `obj[key]`, the next key on a
    KeyError, None when none is there), without the picker's context and transformers' walk
    where the answer has no transformers; anything else as moto reads it."""

    def get_value(self: Any, value: Any, key: str, shape: Any) -> Any:
        picker = self._value_picker
        if (
            type(value) is dict
            and type(picker) is RememberingAttributePicker
            and not picker.response_transformers
        ):
            keys = _dict_keys(picker, value, shape, key)
            if keys is not None:
                for possible in keys:
                    if possible in value:
                        return value[possible]
                return None
        return original(self, value, key, shape)

    return get_value


def _dict_keys(
    picker: RememberingAttributePicker, value: dict[Any, Any], shape: Any, key: str
) -> tuple[str, ...] | None:
    """The keys a plain dict's `key` is read from (a dict has no `Meta`, and its class is
    dict), or None where moto reads it (a key with a dot is a path to moto's `get_value`)."""
    question = (shape, getattr(shape, "parent", None), key)
    try:
        return _READ_FROM_DICTS[question]
    except KeyError:
        pass
    keys = picker.remembered_keys(value, shape, key)
    if keys is not None and any("." in k for k in keys):
        keys = None
    if picker.alias_providers is serialize.DEFAULT_ALIAS_PROVIDERS:
        if len(_READ_FROM_DICTS) >= _MOST_REMEMBERED:
            _READ_FROM_DICTS.clear()
        _READ_FROM_DICTS[question] = keys
    return keys
