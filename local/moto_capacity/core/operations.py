"""Per-operation controls for any moto operation named `service:Operation`.

Injected faults, added latency, and how many calls each operation received and failed.
A fault with scope `override` (CreateFleet only) fails single overrides inside a CreateFleet
answer's `Errors` instead of the whole call.
"""

import random
import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass
class InjectedFault:
    """Fail `operation` with `code`: the next `times` calls, or at a `rate` (capped by `times`)."""

    operation: str
    code: str
    message: str
    times: int | None
    rate: float | None
    seed: int | None
    cancellation_reasons: tuple[str, ...] | None = None
    scope: str = "call"
    fired: int = 0
    _rng: random.Random = field(default_factory=random.Random, repr=False)

    def __post_init__(self) -> None:
        if self.times is not None and self.times < 0:
            raise ValueError("times must be >= 0")
        if self.rate is not None and not 0.0 <= self.rate <= 1.0:
            raise ValueError("rate must be within [0, 1]")
        self._rng = random.Random(self.seed)

    @property
    def exhausted(self) -> bool:
        return self.times is not None and self.fired >= self.times

    def fires(self) -> bool:
        """Decide for one call; counts the failure when it fires."""
        if self.exhausted:
            return False
        if self.rate is not None and self._rng.random() >= self.rate:
            return False
        self.fired += 1
        return True

    def describe(self) -> dict[str, object]:
        remaining = None if self.times is None else max(0, self.times - self.fired)
        return {
            "operation": self.operation,
            "code": self.code,
            "message": self.message,
            "times": self.times,
            "rate": self.rate,
            "seed": self.seed,
            "scope": self.scope,
            "cancellationReasons": (
                None if self.cancellation_reasons is None else list(self.cancellation_reasons)
            ),
            "fired": self.fired,
            "remaining": remaining,
        }


class OperationControls:
    """Faults, latencies and call counters, shared by every thread of the process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: dict[str, InjectedFault] = {}
        self._latencies: dict[str, float] = {}
        self._calls: Counter[str] = Counter()
        self._failures: Counter[str] = Counter()

    def inject_fault(self, fault: InjectedFault) -> None:
        with self._lock:
            self._faults[fault.operation] = fault

    def set_latency(self, operation: str, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("seconds must be >= 0")
        with self._lock:
            if seconds == 0:
                self._latencies.pop(operation, None)
            else:
                self._latencies[operation] = seconds

    def latency_for(self, operation: str) -> float:
        with self._lock:
            return self._latencies.get(operation, 0.0)

    def fault_for(self, operation: str, scope: str = "call") -> InjectedFault | None:
        """The fault to raise for this call of `operation` (or this override), if one fires."""
        with self._lock:
            fault = self._faults.get(operation)
            if fault is None or fault.scope != scope or not fault.fires():
                return None
            return fault

    def record(self, operation: str, failed: bool) -> None:
        with self._lock:
            self._calls[operation] += 1
            if failed:
                self._failures[operation] += 1

    def counts(self) -> dict[str, tuple[int, int]]:
        """Each operation's calls and failures counted so far."""
        with self._lock:
            return {op: (calls, self._failures[op]) for op, calls in self._calls.items()}

    def add_counts(self, counts: Mapping[str, tuple[int, int]]) -> None:
        """Count these calls and failures as served (what `counts()` read elsewhere)."""
        with self._lock:
            for operation, (calls, failures) in counts.items():
                self._calls[operation] += calls
                if failures:
                    self._failures[operation] += failures

    def reset(self) -> None:
        with self._lock:
            self._faults.clear()
            self._latencies.clear()
            self._calls.clear()
            self._failures.clear()

    def snapshot(self) -> dict[str, object]:
        with self._lock:
            return {
                "faults": [fault.describe() for fault in self._faults.values()],
                "latencies": [
                    {"operation": operation, "seconds": seconds}
                    for operation, seconds in self._latencies.items()
                ],
                "operations": {
                    operation: {"calls": calls, "failures": self._failures[operation]}
                    for operation, calls in sorted(self._calls.items())
                },
            }


OPERATION_CONTROLS = OperationControls()
