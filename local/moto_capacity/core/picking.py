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
is moto's own code, unchanged. Where no response transformer applies to a member (EC2's apply
to a handful of keys: `CreationDate`, `State`, `Tags`, ...), it is read from those keys without
the context moto's picker builds for each member (a dataclass and the joined key path): a plain
dict (DynamoDB's items, most JSON answers) by `key in dict`, any other object by moto's
`get_value` (`reading_dicts_directly`), as moto's picker reads them. Every answer is byte for
byte what moto sends. Objects with their
own `Meta` aliases, and pickers given other alias providers, are asked as moto asks, every time.

A plain dict's structure is also walked by the keys it holds (`walking_dicts_by_their_keys`):
moto asks each member of the shape in turn, and a DynamoDB attribute value (a structure of ten
members: `S`, `N`, `B`, ... `BOOL`) holds one of them, so a Scan of thousands of items asked ten
times as many members as it answered. The members a dict can hold are known from the keys each
is read from; those whose keys the dict holds are serialized, in the shape's order, read as
moto reads them (the member's first key the dict holds).

Any other object's structure (EC2's instances, interfaces, block devices; the instance-type
catalogue's entries) is walked by a plan kept per (its class, the shape, its parent, the
answer's transformers): each member's shape and the keys it is read from, in the shape's order.
Each member is read from the object as moto's `get_value` reads it (an attribute, or an item of
an object with `__getitem__`; the first key it has wins) and serialized unless None, by moto's
own `_serialize`; a member a transformer may apply to, or read by a dotted path, is read by
moto's `_serialize_structure_member` in its place. moto asked each member through four calls
and a picker's context: a DescribeInstances of 300 instances reads 43,000 members.
"""

from collections.abc import Callable, Generator
from typing import Any

from moto.core import constants, serialize, utils

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
# How moto's picker reads one key of an object (an attribute, an item, a dotted path).
_get_value = utils.get_value
_MISSING = constants.MISSING


class RememberingAttributePicker(serialize.XFormedAttributePicker):
    """moto's XFormedAttributePicker, remembering the keys it tries for each member."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # A transformer applies where the member's key path ends with its path; a member's key
        # (no dot in it) that ends with none of their last parts has none. moto's responses
        # fill their transformers before their answer's picker is made.
        self.transformed_endings = tuple(
            path.rpartition(".")[2] for path in self.response_transformers
        )

    def untransformed(self, key: str) -> bool:
        """Whether no response transformer applies to a member `key`, whatever its path."""
        return not key.endswith(self.transformed_endings) and "." not in key

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
    KeyError, None when none is there), and any other object's member the first of its
    remembered keys moto's `get_value` finds on it, without the picker's context (a dataclass
    and the joined key path, per member) and transformers' walk where no transformer applies
    to the member; anything else as moto reads it."""

    def get_value(self: Any, value: Any, key: str, shape: Any) -> Any:
        picker = self._value_picker
        if type(picker) is RememberingAttributePicker and picker.untransformed(key):
            if type(value) is dict:
                keys = _dict_keys(picker, value, shape, key)
                if keys is not None:
                    for possible in keys:
                        if possible in value:
                            return value[possible]
                    return None
            else:
                keys = picker.remembered_keys(value, shape, key)
                if keys is not None:
                    for possible in keys:
                        found = _get_value(value, possible, _MISSING)
                        if found is not _MISSING:
                            return found
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
    moto's own `_serialize_structure_member`; another object's structure by its class's plan
    (`_object_plan`), where no member's keys must be asked each time; anything else walked as
    moto walks it."""

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
        elif (
            value is not None
            and type(value) is not dict
            and type(picker) is RememberingAttributePicker
            and type(self)._serialize_structure_member is _MEMBER_OF_MOTO
            and picker.alias_providers is serialize.DEFAULT_ALIAS_PROVIDERS
            and not hasattr(value, "Meta")
        ):
            plan = _object_plan(picker, value, shape)
            if plan is not None:
                _serialize_object(self, serialized, value, shape, key, plan)
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


# A member of an object's structure: its key, its shape, and the keys it is read from (None: a
# member a response transformer may apply to, or read by a dotted path: read by moto).
_Member = tuple[str, Any, tuple[str, ...] | None]
# (class of the object, structure shape, its parent, transformers' endings) -> its members.
_OBJECT_PLANS: dict[tuple[type, object, object, tuple[str, ...]], list[_Member] | None] = {}


def _object_plan(
    picker: RememberingAttributePicker, value: Any, shape: Any
) -> list[_Member] | None:
    """How `shape`'s members are read from objects of `value`'s class under `picker`, or None
    where moto walks it (a member whose keys moto must be asked for each time)."""
    endings = picker.transformed_endings
    question = (value.__class__, shape, getattr(shape, "parent", None), endings)
    try:
        return _OBJECT_PLANS[question]
    except KeyError:
        pass
    members: list[_Member] = []
    plan: list[_Member] | None = members
    for member_key, member_shape in shape.members.items():
        member_shape.parent = shape  # as moto's walk sets it, before each member is read
        keys = picker.remembered_keys(value, member_shape, member_key)
        if keys is None:
            plan = None
            break
        if not picker.untransformed(member_key) or any("." in k for k in keys):
            keys = None
        members.append((member_key, member_shape, keys))
    if len(_OBJECT_PLANS) >= _MOST_REMEMBERED:
        _OBJECT_PLANS.clear()
    _OBJECT_PLANS[question] = plan
    return plan


def _serialize_object(
    serializer: Any, serialized: Any, value: Any, shape: Any, key: str, plan: list[_Member]
) -> None:
    """moto's walk of every member of `shape` for an object: each member read from its first
    key the object has (moto's `get_value`: an attribute, or an item of an object with
    `__getitem__`), serialized unless None; a member with no keys read by moto itself."""
    wrapper = serializer.MAP_TYPE() if key else serialized
    by_item = hasattr(value, "__getitem__")
    for member_key, member_shape, keys in plan:
        member_shape.parent = shape
        if keys is None:
            serializer._serialize_structure_member(wrapper, value, member_shape, member_key)
            continue
        member_value = None
        for possible in keys:
            if by_item:
                try:
                    member_value = value[possible]
                except (KeyError, IndexError, TypeError, AttributeError):
                    continue
                break
            member_value = getattr(value, possible, _MISSING)
            if member_value is not _MISSING:
                break
        else:
            member_value = None
        if member_value is not None:
            serializer._serialize(wrapper, member_value, member_shape, member_key)
    if key:
        serializer._default_serialize(serialized, wrapper, shape, key)
