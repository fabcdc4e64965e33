"""A launch intent as the state table stores it: its item read back, and its completion (the
CreateFleet's answer on it) as an update, written alone (`LaunchRecords.complete_intent`) or in
the lease settle's transaction (`LaunchRecords.completion_updates`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from capacity_launcher.adapters.dynamodb import key, to_item
from capacity_launcher.domain.records.detail_limits import fit_entries
from capacity_launcher.domain.records.intents import IntentCompletion, LaunchIntent, Share

INTENT_PREFIX = "Intent#"
# An intent keeps EC2's fleet errors for diagnosis (a replay never reads them): at most this
# much of them, by the records' size policy, beside its input (at most 100 overrides) and ids.
INTENT_ERRORS_BYTES = 64 * 1024


def completion_update(table: str, completion: IntentCompletion) -> dict[str, Any]:
    """The intent marked done with its CreateFleet's answer (no condition: the same answer
    written twice is the same item)."""
    errors = fit_entries(list(completion.errors), INTENT_ERRORS_BYTES)
    return {
        "TableName": table,
        "Key": key(INTENT_PREFIX + completion.token, "Intent"),
        "UpdateExpression": "SET #state = :done, instanceIds = :ids, fleetErrors = :errors",
        "ExpressionAttributeNames": {"#state": "state"},
        "ExpressionAttributeValues": to_item(
            {
                ":done": "done",
                ":ids": list(completion.instance_ids),
                ":errors": json.dumps(errors),
            }
        ),
    }


def intent_from_item(item: Mapping[str, Any]) -> LaunchIntent:
    """The intent its stored item says."""
    return LaunchIntent(
        token=str(item["pk"])[len(INTENT_PREFIX) :],
        attempt=int(item["attempt"]),
        capacity_type=str(item["capacityType"]),
        shares=tuple(Share(str(s["requestId"]), int(s["count"])) for s in item["shares"]),
        fleet_input=json.loads(item["fleetInput"]),
        offerings=tuple(item.get("offerings", [])),
        state="done" if item.get("state") == "done" else "pending",
        instance_ids=tuple(item.get("instanceIds", [])),
        errors=tuple(json.loads(item.get("fleetErrors", "[]"))),
    )
