"""The template's resources made once per process, and restored for each in-process cloud after.

Each integration test starts a fresh local cloud; making its tables, queues, bus and rules through
botocore and moto (24 calls) was most of that start's CPU, and moto making the Region's EC2 at the
test's first EC2 call most of the rest of its set-up. A cloud that asks for it
(`LocalCloudOptions.reuse_resources`) makes them once, on a moto that held nothing yet, and keeps
what moto then holds: every backend the making touched (DynamoDB, SQS, EventBridge, and the IAM
and KMS that moto touches along the way) and the Region's EC2 as moto makes it, pickled, with the
counters moto_capacity keeps of the calls. A later cloud with the same inputs, starting on a moto
that again holds nothing, gets a fresh copy of all of it (unpickled: no object shared with the
kept one nor with another cloud), and its counters.

What makes it faithful: the copy is made of moto's own objects as moto made them, not rebuilt;
the whole of each backend is copied, so nothing a test leaves in it survives (a cloud's stop
resets moto, and a restore only ever goes into a moto that holds nothing); a lock, or a
condition (an SQS queue's), is not copied but made new. Not kept: moto's random draws (the ids
moto draws later are others, as between any two runs; the default VPC's and subnets' ids are the
same in every cloud of the process), the time of the making (a table's creation time is the first
cloud's). A cloud that prepares moto itself (`prepare`: the simulation seeds its draws there) or
serves it over HTTP always makes its resources.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from moto.core.base_backend import BackendDict, backend_lock

from local_cloud.template import DeployedNames, template_version
from moto_capacity.core.operations import OPERATION_CONTROLS

_LOCK_TYPES = (type(threading.Lock()), type(threading.RLock()))


def _registries() -> list[BackendDict[Any]]:
    """moto's per-service registries that hold a backend now (a reset empties the list)."""
    registries: list[BackendDict[Any]] = BackendDict._instances  # type: ignore[misc]
    return registries


@dataclass(frozen=True)
class Made:
    """What making the resources answered: their names, and the status events queue's URL."""

    names: DeployedNames
    status_events_url: str | None


@dataclass(frozen=True)
class _Snapshot:
    made: Made
    dicts: tuple[BackendDict[Any], ...]  # moto's per-service registries, in the pickle's order
    backends: bytes  # {(index in dicts, account, region): backend}, pickled
    calls: Mapping[str, tuple[int, int]]  # moto_capacity's counters: operation -> calls, failures


# The inputs of the making (`key`) -> what it left in moto.
_SNAPSHOTS: dict[tuple[Any, ...], _Snapshot | None] = {}


def key(
    region: str,
    stack_name: str,
    parameters: Mapping[str, Any],
    template_path: str | None,
    status_events_queue: str | None,
    environment: Mapping[str, str],
) -> tuple[Any, ...]:
    """Everything the making reads: the same key, the same resources."""
    return (
        region,
        stack_name,
        json.dumps(parameters, sort_keys=True, default=str),
        template_version(template_path),
        status_events_queue,
        tuple(sorted(environment.items())),
        tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("MOTO_"))),
    )


def made_once(inputs: tuple[Any, ...], make: Callable[[], Made]) -> Made:
    """`make()`'s resources: made by it the first time, restored from what it left after that.
    Only on a moto that holds nothing does it restore, or keep what `make` leaves."""
    if _registries():  # moto holds something already: not ours to replace or keep
        return make()
    kept = _SNAPSHOTS.get(inputs)
    if kept is not None:
        _restore(kept)
        return kept.made
    if inputs in _SNAPSHOTS:  # kept as None: what moto held could not be copied
        return make()
    made = make()
    _ec2_made(made.names)
    _SNAPSHOTS[inputs] = _taken(made)
    return made


def _ec2_made(names: DeployedNames) -> None:
    """moto's EC2 of the cloud's account and Region, made as its first call there makes it (the
    default VPC, its subnets, route table and security group, the image catalogue: 70 ms of CPU,
    paid again by each test's first EC2 call): kept with the resources, copied like them."""
    from moto.ec2.models import ec2_backends

    ec2_backends[names.account_id][names.region]


def drop_backends() -> None:
    """moto left holding nothing, as its reset leaves it, without rebuilding what it drops: moto's
    reset first runs each backend's `__init__` again (for whoever still holds one; the Region's
    EC2 remakes its default VPC, subnets and image catalogue: 70 ms of CPU), then empties the
    registries, and those rebuilt backends are dropped with them. A cloud that reuses resources
    holds none past its stop; the next restores or makes its own."""
    with backend_lock:
        for registry in _registries():
            registry.clear()
        _registries().clear()


def forget() -> None:
    """Drop every kept making (the next cloud of each makes its resources again)."""
    _SNAPSHOTS.clear()


class _Pickler(pickle.Pickler):
    """Locks and conditions are made anew where they are unpickled, never copied."""

    def reducer_override(self, obj: Any) -> Any:
        if type(obj) is threading.Condition:
            return threading.Condition, ()
        if type(obj) is _LOCK_TYPES[0]:
            return threading.Lock, ()
        if type(obj) is _LOCK_TYPES[1]:
            return threading.RLock, ()
        return NotImplemented


def _taken(made: Made) -> _Snapshot | None:
    dicts = tuple(_registries())
    backends = {
        (index, account, region): backend
        for index, registry in enumerate(dicts)
        for account, regional in registry.items()
        for region, backend in regional.items()
    }
    kept = io.BytesIO()
    try:
        _Pickler(kept, protocol=pickle.HIGHEST_PROTOCOL).dump(backends)
    except (pickle.PicklingError, TypeError, AttributeError):
        return None  # something in moto that pickle cannot copy: made each time instead
    return _Snapshot(made, dicts, kept.getvalue(), OPERATION_CONTROLS.counts())


def _restore(snapshot: _Snapshot) -> None:
    backends = pickle.loads(snapshot.backends)  # noqa: S301 - our own bytes, from this process
    for (index, account, region), backend in backends.items():
        snapshot.dicts[index][account][region] = backend
    OPERATION_CONTROLS.add_counts(snapshot.calls)
