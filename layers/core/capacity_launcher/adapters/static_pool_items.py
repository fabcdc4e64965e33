"""A static NodePool's state between sync minutes: one item per pool (`StaticPool` / name) with
its launches in flight and its dry zones, written conditioned on the version read (a second
sync running at once writes nothing and sends nothing)."""

from __future__ import annotations

import json
from typing import Any

from capacity_launcher.adapters.aws import aws_call, client
from capacity_launcher.adapters.dynamodb import from_item, key, put_at_version
from capacity_launcher.domain.capacity.block_ends import Noted
from capacity_launcher.domain.capacity.static_pools import InFlight, StaticState

PK = "StaticPool"


class StaticPoolItems:
    def __init__(self, table_name: str, dynamodb: Any | None = None) -> None:
        self._table = table_name
        self._db = dynamodb or client("dynamodb")

    def read(self, pool: str) -> StaticState:
        with aws_call("GetItem"):
            found = self._db.get_item(
                TableName=self._table, Key=key(PK, pool), ConsistentRead=True
            ).get("Item")
        if found is None:
            return StaticState()
        item = from_item(found)
        in_flight = tuple(
            InFlight(str(f["requestId"]), f.get("zone"), int(f["sentAt"]))
            for f in json.loads(str(item.get("inFlight", "[]")))
        )
        dry = {str(z): int(t) for z, t in json.loads(str(item.get("dryUntil", "{}"))).items()}
        block_ends = {
            str(block): Noted(str(n["action"]), int(n["endsAt"]), str(n["reason"]))
            for block, n in json.loads(str(item.get("blockEnds", "{}"))).items()
        }
        return StaticState(in_flight, dry, int(item["version"]), block_ends)

    def write(self, pool: str, state: StaticState) -> bool:
        """Store `state` if the item is still at `state.version`; False if it moved."""
        in_flight = [
            {"requestId": f.request_id, "zone": f.zone, "sentAt": f.sent_at}
            for f in state.in_flight
        ]
        item = {
            "pk": PK,
            "sk": pool,
            "inFlight": json.dumps(in_flight, sort_keys=True),
            "dryUntil": json.dumps(state.dry_until, sort_keys=True),
            "version": (state.version or 0) + 1,
        }
        if state.block_ends:
            item["blockEnds"] = json.dumps(
                {
                    block: {"action": n.action, "endsAt": n.ends_at, "reason": n.reason}
                    for block, n in state.block_ends.items()
                },
                sort_keys=True,
            )
        return put_at_version(self._db, self._table, item, state.version)

    def forget(self, pool: str) -> None:
        """A pool no longer static (deleted): its state goes."""
        with aws_call("DeleteItem"):
            self._db.delete_item(TableName=self._table, Key=key(PK, pool))
