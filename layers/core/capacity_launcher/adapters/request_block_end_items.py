"""What the sync chose for one Capacity Block end for the launch requests that opted in
(`capacityBlockEnd`): one item per block end (`RequestBlockEnd` / `<block>#<end>`) with the
extension noted and the replacements sent, written conditioned on the version read (a second
sync at once writes, sends and buys nothing). Kept a week past the end, then removed by TTL."""

from __future__ import annotations

import json
from typing import Any

from capacity_launcher.adapters.aws import aws_call, client
from capacity_launcher.adapters.dynamodb import from_item, key, put_at_version
from capacity_launcher.domain.capacity.block_ends import Noted
from capacity_launcher.domain.capacity.request_block_ends import BlockEndState, Replacement

PK = "RequestBlockEnd"
KEPT_AFTER_END_SECONDS = 7 * 24 * 3600


def _sk(block: str, ends_at: int) -> str:
    return f"{block}#{ends_at}"


class RequestBlockEndItems:
    def __init__(self, table_name: str, dynamodb: Any | None = None) -> None:
        self._table = table_name
        self._db = dynamodb or client("dynamodb")

    def read(self, block: str, ends_at: int) -> BlockEndState:
        with aws_call("GetItem"):
            found = self._db.get_item(
                TableName=self._table, Key=key(PK, _sk(block, ends_at)), ConsistentRead=True
            ).get("Item")
        if found is None:
            return BlockEndState(ends_at)
        item = from_item(found)
        noted = json.loads(str(item.get("extension", "null")))
        extension = (
            None
            if noted is None
            else Noted(str(noted["action"]), int(noted["endsAt"]), str(noted["reason"]))
        )
        replacements = {
            str(original): Replacement(
                str(original), str(r["replacementId"]), int(r["count"]), dict(r["body"])
            )
            for original, r in json.loads(str(item.get("replacements", "{}"))).items()
        }
        return BlockEndState(ends_at, extension, replacements, int(item["version"]))

    def write(self, block: str, state: BlockEndState) -> bool:
        """Store `state` if the item is still at `state.version`; False if it moved."""
        noted = state.extension
        item: dict[str, Any] = {
            "pk": PK,
            "sk": _sk(block, state.ends_at),
            "replacements": json.dumps(
                {
                    original: {"replacementId": r.replacement_id, "count": r.count, "body": r.body}
                    for original, r in state.replacements.items()
                },
                sort_keys=True,
            ),
            "version": (state.version or 0) + 1,
            "ttl": state.ends_at + KEPT_AFTER_END_SECONDS,
        }
        if noted is not None:
            item["extension"] = json.dumps(
                {"action": noted.action, "endsAt": noted.ends_at, "reason": noted.reason}
            )
        return put_at_version(self._db, self._table, item, state.version)
