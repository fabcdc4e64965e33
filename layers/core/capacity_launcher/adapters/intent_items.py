"""A launch intent as the state table stores it: its item read back, and its completion (the
CreateFleet's answer on it) as an update, written alone (`LaunchRecords.complete_intent`) or in
the lease settle's transaction (`LaunchRecords.completion_updates`).

An intent aimed at one reservation claims its slots in the reservation's snapshot in the
transaction that writes it (`claimed` on its item, issue 38), and a completion that gives slots
back (`SlotsBack`) is written with the give-back in one transaction, only while the intent is
pending: each happens once, whoever replays the intent (adapters/reservation_slots.py)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from capacity_launcher.adapters.aws import aws_call
from capacity_launcher.adapters.dynamodb import key, to_item
from capacity_launcher.adapters.reservation_slots import TAKE, give_back_update, note_update
from capacity_launcher.adapters.reservation_snapshots import ReservationSnapshots
from capacity_launcher.domain.errors import ConditionFailed
from capacity_launcher.domain.records.detail_limits import fit_entries
from capacity_launcher.domain.records.intents import IntentCompletion, LaunchIntent, Share

INTENT_PREFIX = "Intent#"
# An intent keeps EC2's fleet errors for diagnosis (a replay never reads them): at most this
# much of them, by the records' size policy, beside its input (at most 100 overrides) and ids.
INTENT_ERRORS_BYTES = 64 * 1024


def completion_update(
    table: str, completion: IntentCompletion, *, pending_only: bool = False
) -> dict[str, Any]:
    """The intent marked done with its CreateFleet's answer (no condition: the same answer
    written twice is the same item; `pending_only`: only while it is pending)."""
    errors = fit_entries(list(completion.errors), INTENT_ERRORS_BYTES)
    update: dict[str, Any] = {
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
    if pending_only:
        update["ConditionExpression"] = "#state = :pending"
        update["ExpressionAttributeValues"][":pending"] = {"S": "pending"}
    return update


def release(db: Any, table: str, intent: LaunchIntent) -> None:
    """A pending intent's claim let go, its slots given back with it, in one transaction (only
    while it is pending with that claim): its CreateFleet's answer is unknown (the call
    raised), and a replay of an intent that claims nothing notes the slots its instances took.
    A give-back the snapshot cannot take (above its total, no snapshot) is left out."""
    if not intent.claimed or intent.reservation_id is None:
        return
    let_go = {
        "TableName": table,
        "Key": key(INTENT_PREFIX + intent.token, "Intent"),
        "UpdateExpression": "REMOVE claimed",
        "ConditionExpression": "#state = :pending AND claimed = :claimed",
        "ExpressionAttributeNames": {"#state": "state"},
        "ExpressionAttributeValues": to_item({":pending": "pending", ":claimed": intent.claimed}),
    }
    stored = ReservationSnapshots(table, db).get(intent.reservation_id)
    items = [{"Update": let_go}]
    if stored is not None:
        total = stored.snapshot.total
        give = give_back_update(table, intent.reservation_id, intent.claimed, total)
        items.append({"Update": give})
    try:
        with aws_call("TransactWriteItems"):
            db.transact_write_items(TransactItems=items)
    except ConditionFailed as failed:
        if failed.failed_at(0):
            return  # done, or let go, already
        with aws_call("UpdateItem"):
            db.update_item(**let_go)


def completion_writes(table: str, completion: IntentCompletion) -> list[dict[str, Any]]:
    """The completion as transaction items: the intent marked done (only while it is pending
    when it moves slots), then the take of each snapshot its instances took slots in (`noted`);
    a give-back (`complete` adds it) needs the snapshot's total read first."""
    done = completion_update(table, completion, pending_only=completion.moves_slots)
    notes = [{"Update": note_update(table, r, n)} for r, n in sorted(completion.noted.items())]
    return [{"Update": done}, *notes]


def complete(db: Any, table: str, completion: IntentCompletion) -> None:
    """Store `completion` on its intent: one UpdateItem, or, when it moves slots, one
    transaction with them, written only if the intent is pending (a replay that finds it done
    moves none again). A snapshot that cannot take its part is left out of it: a give-back
    above its total or with no snapshot; a take beyond what it holds empties it first (as
    `note_launched` does; a second time leaves it as it is)."""
    if not completion.moves_slots:
        with aws_call("UpdateItem"):
            db.update_item(**completion_update(table, completion))
        return
    snapshots = ReservationSnapshots(table, db)
    items = completion_writes(table, completion)
    back = completion.slots_back
    stored = snapshots.get(back.reservation_id) if back else None
    if back is not None and stored is not None:
        give = give_back_update(table, back.reservation_id, back.count, stored.snapshot.total)
        items.append({"Update": give})
    while True:
        try:
            with aws_call("TransactWriteItems"):
                db.transact_write_items(TransactItems=items)
            return
        except ConditionFailed as failed:
            if failed.failed_at(0) or len(items) == 1:
                return  # done already: its slots moved with that completion
            refused = [i for i in range(1, len(items)) if failed.failed_at(i)] or [len(items) - 1]
            for index in refused:
                update = items[index]["Update"]
                if update["UpdateExpression"] == TAKE:
                    snapshots.empty(str(update["Key"]["sk"]["S"]))
            items = [item for i, item in enumerate(items) if i not in refused]


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
        claimed=int(item.get("claimed", 0)),
    )
