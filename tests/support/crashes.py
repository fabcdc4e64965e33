"""A launcher worker killed at a named step of its launch, as a Lambda timeout or crash kills it:
nothing runs after, not even the give-back of its lease, and SQS redelivers its message."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from capacity_launcher.adapters.launch_records import LaunchRecords
from capacity_launcher.adapters.pool_leases import PoolLeaseStore


def worker_killed(*_: object, **__: object) -> None:
    raise SystemExit("worker killed")


@contextmanager
def worker_dies_at(monkeypatch: pytest.MonkeyPatch, step: str) -> Iterator[None]:
    """The delivery sent in this block dies when it reaches `LaunchRecords.<step>` (its lease's
    give-back dies too); the block expects that death. `complete_intent` is where a CreateFleet's
    answer is stored: by its own UpdateItem, or in its request's lease settle
    (`completion_updates`, issue 38), whichever the attempt does first."""
    with monkeypatch.context() as patch:
        patch.setattr(LaunchRecords, step, worker_killed)
        if step == "complete_intent":
            patch.setattr(LaunchRecords, "completion_updates", worker_killed)
        patch.setattr(PoolLeaseStore, "cancel", worker_killed)
        with pytest.raises(SystemExit):
            yield
