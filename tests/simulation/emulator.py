"""The simulation's only contact with the emulator's controls: its clock, faults and capacity.

Everything the scheduler asks of the emulator goes through `Emulator`, so that moving from the
in-process hooks used today to the local cloud's control API (`POST /moto-capacity/faults`,
`/capacity`, `/clock`) replaces this one module, not the scenarios.

One clock for both: the emulator's (`moto_capacity.core.clock.CLOCK`) is `datetime.now` plus an
offset, and `SimulatedClock` moves `datetime.now` itself, so the emulator's offset stays 0 and
`settle` (`advance_clock(0)`, the in-process `POST /moto-capacity/clock {"advanceSeconds": 0}`)
only applies the reservation transitions now due, as AWS applies them on time rather than when
someone next reads the reservation.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import botocore.client
import botocore.parsers
import time_machine
from moto.dynamodb import models as dynamodb_models
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.table import Table

import moto_capacity
from capacity_launcher.adapters.cache import TtlCache
from capacity_launcher.adapters.instance_profiles import InstanceProfiles
from moto_capacity.core.operations import OPERATION_CONTROLS

REGION = "us-east-1"
START = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)


class Crash(BaseException):
    """A worker killed between two steps: not an Exception, so no `except Exception` cleans up."""


@dataclass(frozen=True)
class Fault:
    """One injected fault: `service:Operation` answers `code` (all calls, `times`, or a `rate`)."""

    operation: str
    code: str
    times: int | None = None
    rate: float | None = None
    seed: int | None = None


class Faults(Protocol):
    def arm(self, faults: Sequence[Fault]) -> None: ...
    def disarm(self) -> dict[str, int]: ...


class SimulatedClock:
    """Time stands still until the scheduler moves it: `time.time`, `datetime.now` (the service,
    Powertools' idempotency expiry, moto's SQS visibility) and the containers' TTL caches."""

    def __init__(self, start: datetime = START) -> None:
        self._travel = time_machine.travel(start, tick=False)
        self._traveller: Any = None
        self._cache_defaults: tuple[Any, ...] | None = None
        self._profile_defaults: dict[str, Any] | None = None

    def __enter__(self) -> SimulatedClock:
        self._traveller = self._travel.start()
        # Container caches count monotonic seconds; they must age with simulated time.
        self._cache_defaults = TtlCache.__init__.__defaults__
        TtlCache.__init__.__defaults__ = (self.now,)
        # So do the instance profiles' remembered answers: on the machine's clock, a run would
        # ask IAM again (and so draw its interleaving) by how fast the machine ran it.
        self._profile_defaults = InstanceProfiles.__init__.__kwdefaults__
        InstanceProfiles.__init__.__kwdefaults__ = {**self._profile_defaults, "clock": self.now}
        return self

    def __exit__(self, *_: object) -> None:
        TtlCache.__init__.__defaults__ = self._cache_defaults
        InstanceProfiles.__init__.__kwdefaults__ = self._profile_defaults
        self._travel.stop()

    def now(self) -> float:
        return datetime.now(UTC).timestamp()

    def advance(self, seconds: float) -> None:
        if seconds > 0:
            self._traveller.shift(seconds)


class InProcessFaults:
    """Faults through moto_capacity's in-process controls (one fault per operation at a time)."""

    def arm(self, faults: Sequence[Fault]) -> None:
        for fault in faults:
            moto_capacity.inject_fault(
                fault.operation, fault.code, times=fault.times, rate=fault.rate, seed=fault.seed
            )

    def disarm(self) -> dict[str, int]:
        fired = {
            str(f["operation"]): int(f["fired"])
            for f in OPERATION_CONTROLS.snapshot()["faults"]  # type: ignore[attr-defined]
        }
        OPERATION_CONTROLS.reset()  # faults and counters only; offering pools stay
        return fired


class Capacity:
    """Offerings made dry (0 more instances fit) or wet again."""

    WET = 100_000

    def set(self, instance_type: str, zone: str, capacity_type: str, count: int) -> None:
        moto_capacity.set_capacity(REGION, instance_type, zone, capacity_type, count)


# A crash plan's target that is no call number: before the first write of a launch intent (the
# worker killed between its lease and its intent, `lease_operations.kill_after_lease`).
AT_INTENT: tuple[int, str] = (0, "intent")
# Targets that are a call's name (group_operations.py): the worker killed just after EC2 launched
# (CreateFleet done, its answer lost) or just after DescribeInstances named the reservations its
# instances landed in, before the lease settle notes them: a redelivery replays the launch.
AFTER_CALL: dict[tuple[int, str], str] = {
    (0, "after CreateFleet"): "ec2:CreateFleet",
    (0, "after DescribeInstances"): "ec2:DescribeInstances",
}


class CrashPlan:
    """Kills the invocation at its n-th AWS call, before the call or after it (its effect done,
    its answer lost), (`AT_INTENT`) before it writes its first launch intent, or (`AFTER_CALL`)
    just after the first call of a named operation. Calls count only
    while armed, so the simulation's own reads never crash."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._armed = False
        self._calls = 0
        self._at: tuple[int, str] | None = None
        self.fired: list[str] = []

    def arm(self, at: tuple[int, str] | None) -> None:
        with self._lock:
            self._armed, self._calls, self._at = True, 0, at

    def disarm(self) -> None:
        with self._lock:
            self._armed, self._at = False, None

    def check(self, operation: str, moment: str, params: Any = None) -> None:
        with self._lock:
            if not self._armed or self._at is None:
                return
            if moment == "before":
                self._calls += 1
            if self._at == AT_INTENT:
                if moment != "before" or not _writes_intent(operation, params):
                    return
            elif self._at in AFTER_CALL:
                if moment != "after" or operation != AFTER_CALL[self._at]:
                    return
            elif (self._calls, moment) != self._at:
                return
            self._at = None
            self.fired.append(f"{moment} {operation}")
        raise Crash(f"worker killed {moment} {operation}")


def _writes_intent(operation: str, params: Any) -> bool:
    """Whether the call writes a launch intent (`LaunchRecords.write_intent`'s transaction)."""
    if operation != "dynamodb:TransactWriteItems":
        return False
    for item in (params or {}).get("TransactItems") or []:
        pk = ((item.get("Put") or {}).get("Item") or {}).get("pk") or {}
        if str(pk.get("S", "")).startswith("Intent#"):
            return True
    return False


@contextmanager
def crashing_calls(
    plan: CrashPlan,
    before: Callable[[str, Any], None] | None = None,
    after: Callable[[str, Any], None] | None = None,
) -> Iterator[None]:
    """Every botocore call (any client, any container) passes through the crash plan, after
    `before` (the deterministic scheduler's turn, and the call's fingerprint); `after` sees each
    call that succeeded (its effect done), before a crash planned after it."""
    original: Callable[..., Any] = getattr(botocore.client.BaseClient, "_make_api_call")  # noqa: B009

    def make_api_call(self: Any, operation_name: str, api_params: Any) -> Any:
        operation = f"{self.meta.service_model.service_name}:{operation_name}"
        if before is not None:
            before(operation, api_params)
        plan.check(operation, "before", api_params)
        answer = original(self, operation_name, api_params)
        if after is not None:
            after(operation, api_params)
        plan.check(operation, "after")
        return answer

    setattr(botocore.client.BaseClient, "_make_api_call", make_api_call)  # noqa: B010
    try:
        yield
    finally:
        setattr(botocore.client.BaseClient, "_make_api_call", original)  # noqa: B010


class _BackupOncePerTable:
    """moto's `copy` inside TransactWriteItems: the rollback copy of a table is made once per
    transaction, not once per item naming it (every copy of one table there is the same: nothing
    changes between them), so a transaction costs one copy of the state table, not four."""

    def __init__(self) -> None:
        self._local = threading.local()

    def deepcopy(self, value: Any, memo: Any = None) -> Any:
        copies = getattr(self._local, "copies", None)
        if copies is None or memo is not None or not isinstance(value, Table):
            return copy.deepcopy(value, memo)
        if id(value) not in copies:
            copies[id(value)] = copy.deepcopy(value)
        return copies[id(value)]

    def __getattr__(self, name: str) -> Any:
        return getattr(copy, name)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        self._local.copies = {}
        try:
            yield
        finally:
            self._local.copies = None


@contextmanager
def transaction_backups_once_per_table() -> Iterator[None]:
    """Same rollback, less copying (see `_BackupOncePerTable`)."""
    shim = _BackupOncePerTable()
    original = DynamoDBBackend.transact_write_items

    def transact_write_items(self: Any, transact_items: Any) -> Any:
        with shim.transaction():
            return original(self, transact_items)

    dynamodb_models.copy = shim  # type: ignore[attr-defined]
    DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]
    try:
        yield
    finally:
        DynamoDBBackend.transact_write_items = original  # type: ignore[method-assign]
        dynamodb_models.copy = copy  # type: ignore[attr-defined]


@dataclass
class Emulator:
    clock: SimulatedClock
    faults: Faults
    capacity: Capacity
    crashes: CrashPlan

    def settle(self) -> None:
        """Apply every reservation transition due by now: activations, a block's warning, its
        instances terminated 30 minutes before its end, expiry (with EC2's events)."""
        moto_capacity.advance_clock(0)
