"""AWS's limits, proven on the calls the suites really make: every list, string and integer
parameter of every call is held against the `max` its service model gives it.

botocore validates a request's required members, types and minimums before sending it, but no
maximum: a list longer than the API accepts (`DescribeInstanceTypes` `InstanceTypes`, 100 items)
leaves the client and is refused by AWS alone, as moto does not. `CallRecorder` (iam_audit.py)
hands each call to `check` here as it is made; tests/conftest.py fails the test that made a call
over a limit, naming the operation, the parameter's path and the limit. A test that sends one on
purpose (to prove the emulator refuses it as AWS does) is marked `beyond_aws_limits`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from botocore.model import OperationModel, Shape


def check(operation: OperationModel, params: Mapping[str, Any]) -> list[str]:
    """Each parameter of this call over its model's maximum, as `Operation Path: rule`."""
    shape = operation.input_shape
    if shape is None:
        return []
    return [f"{operation.name} {where}: {rule}" for where, rule in _over(shape, params, "")]


def _over(shape: Shape, value: Any, path: str) -> Iterator[tuple[str, str]]:
    limit = shape.metadata.get("max")
    kind = shape.type_name
    if kind == "structure" and isinstance(value, Mapping):
        for name, member in shape.members.items():  # type: ignore[attr-defined]
            if name in value:
                yield from _over(member, value[name], f"{path}.{name}" if path else name)
    elif kind == "list" and isinstance(value, list | tuple):
        if limit is not None and len(value) > limit:
            yield path, f"{len(value)} items, at most {limit}"
        for index, item in enumerate(value):
            yield from _over(shape.member, item, f"{path}[{index}]")  # type: ignore[attr-defined]
    elif kind == "map" and isinstance(value, Mapping):
        if limit is not None and len(value) > limit:
            yield path, f"{len(value)} entries, at most {limit}"
        for key, item in value.items():
            yield from _over(shape.key, key, f"{path}.<key {key!r}>")  # type: ignore[attr-defined]
            yield from _over(shape.value, item, f"{path}[{key!r}]")  # type: ignore[attr-defined]
    elif kind == "string" and isinstance(value, str):
        if limit is not None and len(value) > limit:
            yield path, f"{len(value)} characters, at most {limit}"
    elif kind in ("integer", "long") and _number_over(value, limit):
        yield path, f"{value}, at most {limit}"


def _number_over(value: Any, limit: int | None) -> bool:
    return (
        limit is not None
        and isinstance(value, int)
        and not isinstance(value, bool)
        and (value > limit)
    )
