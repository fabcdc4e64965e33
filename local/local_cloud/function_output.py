"""Where a function's logs go while it runs in-process, as if it ran in its own container.

Handlers print (EMF metrics) and log (Powertools) to stdout. While a function runs, its thread's
stdout writes go to that invocation's sink, and so do those of worker threads it starts (they
have no sink of their own: they go to the latest running invocation's). The main thread, outside
an invocation, writes where it always did.
"""

from __future__ import annotations

import io
import logging
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

_LOCK = threading.Lock()
# Shared by every router, so a log handler bound to an older router still routes correctly.
_SINKS = threading.local()
_RUNNING: list[TextIO] = []


class _ThreadRoutedStream(io.TextIOBase):
    """A stdout stand-in: writes from a thread with a sink go to the sink, others pass through."""

    def __init__(self, fallback: TextIO) -> None:
        self.fallback = fallback

    def _target(self) -> TextIO:
        sink: TextIO | None = getattr(_SINKS, "sink", None)
        if sink is not None:
            return sink
        if _RUNNING and threading.current_thread() is not threading.main_thread():
            return _RUNNING[-1]
        return self.fallback

    def write(self, text: str) -> int:
        return self._target().write(text)

    def flush(self) -> None:
        self._target().flush()

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return str(getattr(self.fallback, "encoding", "utf-8"))

    def enter(self, sink: TextIO) -> None:
        _SINKS.sink = sink
        with _LOCK:
            _RUNNING.append(sink)

    def leave(self, sink: TextIO) -> None:
        _SINKS.sink = None
        with _LOCK:
            _RUNNING.remove(sink)


def _router() -> _ThreadRoutedStream:
    """Install the router as sys.stdout (once), re-pointing log handlers bound to the old stdout."""
    with _LOCK:
        current = sys.stdout
        if isinstance(current, _ThreadRoutedStream):
            return current
        router = _ThreadRoutedStream(current)
        sys.stdout = router
        for handler in _stream_handlers():
            if handler.stream is current:
                handler.setStream(router)
        return router


def _stream_handlers() -> Iterator[logging.StreamHandler[Any]]:
    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    for logger in loggers:
        for handler in getattr(logger, "handlers", []):
            if isinstance(handler, logging.StreamHandler):
                yield handler


def adopt_new_handlers() -> None:
    """Log handlers made after the router was installed but bound to the real stdout follow it."""
    router = _router()
    for handler in _stream_handlers():
        if handler.stream is router.fallback:
            handler.setStream(router)


@contextmanager
def captured_output(sink: TextIO) -> Iterator[None]:
    """Route this thread's stdout (prints and stdout log handlers) to `sink` while inside."""
    router = _router()
    router.enter(sink)
    try:
        yield
    finally:
        router.leave(sink)


@contextmanager
def host_output(stream: TextIO) -> Iterator[None]:
    """The host's (CLI's) own stdout goes to `stream` while inside; functions keep their sinks."""
    with _LOCK:
        previous = sys.stdout
        sys.stdout = _ThreadRoutedStream(stream)
    try:
        yield
    finally:
        with _LOCK:
            sys.stdout = previous


def release() -> None:
    """Put the original stdout back (the local cloud calls this when it stops)."""
    with _LOCK:
        current = sys.stdout
        if not isinstance(current, _ThreadRoutedStream):
            return
        sys.stdout = current.fallback
        for handler in _stream_handlers():
            if handler.stream is current:
                handler.setStream(current.fallback)
