"""A small time-bounded memo for warm containers; each adapter names its own TTL."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable


class TtlCache[V]:
    def __init__(self, ttl_seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl = ttl_seconds
        self._clock = clock
        self._items: dict[Hashable, tuple[float, V]] = {}
        self._lock = threading.Lock()

    def get_or_load(self, key: Hashable, load: Callable[[], V]) -> V:
        now = self._clock()
        with self._lock:
            hit = self._items.get(key)
            if hit is not None and now - hit[0] < self._ttl:
                return hit[1]
        value = load()
        with self._lock:
            self._items[key] = (now, value)
        return value

    def replace(self, key: Hashable, change: Callable[[V], V]) -> None:
        """The value kept under `key`, if any, replaced by `change` of it; its age kept."""
        with self._lock:
            hit = self._items.get(key)
            if hit is not None:
                self._items[key] = (hit[0], change(hit[1]))

    def invalidate(self, key: Hashable | None = None) -> None:
        with self._lock:
            if key is None:
                self._items.clear()
            else:
                self._items.pop(key, None)
