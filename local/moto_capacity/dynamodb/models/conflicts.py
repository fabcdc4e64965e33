"""Transaction conflicts at a seeded rate (see `TransactionConflicts`)."""

import json
import random
import threading
from collections.abc import Mapping
from typing import Any

from moto_capacity.dynamodb.exceptions import cancelled


class TransactionConflicts:
    """Cancels a TransactWriteItems with `TransactionConflict` at a seeded rate, when it touches
    an item an earlier transaction touched.

    Real conflicts need two transactions in flight on one item at once. moto runs one request
    per service at a time (see `controls.dispatch`), so they can never overlap here: the rate
    stands in for how often they would.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.rate = 0.0
        self.seed: int | None = None
        self._rng = random.Random()
        self._touched: set[tuple[str, str]] = set()
        self.raised = 0

    def configure(self, rate: object, seed: object = None) -> None:
        if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 <= rate <= 1:
            raise ValueError("rate must be a number within [0, 1] (0 turns conflicts off)")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ValueError("seed must be an integer")
        with self._lock:
            self.rate, self.seed = float(rate), seed
            self._rng = random.Random(seed)
            self._touched.clear()
            self.raised = 0

    def check(self, items: list[tuple[str, str]]) -> None:
        """Raise the cancellation, or remember the items as touched."""
        with self._lock:
            if not self.rate:
                return
            contended = [item in self._touched for item in items]
            if any(contended) and self._rng.random() < self.rate:
                self.raised += 1
                raise cancelled(
                    tuple("TransactionConflict" if hit else "None" for hit in contended)
                )
            self._touched.update(items)

    def reset(self) -> None:
        self.configure(0.0)

    def snapshot(self) -> dict[str, object]:
        with self._lock:
            return {"rate": self.rate, "seed": self.seed, "raised": self.raised}


TRANSACTION_CONFLICTS = TransactionConflicts()


def transaction_items(
    backend: Any, transact_items: list[Mapping[str, Any]]
) -> list[tuple[str, str]]:
    """(table, key) of each action, for conflict detection."""
    found = []
    for entry in transact_items:
        ((_, action),) = entry.items()
        key = action.get("Key")
        if key is None:
            table = backend.get_table(action["TableName"])
            names = [table.hash_key_attr, table.range_key_attr]
            key = {n: action["Item"].get(n) for n in names if n}
        found.append((action["TableName"], json.dumps(key, sort_keys=True)))
    return found
