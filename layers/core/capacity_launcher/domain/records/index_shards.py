"""Write sharding of the single-valued sparse indexes (`OpenLeases`, `WaitingRequests`).

Every open lease once carried `openLease = "open"` and every live wait `waiting = "waiting"`:
one partition key value takes every write to the index, and DynamoDB serves one partition key
value of a global secondary index from one partition (its write throughput is bounded there
however the table scales). Items now carry one of `INDEX_SHARDS` values, `<value>#<n>`, chosen
from their own key, so writes spread over as many partitions; a reader queries each value.
Items written before carry the bare value: readers query it too, until their TTL or their end
removes the last of them.
"""

from __future__ import annotations

import zlib

INDEX_SHARDS = 8


def shard_value(value: str, item_key: str, shards: int = INDEX_SHARDS) -> str:
    """The index key value an item keyed `item_key` is written with (stable for that key)."""
    return f"{value}#{zlib.crc32(item_key.encode()) % shards}"


def read_values(value: str, shards: int = INDEX_SHARDS) -> list[str]:
    """Every value a reader queries: the bare one of items written before sharding, then each
    shard."""
    return [value, *(f"{value}#{n}" for n in range(shards))]
