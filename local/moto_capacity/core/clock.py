"""The emulator's one clock: wall time plus an offset that tests move forward.

Everything time-based in the extension reads `CLOCK.now()`: consistency windows, reservation
pending periods, end dates and expiry. Moving it (`advance`) lets tests and demos skip waits.
"""

import threading
from datetime import UTC, datetime, timedelta


def aware(moment: datetime) -> datetime:
    """moto hands out naive UTC datetimes; compare everything as aware UTC."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


class EmulatorClock:
    """Thread-safe; never goes backwards except on `reset`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._offset = timedelta()

    def now(self) -> datetime:
        with self._lock:
            return datetime.now(UTC) + self._offset

    def advance(self, seconds: float) -> None:
        if isinstance(seconds, bool) or not isinstance(seconds, int | float):
            raise ValueError("advanceSeconds must be a number")
        if seconds < 0:
            raise ValueError("advanceSeconds must be >= 0: the clock never goes backwards")
        with self._lock:
            self._offset += timedelta(seconds=seconds)

    @property
    def offset_seconds(self) -> float:
        with self._lock:
            return self._offset.total_seconds()

    def reset(self) -> None:
        with self._lock:
            self._offset = timedelta()

    def snapshot(self) -> dict[str, object]:
        return {"now": self.now().isoformat(), "offsetSeconds": self.offset_seconds}


CLOCK = EmulatorClock()
