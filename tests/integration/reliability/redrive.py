"""The launch queue, modelled: a message handed back comes again, up to maxReceiveCount, then goes
to the dead-letter queue. Reliability tests drive the launcher through it instead of by hand."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from capacity_launcher.service.launch import LaunchBatch, Message

# The template's LaunchQueue redrive policy.
MAX_RECEIVE_COUNT = 5
BATCH_SIZE = 10


@dataclass(frozen=True)
class DeadLetter:
    """What the DLQ would hold: the body, and why it got there."""

    body: str
    receives: int
    reason: str


@dataclass
class Redrive:
    """Delivers bodies in batches until every message is deleted or dead-lettered."""

    new_batch: Callable[[], LaunchBatch]
    max_receive_count: int = MAX_RECEIVE_COUNT
    batch_size: int = BATCH_SIZE
    receives: Counter[str] = field(default_factory=Counter)
    dead_letters: list[DeadLetter] = field(default_factory=list)

    def drain(self, bodies: Sequence[Any]) -> list[DeadLetter]:
        pending = [b if isinstance(b, str) else json.dumps(b) for b in bodies]
        while pending:
            handed_back: list[str] = []
            for start in range(0, len(pending), self.batch_size):
                handed_back += self._deliver(pending[start : start + self.batch_size])
            pending = []
            for body in handed_back:
                if self.receives[body] >= self.max_receive_count:
                    reason = f"handed back {self.receives[body]} times (maxReceiveCount)"
                    self.dead_letters.append(DeadLetter(body, self.receives[body], reason))
                else:
                    pending.append(body)
        return self.dead_letters

    def dead_request_ids(self) -> set[str]:
        return {json.loads(d.body)["requestId"] for d in self.dead_letters}

    def _deliver(self, bodies: list[str]) -> list[str]:
        now = datetime.now(UTC)
        messages = {f"m-{uuid.uuid4().hex[:12]}": body for body in bodies}
        for body in bodies:
            self.receives[body] += 1
        # Each receive may land on any container: a new one per batch is the harshest case.
        failed = self.new_batch().process(
            [Message(mid, body, now) for mid, body in messages.items()], lambda: 60_000
        )
        unknown = set(failed) - set(messages)
        assert not unknown, f"the launcher handed back ids it was never given: {unknown}"
        return [messages[mid] for mid in failed]
