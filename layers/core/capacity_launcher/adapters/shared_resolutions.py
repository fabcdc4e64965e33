"""The NodeClasses' shared resolutions in the state table (domain/capacity/shared_resolution.py
decides what is stored and what may be used).

A class's partition `Resolution#<class>`: its head (sk `Head`: `revision`, `resolvedAt`,
`digest`, `parts`) and the parts of the compressed document (sk `Part#<digest>#<index>`, `data`
binary). A reader reads the partition in one Query; the sync writes the parts of a new document
first, then the head, then deletes the parts the previous head named: a reader never meets a
head whose parts are not written, and parts that do not match (a write under way) are checked
by their digest and read as none.

`SharedResolutions` is a launcher container's reader: it holds a class's resolution until it is
`MAX_AGE_SECONDS` old (never longer than the sync's stamp allows) and, when none is usable,
remembers so for `MISS_SECONDS`, in which its resolvers ask EC2 themselves and keep their own
copies (adapters/subnets.py ...).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from capacity_launcher.adapters.aws import all_pages, aws_call
from capacity_launcher.adapters.dynamodb import batch_get, batch_write, from_item, key, to_item
from capacity_launcher.domain.apis.config import NodeClass
from capacity_launcher.domain.apis.documents import revision_of
from capacity_launcher.domain.capacity.instance_types import InstanceTypeInfo
from capacity_launcher.domain.capacity.shared_resolution import (
    MAX_AGE_SECONDS,
    Head,
    Resolution,
    SharedImage,
    assemble,
    digest,
    encode,
    open_digest,
    parts,
    usable,
)
from capacity_launcher.observability import logger

_HEAD = "Head"
# A container that found no usable resolution asks the table again after this long (the sync's
# minute): meanwhile its resolvers' own copies serve it.
MISS_SECONDS = 60.0


def partition(node_class: str) -> str:
    return f"Resolution#{node_class}"


def _part_key(node_class: str, digest_: str, index: int) -> dict[str, Any]:
    return key(partition(node_class), f"Part#{digest_}#{index:04d}")


def _head(item: dict[str, Any]) -> Head | None:
    try:
        return Head(
            node_class=str(item["pk"]).removeprefix("Resolution#"),
            revision=str(item["revision"]),
            resolved_at=float(item["resolvedAt"]),
            digest=str(item["digest"]),
            parts=int(item["parts"]),
            open=str(item["open"]) if "open" in item else None,
        )
    except (KeyError, TypeError, ValueError):
        return None


class ResolutionStore:
    """Reads and writes the stored resolutions (no decision)."""

    def __init__(self, table: str, dynamodb: Any) -> None:
        self._table = table
        self._db = dynamodb
        # The last resolution this store encoded for each class, and its document: a class
        # resolved again to an equal resolution (what a due class mostly is) is not encoded
        # again; `encode` gives equal resolutions equal bytes, so the items written are the same.
        self._written: dict[str, tuple[Resolution, bytes]] = {}

    def read(self, node_class: str) -> tuple[Head, Resolution | None] | None:
        """The class's head and its resolution (None when its parts do not make it), in one
        Query; None when no head is stored."""
        with aws_call("Query"):
            pages = all_pages(
                self._db.query,
                TableName=self._table,
                KeyConditionExpression="pk = :pk",
                ExpressionAttributeValues={":pk": {"S": partition(node_class)}},
            )
            items = [from_item(i) for page in pages for i in page.get("Items", [])]
        head = next((_head(i) for i in items if i.get("sk") == _HEAD), None)
        if head is None:
            return None
        prefix = f"Part#{head.digest}#"
        found = {
            int(str(i["sk"])[len(prefix) :]): bytes(i["data"])
            for i in items
            if str(i.get("sk", "")).startswith(prefix) and "data" in i
        }
        return head, assemble(head, found)

    def heads(self, names: Sequence[str]) -> dict[str, Head]:
        """The heads stored for these classes (one BatchGetItem per 100)."""
        items = batch_get(self._db, self._table, [key(partition(n), _HEAD) for n in names])
        heads = (_head(i) for i in items)
        return {h.node_class: h for h in heads if h is not None}

    def save(
        self,
        node_class: str,
        revision: str,
        resolved_at: float,
        resolution: Resolution,
        previous: Head | None,
    ) -> Head:
        """Store the resolution: its parts when its document is new, then its head, then the
        parts the previous head named are deleted."""
        data = self._document(node_class, resolution)
        head = Head(
            node_class,
            revision,
            resolved_at,
            digest(data),
            len(parts(data)),
            open_digest(resolution.open_reservations),
        )
        if previous is None or previous.digest != head.digest:
            puts = [
                {
                    "PutRequest": {
                        "Item": {**_part_key(node_class, head.digest, i), "data": {"B": p}}
                    }
                }
                for i, p in enumerate(parts(data))
            ]
            batch_write(self._db, self._table, puts)
        with aws_call("PutItem"):
            self._db.put_item(
                TableName=self._table,
                Item={
                    **key(partition(node_class), _HEAD),
                    **to_item(
                        {
                            "revision": revision,
                            "resolvedAt": resolved_at,
                            "digest": head.digest,
                            "parts": head.parts,
                            "open": head.open,
                        }
                    ),
                },
            )
        if previous is not None and previous.digest != head.digest:
            self._delete_parts(previous)
        return head

    def _document(self, node_class: str, resolution: Resolution) -> bytes:
        written = self._written.get(node_class)
        if written is not None and written[0] == resolution:
            return written[1]
        data = encode(resolution)
        self._written[node_class] = (resolution, data)
        return data

    def forget(self, head: Head) -> None:
        """The class's resolution deleted (EC2 refuses what it selects now): head first."""
        with aws_call("DeleteItem"):
            self._db.delete_item(TableName=self._table, Key=key(partition(head.node_class), _HEAD))
        self._delete_parts(head)

    def _delete_parts(self, head: Head) -> None:
        deletes = [
            {"DeleteRequest": {"Key": _part_key(head.node_class, head.digest, i)}}
            for i in range(head.parts)
        ]
        batch_write(self._db, self._table, deletes)


class SharedResolutions:
    """A launcher container's copy of the shared resolutions, by class (thread-safe)."""

    def __init__(self, store: ResolutionStore, *, clock: Callable[[], float]) -> None:
        """`clock`: epoch seconds, the one the sync stamps `resolvedAt` with."""
        self._store = store
        self._clock = clock
        self._held: dict[str, tuple[Head, Resolution]] = {}
        self._missed: dict[tuple[str, str], float] = {}
        self._lock = threading.Lock()

    def for_class(self, node_class: NodeClass) -> Resolution | None:
        """The class's shared resolution when one is usable now; None: ask EC2."""
        name = node_class.metadata.name
        revision = revision_of(node_class)
        now = self._clock()
        with self._lock:
            held = self._held.get(name)
            if held is not None and usable(held[0], revision, now):
                return held[1]
            missed = self._missed.get((name, revision))
            if missed is not None and now - missed < MISS_SECONDS:
                return None
        found = self._store.read(name)
        with self._lock:
            if found is not None and found[1] is not None and usable(found[0], revision, now):
                head, resolution = found[0], found[1]
                self._held[name] = (head, resolution)
                return resolution
            self._held.pop(name, None)
            self._missed[(name, revision)] = now
        if found is not None:
            logger.info(
                "shared resolution not usable; asking EC2",
                extra={"nodeClass": name, "stale": found[0].revision == revision},
            )
        return None

    def offered(
        self, zones: Iterable[str], names: Iterable[str] | None
    ) -> list[InstanceTypeInfo] | None:
        """The instance types a held resolution over exactly these zones says are offered;
        None when none held can say (the catalog asks EC2)."""
        asked = frozenset(zones)
        now = self._clock()
        with self._lock:
            held = [
                r
                for h, r in self._held.values()
                if frozenset(r.subnets) == asked and now - h.resolved_at < MAX_AGE_SECONDS
            ]
        for resolution in held:
            found = resolution.offered(asked, names)
            if found is not None:
                return found
        return None

    def open_reservations(self, node_class: NodeClass) -> frozenset[tuple[str, str]] | None:
        """The account's open reservations (instance type, zone) as the class's resolution this
        container holds says, with no read (None: none held usable, or it cannot say)."""
        now = self._clock()
        with self._lock:
            held = self._held.get(node_class.metadata.name)
        if held is None or not usable(held[0], revision_of(node_class), now):
            return None
        return held[1].open_reservations

    def image(self, node_class: NodeClass, image_id: str) -> SharedImage | None:
        resolution = self.for_class(node_class)
        return None if resolution is None else resolution.image(image_id)
