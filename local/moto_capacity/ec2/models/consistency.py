"""EC2's eventual consistency, as a window on the emulator's clock.

EC2 API Reference, "Eventual consistency in the Amazon EC2 API": a resource just created may be
unknown to the next calls for a while, so DescribeInstances, CreateTags and TerminateInstances on
a fresh instance id answer `InvalidInstanceID.NotFound`. EC2 User Guide, "Capacity Reservation
states": a new reservation is `pending` while its capacity is provisioned, then `active`.
Both windows are 0 (off) until set.
"""

import functools
import threading
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any

from moto_capacity.core.clock import CLOCK


def _seconds(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a number of seconds")
    if value < 0:
        raise ValueError(f"{name} must be >= 0 (0 turns it off)")
    return float(value)


class Consistency:
    """The two windows, and when each fresh instance becomes visible."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.instance_visibility_seconds = 0.0
        self.reservation_pending_seconds = 0.0
        self._visible_at: dict[str, datetime] = {}

    def configure(
        self,
        instance_visibility_seconds: object = None,
        reservation_pending_seconds: object = None,
    ) -> None:
        """Set either window; a window left out keeps its value."""
        visibility = pending = None
        if instance_visibility_seconds is not None:
            visibility = _seconds("instanceVisibilitySeconds", instance_visibility_seconds)
        if reservation_pending_seconds is not None:
            pending = _seconds("reservationPendingSeconds", reservation_pending_seconds)
        with self._lock:
            if visibility is not None:
                self.instance_visibility_seconds = visibility
            if pending is not None:
                self.reservation_pending_seconds = pending

    def instances_launched(self, instance_ids: Iterable[str]) -> None:
        with self._lock:
            if not self.instance_visibility_seconds:
                return
            visible_at = CLOCK.now() + timedelta(seconds=self.instance_visibility_seconds)
            for instance_id in instance_ids:
                self._visible_at[instance_id] = visible_at

    def hidden(self, instance_ids: Iterable[str]) -> list[str]:
        """The ids among these that EC2 does not know yet, in the order given."""
        now = CLOCK.now()
        with self._lock:
            for instance_id in [i for i, at in self._visible_at.items() if at <= now]:
                del self._visible_at[instance_id]
            return [i for i in instance_ids if i in self._visible_at]

    def reservation_active_at(self, created: datetime) -> datetime:
        with self._lock:
            return created + timedelta(seconds=self.reservation_pending_seconds)

    def reset(self) -> None:
        with self._lock:
            self.instance_visibility_seconds = 0.0
            self.reservation_pending_seconds = 0.0
            self._visible_at.clear()

    def snapshot(self) -> dict[str, object]:
        with self._lock:
            return {
                "instanceVisibilitySeconds": self.instance_visibility_seconds,
                "reservationPendingSeconds": self.reservation_pending_seconds,
                "instancesNotYetVisible": len(self._visible_at),
            }


CONSISTENCY = Consistency()


def noting_launches(original: Callable[..., Any]) -> Callable[..., Any]:
    """Wraps moto's EC2Backend.run_instances (RunInstances and every fleet launch go through it)."""

    @functools.wraps(original)
    def run_instances(self: Any, *args: Any, **kwargs: Any) -> Any:
        reservation = original(self, *args, **kwargs)
        CONSISTENCY.instances_launched(instance.id for instance in reservation.instances)
        return reservation

    return run_instances
