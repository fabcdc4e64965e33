"""One request at a time per service (see `controls.dispatch`): moto's backends are not
thread-safe. A request that only waits for another one (an SQS long poll waiting for a message)
steps aside meanwhile, so the request it waits for can run, as on AWS."""

import collections
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class ServiceLock:
    """A re-entrant lock whose holder can let it go while it waits (`idle`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner: int | None = None
        self._depth = 0

    def __enter__(self) -> None:
        me = threading.get_ident()
        if self._owner != me:
            self._lock.acquire()
            self._owner = me
        self._depth += 1

    def __exit__(self, *_: object) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._owner = None
            self._lock.release()

    @contextmanager
    def idle(self) -> Iterator[None]:
        """While this thread waits on another request, other requests of the service run."""
        if self._owner != threading.get_ident():
            yield
            return
        depth, self._depth, self._owner = self._depth, 0, None
        self._lock.release()
        try:
            yield
        finally:
            self._lock.acquire()
            self._owner, self._depth = threading.get_ident(), depth


SERVICE_LOCKS: collections.defaultdict[str, ServiceLock] = collections.defaultdict(ServiceLock)
