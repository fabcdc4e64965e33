"""AWS's limits, proven on the calls the suites really make: every list, string and integer
parameter of every call is held against the `max` its service model gives it.

botocore validates a request's required members, types and minimums before sending it, but no
maximum: a list longer than the API accepts (`DescribeInstanceTypes` `InstanceTypes`, 100 items)
leaves the client and is refused by AWS alone, as moto does not. `CallRecorder` (iam_audit.py)
hands each call to `check` here as it is made; tests/conftest.py fails the test that made a call
over a limit, naming the operation, the parameter's path and the limit. A test that sends one on
purpose (to prove the emulator refuses it as AWS does) is marked `beyond_aws_limits`.

Every call of every test is checked, so the walk goes only where a maximum can be: a member, an
item or an entry whose shape has no `max` anywhere below it (a DynamoDB item's strings and
numbers, most of a request) cannot be over one, and is not walked. Which shapes reach a maximum
is worked out once per shape (`_reaches_a_maximum`), and a value's path is written out only for a
finding; the findings, their order and their wording are those of the whole walk.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from botocore.model import OperationModel, Shape


def check(operation: OperationModel, params: Mapping[str, Any]) -> list[str]:
    """Each parameter of this call over its model's maximum, as `Operation Path: rule`."""
    shape = operation.input_shape
    if shape is None or not _limited(shape):
        return []
    found: list[tuple[_Where, str]] = []
    _over(shape, params, None, found)
    return [f"{operation.name} {_path(where)}: {rule}" for where, rule in found]


# Where a value is, written out only for a finding: None for the request itself, or the place
# it holds in its parent's (the parent's place, "member" | "item" | "key" | "value", the name,
# index or key).
_Where = tuple[Any, str, Any] | None


def _path(where: _Where) -> str:
    if where is None:
        return ""
    parent, step, at = where
    path = _path(parent)
    if step == "member":
        return f"{path}.{at}" if path else at
    if step == "item":
        return f"{path}[{at}]"
    if step == "key":
        return f"{path}.<key {at!r}>"
    return f"{path}[{at!r}]"


def _is_mapping(value: Any) -> bool:
    return type(value) is dict or isinstance(value, Mapping)


def _over(shape: Shape, value: Any, where: _Where, found: list[tuple[_Where, str]]) -> None:
    limit = shape.metadata.get("max")
    kind = shape.type_name
    if kind == "structure" and _is_mapping(value):
        for name, member in _limited_members(shape):
            if name in value:
                _over(member, value[name], (where, "member", name), found)
    elif kind == "list" and isinstance(value, list | tuple):
        if limit is not None and len(value) > limit:
            found.append((where, f"{len(value)} items, at most {limit}"))
        member = shape.member  # type: ignore[attr-defined]
        if _limited(member):
            for index, item in enumerate(value):
                _over(member, item, (where, "item", index), found)
    elif kind == "map" and _is_mapping(value):
        if limit is not None and len(value) > limit:
            found.append((where, f"{len(value)} entries, at most {limit}"))
        keys, items = shape.key, shape.value  # type: ignore[attr-defined]
        keys_limited, items_limited = _limited(keys), _limited(items)
        if keys_limited or items_limited:
            for key, item in value.items():
                if keys_limited:
                    _over(keys, key, (where, "key", key), found)
                if items_limited:
                    _over(items, item, (where, "value", key), found)
    elif kind == "string" and isinstance(value, str):
        if limit is not None and len(value) > limit:
            found.append((where, f"{len(value)} characters, at most {limit}"))
    elif kind in ("integer", "long") and _number_over(value, limit):
        found.append((where, f"{value}, at most {limit}"))


def _number_over(value: Any, limit: int | None) -> bool:
    return (
        limit is not None
        and isinstance(value, int)
        and not isinstance(value, bool)
        and (value > limit)
    )


# id(shape) -> (the shape, whether a `max` is at it or below it)
_LIMITED: dict[int, tuple[Shape, bool]] = {}
# id(structure) -> (the structure, its members that reach a maximum, in the model's order)
_LIMITED_MEMBERS: dict[int, tuple[Shape, tuple[tuple[str, Shape], ...]]] = {}
# Shapes kept: botocore makes them per service model (per client); more, and all are forgotten.
_MOST_KEPT = 50_000


def _limited(shape: Shape) -> bool:
    kept = _LIMITED.get(id(shape))
    if kept is None or kept[0] is not shape:
        if len(_LIMITED) >= _MOST_KEPT:
            _LIMITED.clear()
        kept = _LIMITED[id(shape)] = (shape, _reaches_a_maximum(shape))
    return kept[1]


def _limited_members(shape: Shape) -> tuple[tuple[str, Shape], ...]:
    kept = _LIMITED_MEMBERS.get(id(shape))
    if kept is None or kept[0] is not shape:
        if len(_LIMITED_MEMBERS) >= _MOST_KEPT:
            _LIMITED_MEMBERS.clear()
        members = cast(dict[str, Shape], shape.members)  # type: ignore[attr-defined]
        limited = tuple((name, member) for name, member in members.items() if _limited(member))
        kept = _LIMITED_MEMBERS[id(shape)] = (shape, limited)
    return kept[1]


def _reaches_a_maximum(root: Shape) -> bool:
    """Whether this shape, or one below it, has a `max`. Below a shape are the shapes its model
    names, by name: each name is looked into once (a recursive shape, such as DynamoDB's
    `AttributeValue`, names itself), a shape's own `max` always (a member may add one)."""
    looked_into: set[str] = set()
    to_see = [root]
    while to_see:
        shape = to_see.pop()
        if shape.metadata.get("max") is not None:
            return True
        if shape.name in looked_into:
            continue
        looked_into.add(shape.name)
        kind = shape.type_name
        if kind == "structure":
            to_see.extend(shape.members.values())  # type: ignore[attr-defined]
        elif kind == "list":
            to_see.append(shape.member)  # type: ignore[attr-defined]
        elif kind == "map":
            to_see += (shape.key, shape.value)  # type: ignore[attr-defined]
    return False
