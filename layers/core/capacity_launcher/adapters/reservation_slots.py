"""A reservation's slots taken or given back in its shared snapshot, as one conditional update:
alone (adapters/reservation_snapshots.py), or as an item of a launch intent's transaction, so a
claim happens with the write of the intent that records it and a give-back with the write that
marks it done, once each (adapters/intent_items.py, issue 38)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from capacity_launcher.adapters.dynamodb import key, to_item

PARTITION = "Reservation"
# What a claim of `:count` slots needs: that many available, and no flag saying it is full.
CLAIMABLE = "available >= :count AND (attribute_not_exists(exhausted) OR exhausted = :false)"
TAKE = "ADD available :minus, version :one"
GIVE_BACK = "ADD available :count, version :one"
# A give-back never makes more than the reservation's total available (`:ceiling`: the total
# less the slots given back).
UNDER_CEILING = "available <= :ceiling"


def snapshot_update(
    table: str,
    reservation_id: str,
    expression: str,
    condition: str | None,
    values: Mapping[str, Any],
    names: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """One update of an existing snapshot (UpdateItem's or a transaction item's parameters)."""
    exists = "attribute_exists(pk)"
    request: dict[str, Any] = {
        "TableName": table,
        "Key": key(PARTITION, reservation_id),
        "UpdateExpression": expression,
        "ConditionExpression": f"{exists} AND {condition}" if condition else exists,
        "ExpressionAttributeValues": to_item(values),
    }
    if names:
        request["ExpressionAttributeNames"] = dict(names)
    return request


def claim_update(table: str, reservation_id: str, count: int) -> dict[str, Any]:
    """`count` slots taken if that many are claimable."""
    values = {":minus": -count, ":one": 1, ":count": count, ":false": False}
    return snapshot_update(table, reservation_id, TAKE, CLAIMABLE, values)


def note_update(table: str, reservation_id: str, count: int) -> dict[str, Any]:
    """`count` slots taken by instances launched into it, if that many are available (else the
    caller empties it: `ReservationSnapshots.empty`, which a second time leaves as it is)."""
    values = {":minus": -count, ":one": 1, ":count": count}
    return snapshot_update(table, reservation_id, TAKE, "available >= :count", values)


def give_back_update(table: str, reservation_id: str, count: int, at_most: int) -> dict[str, Any]:
    """`count` slots back unless that would make more than `at_most` available."""
    values = {":count": count, ":one": 1, ":ceiling": at_most - count}
    return snapshot_update(table, reservation_id, GIVE_BACK, UNDER_CEILING, values)
