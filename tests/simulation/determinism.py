"""What makes a seed replay exactly: one thread decides every interleaving, from the seed.

- `Interleaver` runs workers that are truly concurrent in production (two launcher containers
  serving two batches at once) on threads, but only one of them at a time: each stops before
  every AWS call it makes (`checkpoint`, called by the botocore hook in emulator.py) and the
  deciding thread picks, with its own seeded generator, which worker makes the next call. The
  races are the same as with free threads (they happen between AWS calls); their order is the
  seed's.
- `SeededExecutor` stands in for the service's `ThreadPoolExecutor`s (a batch's groups, the
  tagging of a fleet's instances): the tasks run one after another, in an order drawn from the
  seed, and answer in submission order as the real executor does.
- `seeded_sources` seeds what else the service draws from: the `random` module (backoff jitter),
  `uuid.uuid4` (claim tokens, request and event ids), and the Lambda context's remaining time
  (counted on the simulated clock, not the machine's).

String hashing (set and dict order) is fixed by `PYTHONHASHSEED`, which the runner sets before
Python starts (`python -m tests.simulation` re-executes itself with it).
"""

from __future__ import annotations

import hashlib
import json
import random
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HASH_SEED = "0"
# A worker that neither reaches its next AWS call nor ends within this many wall seconds is
# stuck (a lock held across a call would do it): the run stops and says so.
STUCK_SECONDS = 600.0


# The code a run executes: a cold start loads its handler from disk again, and a module first
# imported mid-run is read then; a checkout edited during a soak would run other code from there.
CODE_FOLDERS = ("layers/core", "functions", "local", "tests/simulation")


def code_digest(root: Path) -> str:
    """A short digest of every Python source the run may load, by path and content."""
    digest = hashlib.sha256()
    for folder in CODE_FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


class Stuck(RuntimeError):
    """A cooperatively scheduled worker never handed control back."""


@dataclass
class _Task:
    job: Callable[[], Any]
    go: threading.Event = field(default_factory=threading.Event)
    paused: threading.Event = field(default_factory=threading.Event)
    done: bool = False
    result: Any = None
    error: BaseException | None = None


class Interleaver:
    """Runs jobs on threads one at a time, switching only at AWS calls, in a seeded order."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(f"interleave-{seed}")
        self._local = threading.local()

    def checkpoint(self) -> None:
        """Called before every AWS call: a scheduled worker waits here for its next turn."""
        task: _Task | None = getattr(self._local, "task", None)
        if task is None:
            return
        task.go.clear()
        task.paused.set()
        task.go.wait()

    def run(self, jobs: list[Callable[[], Any]]) -> list[tuple[Any, BaseException | None]]:
        """Every job's (result, error), in the order given."""
        tasks = [_Task(job) for job in jobs]
        threads = [threading.Thread(target=self._serve, args=(t,), daemon=True) for t in tasks]
        for thread in threads:
            thread.start()
        while open_tasks := [t for t in tasks if not t.done]:
            chosen = open_tasks[self.rng.randrange(len(open_tasks))]
            chosen.paused.clear()
            chosen.go.set()
            if not chosen.paused.wait(STUCK_SECONDS):
                raise Stuck("a simulated worker neither reached an AWS call nor ended")
        for thread in threads:
            thread.join()
        return [(t.result, t.error) for t in tasks]

    def _serve(self, task: _Task) -> None:
        self._local.task = task
        task.go.wait()
        try:
            task.result = task.job()
        except BaseException as error:  # a Crash too: the thread ends, its container dies
            task.error = error
        finally:
            task.done = True
            task.paused.set()


class SeededExecutor:
    """`ThreadPoolExecutor`'s `map`, `submit` and context manager, run on the calling thread.

    `map` runs its calls in a seeded order and yields their answers in the order given; an
    exception is raised where its answer is read, as the real executor does. A `BaseException`
    that is not an `Exception` (a simulated crash) ends everything at once, as the death of the
    process would. `submit` runs the call at once (the caller reads it after its own work)."""

    rng = random.Random(0)

    def __init__(self, max_workers: int | None = None, thread_name_prefix: str = "") -> None:
        del max_workers, thread_name_prefix

    def __enter__(self) -> SeededExecutor:
        return self

    def __exit__(self, *_: object) -> None:
        return None

    def map(self, fn: Callable[..., Any], *iterables: Iterable[Any]) -> Iterator[Any]:
        calls = list(zip(*iterables, strict=False))
        answers: list[tuple[Any, Exception | None]] = [(None, None)] * len(calls)
        order = list(range(len(calls)))
        self.rng.shuffle(order)
        for index in order:
            try:
                answers[index] = (fn(*calls[index]), None)
            except Exception as error:
                answers[index] = (None, error)
        return _answers(answers)

    def submit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as error:
            future.set_exception(error)
        return future


def _answers(answers: list[tuple[Any, Exception | None]]) -> Iterator[Any]:
    for result, error in answers:
        if error is not None:
            raise error
        yield result


@contextmanager
def seeded_sources(seed: int, now: Callable[[], float]) -> Iterator[None]:
    """The service's thread pools, `random`, `uuid.uuid4` and the Lambda context's remaining time,
    all decided by the seed and the simulated clock; everything restored after."""
    from capacity_launcher.service.launch import batch, send
    from local_cloud import lambda_runtime

    state = random.getstate()
    random.seed(f"service-{seed}")
    ids = random.Random(f"uuid-{seed}")
    SeededExecutor.rng = random.Random(f"executor-{seed}")
    saved = (uuid.uuid4, batch.ThreadPoolExecutor, send.ThreadPoolExecutor)
    context = lambda_runtime.LocalContext
    uuid.uuid4 = lambda: uuid.UUID(int=ids.getrandbits(128), version=4)
    batch.ThreadPoolExecutor = SeededExecutor  # type: ignore[assignment,misc]
    send.ThreadPoolExecutor = SeededExecutor  # type: ignore[assignment,misc]
    lambda_runtime.LocalContext = _simulated_context(context, now)  # type: ignore[misc]
    try:
        yield
    finally:
        uuid.uuid4, batch.ThreadPoolExecutor, send.ThreadPoolExecutor = saved  # type: ignore[misc]
        lambda_runtime.LocalContext = context  # type: ignore[misc]
        random.setstate(state)


def _simulated_context(base: type, now: Callable[[], float]) -> type:
    """The Lambda context with its deadline counted on the simulated clock."""

    class SimulatedContext(base):  # type: ignore[valid-type,misc]
        def __post_init__(self) -> None:
            self.started = now()

        def get_remaining_time_in_millis(self) -> int:
            elapsed = now() - self.started
            return max(int((self.timeout_seconds - elapsed) * 1000), 0)

    return SimulatedContext


class CallDigest:
    """Every AWS call of a step (operation and parameters), folded into one short fingerprint:
    two runs of one seed must make the same calls in the same order."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()
        self.calls = 0
        self._lock = threading.Lock()

    def add(self, operation: str, params: Any) -> None:
        text = json.dumps(params, sort_keys=True, default=str)
        with self._lock:
            self.calls += 1
            self._hash.update(f"{operation} {text}\n".encode())

    def take(self) -> str:
        """The fingerprint of the calls since the last take, and a fresh start."""
        with self._lock:
            line = f"{self.calls} calls #{self._hash.hexdigest()[:12]}"
            self._hash, self.calls = hashlib.sha256(), 0
        return line
