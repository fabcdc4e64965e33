"""Status checks that take a while after a launch or a start, on the emulator's clock.

EC2 User Guide, "Status checks for Amazon EC2 instances": DescribeInstanceStatus reports a
system status check and an instance status check for each running instance, and while they are
still being run after the instance starts each reports `initializing` (then `ok`). moto reports
`ok` at once; with a window set, a running instance reports `initializing` (its reachability
detail too) until the window has passed since it was launched or last started. The window is
0 (off) until set.
"""

import functools
import threading
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any

from moto_capacity.core.clock import CLOCK

INITIALIZING = "initializing"


class StatusChecks:
    """The window, and when each started instance passes its checks."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.initializing_seconds = 0.0
        self._ok_at: dict[str, datetime] = {}

    def configure(self, initializing_seconds: object) -> None:
        if isinstance(initializing_seconds, bool) or not isinstance(
            initializing_seconds, int | float
        ):
            raise ValueError("initializingSeconds must be a number of seconds")
        if initializing_seconds < 0:
            raise ValueError("initializingSeconds must be >= 0 (0 turns it off)")
        with self._lock:
            self.initializing_seconds = float(initializing_seconds)

    def started(self, instance_ids: Iterable[str]) -> None:
        """Launched or started now: checks initializing for the window."""
        with self._lock:
            if not self.initializing_seconds:
                return
            ok_at = CLOCK.now() + timedelta(seconds=self.initializing_seconds)
            for instance_id in instance_ids:
                self._ok_at[instance_id] = ok_at

    def initializing(self, instance_id: str) -> bool:
        with self._lock:
            ok_at = self._ok_at.get(instance_id)
            if ok_at is None:
                return False
            if ok_at <= CLOCK.now():
                del self._ok_at[instance_id]
                return False
            return True

    def reset(self) -> None:
        with self._lock:
            self.initializing_seconds = 0.0
            self._ok_at.clear()

    def snapshot(self) -> dict[str, object]:
        with self._lock:
            return {"initializingSeconds": self.initializing_seconds}


STATUS_CHECKS = StatusChecks()


def _check(instance: Any, original: Any) -> dict[str, Any]:
    if instance.state_code == 16 and STATUS_CHECKS.initializing(instance.id):
        return {
            "Details": [{"Name": "reachability", "Status": INITIALIZING}],
            "Status": INITIALIZING,
        }
    return dict(original.fget(instance))


def initializing_status(original: Any) -> Callable[[Any], dict[str, Any]]:
    """The getter wrapping moto's Instance.instance_status or .system_status (properties)."""

    def status(instance: Any) -> dict[str, Any]:
        return _check(instance, original)

    return status


def checking_after_launch(original: Callable[..., Any]) -> Callable[..., Any]:
    """Wraps moto's EC2Backend.run_instances (RunInstances and every fleet launch)."""

    @functools.wraps(original)
    def run_instances(self: Any, *args: Any, **kwargs: Any) -> Any:
        reservation = original(self, *args, **kwargs)
        STATUS_CHECKS.started(instance.id for instance in reservation.instances)
        return reservation

    return run_instances


def checking_after_start(original: Callable[..., Any]) -> Callable[..., Any]:
    """Wraps moto's Instance.start: a started instance runs its checks again."""

    @functools.wraps(original)
    def start(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        STATUS_CHECKS.started([self.id])
        return result

    return start
