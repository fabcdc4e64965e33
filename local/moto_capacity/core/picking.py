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

A plain dict's structure is also walked by the keys it holds (`walking_dicts_by_their_keys`):
moto asks each member of the shape in turn, and a DynamoDB attribute value (a structure of ten
members: `S`, `N`, `B`, ... `BOOL`) holds one of them, so a Scan of thousands of items asked ten
times as many members as it answered. The members a dict can hold are known from the keys each
is read from; those whose keys the dict holds are serialized, in the shape's order, read as
moto reads them (the member's first key the dict holds).
"""

from collections.abc import Callable, Generator
from typing import Any

from moto.core import serialize

# (class of the object, shape, its parent, key) -> the keys to try, in moto's order.
_Question = tuple[type, object, object, str]
_REMEMBERED: dict[_Question, tuple[str, ...]] = {}
# (shape, its parent, key) -> the keys a plain dict's member is read from; None: read by moto.
_READ_FROM_DICTS: dict[tuple[object, object, str], tuple[str, ...] | None] = {}
# (structure shape, its parent) -> its members' plan for a plain dict; None: walked by moto.
_DICT_WALKS: dict[tuple[object, object], "_Walk | None"] = {}
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


class _Walk:
    """How a structure's members are read from a plain dict: each member's key, shape and the
    keys it is read from (in the shape's order), and which members each dict key may serve."""

    __slots__ = ("by_key", "members")

    def __init__(self, members: list[tuple[str, Any, tuple[str, ...]]]) -> None:
        self.members = members
        self.by_key: dict[str, tuple[int, ...]] = {}
        for position, (_, _, keys) in enumerate(members):
            for possible in keys:
                self.by_key[possible] = (*self.by_key.get(possible, ()), position)


def walking_dicts_by_their_keys(original: Callable[..., Any]) -> Callable[..., Any]:
    """The hook's replacement for moto's `ResponseSerializer._serialize_type_structure`: a plain
    dict's structure serializes the members whose keys the dict holds (each read from its first
    key the dict holds, None skipped, in the shape's order: what moto's walk of every member
    serializes), where members are read as `reading_dicts_directly` reads them and serialized by
    moto's own `_serialize_structure_member`; anything else walked as moto walks it."""

    def serialize_structure(self: Any, serialized: Any, value: Any, shape: Any, key: str) -> Any:
        picker = self._value_picker
        if (
            type(value) is dict
            and type(picker) is RememberingAttributePicker
            and not picker.response_transformers
            and type(self)._serialize_structure_member is _MEMBER_OF_MOTO
        ):
            walk = _walk(picker, value, shape)
            if walk is not None:
                _serialize_dict(self, serialized, value, shape, key, walk)
                return None
        return original(self, serialized, value, shape, key)

    return serialize_structure


_MEMBER_OF_MOTO = serialize.ResponseSerializer._serialize_structure_member


def _serialize_dict(
    serializer: Any, serialized: Any, value: dict[Any, Any], shape: Any, key: str, walk: _Walk
) -> None:
    wrapper = serializer.MAP_TYPE() if key else serialized
    positions: set[int] = set()
    for held in value:
        served = walk.by_key.get(held) if type(held) is str else None
        if served:
            positions.update(served)
    for position in sorted(positions):
        member_key, member_shape, keys = walk.members[position]
        for possible in keys:
            if possible in value:
                member_value = value[possible]
                if member_value is not None:
                    serializer._serialize(wrapper, member_value, member_shape, member_key)
                break
    if key:
        serializer._default_serialize(serialized, wrapper, shape, key)


def _walk(picker: RememberingAttributePicker, value: dict[Any, Any], shape: Any) -> _Walk | None:
    """The plan of `shape`'s members for a plain dict, or None where moto walks it (a member
    read by moto's picker)."""
    question = (shape, getattr(shape, "parent", None))
    try:
        return _DICT_WALKS[question]
    except KeyError:
        pass
    members: list[tuple[str, Any, tuple[str, ...]]] | None = []
    for member_key, member_shape in shape.members.items():
        member_shape.parent = shape  # as moto's walk sets it, before each member is read
        keys = _dict_keys(picker, value, member_shape, member_key)
        if keys is None or members is None:
            members = None
            continue
        members.append((member_key, member_shape, keys))
    walk = None if members is None else _Walk(members)
    if picker.alias_providers is serialize.DEFAULT_ALIAS_PROVIDERS:
        if len(_DICT_WALKS) >= _MOST_REMEMBERED:
            _DICT_WALKS.clear()
        _DICT_WALKS[question] = walk
    return walk
