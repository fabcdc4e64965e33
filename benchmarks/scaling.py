"""Scaling: DynamoDB items read per request as unrelated reservations, the usable reservations of
the request's type, NodePools and past requests grow, and items read by one run of the minute's
sync as history grows.

Items are generated directly in the emulator's tables (clones of ones the service wrote), so a
point costs seconds, not thousands of API calls. Items read = what DynamoDB bills reads for:
Scan/Query `ScannedCount`, GetItem 1 when found, BatchGetItem the items returned."""

from __future__ import annotations

import copy
import json
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from moto.dynamodb.models import dynamodb_backends
from moto.dynamodb.models.dynamo_type import DynamoType, Item

from benchmarks.revisions import extracted, measured_in
from benchmarks.scene import POOL, REGION, apply_pool, bench_cloud, request
from capacity_launcher.adapters import aws
from capacity_launcher.service import wiring
from capacity_launcher.settings import get_settings
from tests.support.cloud import Cloud

ACCOUNT = "123456789012"
RESERVATIONS = (10, 100, 1_000)
POOLS = (10, 100, 1_000)
PAST_REQUESTS = (1_000, 10_000, 100_000)
# A past request's items: record, intent pointer, intent, settled lease, instance (_history).
ITEMS_PER_PAST_REQUEST = 5
TAG = {"bench": "scaling"}
# Partitions whose items are told apart by their sort key's prefix too.
SORTED_KINDS = frozenset({"Limits"})
# Items that are history: a request's record and pointers, an intent, a settled lease (marked
# settled in place, or moved to its own `Settled#` sort key).
HISTORY_KINDS = frozenset(
    {"Request", "Intent", "Limits Lease settled", "Limits Settled", "Limits Settled settled"}
)
# Items that follow live work: instance items, a pool's usage, open leases and members, waits.
LIVE_KINDS = frozenset(
    {
        "Instance",
        "Limits Usage",
        "Limits Lease",
        "Limits Member",
        "index OpenLeases",
        "index WaitingRequests",
    }
)
USABLE = "usable reservations of the request's type"
# Compatible pools, for a request that names none (each a clone of the bench pool).
UNNAMED = "compatible node pools, the request naming none"
POOLS_UNNAMED = (10, 100, 500)
# The revision before the NodePools' weight-ordered index (issue 38), measured beside this one
# on the curve of compatible pools (extracted with `git archive`, run over its own code): a fresh
# container read the whole `NodePool` partition.
BASELINE = "967d60f"
# The index's partition (adapters/config_items.py POOL_INDEX_PK; spelled here, not imported: the
# baseline's code, which this file also runs over, has none).
POOL_INDEX = "NodePoolIndex"
# An instance type the bench pool does not allow (benchmarks/scene.py TYPES).
OTHER_TYPE = "r5.large"
Grow = Callable[[Cloud, int, int], None]


@dataclass
class ItemsRead:
    by_table: dict[str, int] = field(default_factory=dict)
    # By (table, kind): the partition key's prefix (`Request`, `Instance`...) or the index read.
    by_kind: dict[tuple[str, str], int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, table: str, n: int, kind: str = "") -> None:
        with self._lock:
            self.by_table[table] = self.by_table.get(table, 0) + n
            if kind and n:
                self.by_kind[table, kind] = self.by_kind.get((table, kind), 0) + n

    @property
    def total(self) -> int:
        return sum(self.by_table.values())


@dataclass(frozen=True)
class Point:
    curve: str
    size: int
    # items read per request: a fresh container (every cache cold), then the same one warm
    cold: int
    warm: int
    # The same at BASELINE, where measured beside this revision (the curve of compatible pools).
    before_cold: int | None = None
    before_warm: int | None = None


@dataclass(frozen=True)
class SyncPoint:
    past_requests: int
    items_read: int
    # State-table items the sync read, by kind; and the instances running when it ran.
    by_kind: dict[str, int] = field(default_factory=dict)
    live_instances: int = 0

    @property
    def history_read(self) -> int:
        """Items of finished requests (records, intents) the sync read: must stay 0."""
        return sum(n for k, n in self.by_kind.items() if k in HISTORY_KINDS)

    @property
    def live_read(self) -> int:
        return sum(n for k, n in self.by_kind.items() if k in LIVE_KINDS)


@contextmanager
def counting() -> Iterator[ItemsRead]:
    """Items read by every DynamoDB call of the service's shared client, while inside."""
    read = ItemsRead()

    def after(parsed: dict[str, Any], model: Any, params: dict[str, Any], **_: Any) -> None:
        table = str(params.get("TableName", ""))
        if model.name in ("Scan", "Query"):
            scanned = int(parsed.get("ScannedCount", parsed.get("Count", 0)))
            items = parsed.get("Items", [])
            if params.get("IndexName") or len(items) != scanned:
                read.add(table, scanned, _query_kind(model.name, params))
            else:  # every item scanned came back: say what each one is
                for item in items:
                    read.add(table, 1, _kind(item))
        elif model.name == "GetItem":
            read.add(table, int("Item" in parsed), _kind(params.get("Key", {})))
        elif model.name == "BatchGetItem":
            for name, items in parsed.get("Responses", {}).items():
                for item in items:
                    read.add(name, 1, _kind(item))

    last = threading.local()
    events = aws.client("dynamodb").meta.events

    def remember(params: dict[str, Any], **_: Any) -> None:
        last.params = dict(params)

    def handler(**kwargs: Any) -> None:
        after(kwargs["parsed"], kwargs["model"], getattr(last, "params", {}))

    events.register("provide-client-params.dynamodb.*", remember)
    events.register("after-call.dynamodb.*", handler)
    try:
        yield read
    finally:
        events.unregister("provide-client-params.dynamodb.*", remember)
        events.unregister("after-call.dynamodb.*", handler)


def _kind(item: dict[str, Any]) -> str:
    """What an item is: its partition key's prefix, then its sort key's (`Limits Member`,
    `Limits Settled`: a settled lease's proof, kept a week); a `Lease#` item marked settled (the
    proof's format before it moved to `Settled#`) is `Limits Lease settled`."""
    pk = str(item.get("pk", {}).get("S", "?")).split("#", 1)[0]
    sk = str(item.get("sk", {}).get("S", "")).split("#", 1)[0]
    kind = f"{pk} {sk}" if sk and "sk" in item and pk in SORTED_KINDS else pk
    return f"{kind} settled" if item.get("settled", {}).get("BOOL") else kind


def _query_kind(operation: str, params: dict[str, Any]) -> str:
    if operation == "Scan":
        return f"Scan {params.get('IndexName') or 'table'}"
    if params.get("IndexName"):
        return f"index {params['IndexName']}"
    values = params.get("ExpressionAttributeValues", {})
    first = next((v for v in values.values() if "S" in v), {"S": "?"})
    return f"{_kind({'pk': first})} (filtered)"


def _table(name: str) -> Any:
    return dynamodb_backends[ACCOUNT][REGION].get_table(name)


def _items(cloud: Cloud, pk: str) -> list[dict[str, Any]]:
    db = aws.client("dynamodb")
    return list(
        db.query(
            TableName=cloud.names.state_table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": pk}},
        )["Items"]
    )


def _first_found(cloud: Cloud, pk: str, sort_keys: tuple[str, ...]) -> dict[str, Any]:
    db = aws.client("dynamodb")
    for sk in sort_keys:
        found = db.get_item(
            TableName=cloud.names.state_table, Key={"pk": {"S": pk}, "sk": {"S": sk}}
        ).get("Item")
        if found:
            return dict(found)
    raise LookupError(f"none of {sort_keys} in {pk}")


def _clone(
    cloud: Cloud, item: dict[str, Any], old: str, count: int, prefix: str, start: int = 0
) -> None:
    """Copies `start`..`count` of `item`, every occurrence of `old` replaced by a new name, put
    straight into moto's storage (PutItem's checks sum the item's size again for each attribute
    it sets, which would cost more than the points measure)."""
    table = _table(cloud.names.state_table)
    # Attributes without `old` are built once and shared: no clone is ever written again.
    shared, named = {}, {}
    for name, value in item.items():
        text = json.dumps(value)
        if old in text:
            named[name] = text
        else:
            shared[name] = DynamoType(value)
    for n in range(start, count):
        new = f"{prefix}{n:06d}"
        attributes = dict(shared)
        attributes.update(
            (name, DynamoType(json.loads(text.replace(old, new)))) for name, text in named.items()
        )
        hash_key, range_key = attributes[table.hash_key_attr], attributes[table.range_key_attr]
        stored = Item(hash_key, range_key, {})
        stored.attrs.update(attributes)  # dict.update: no size check per attribute
        table.items[hash_key][range_key] = stored


def _stage(cloud: Cloud) -> None:
    """The pool's NodeClass selects reservations by tag; one matching reservation, synced."""
    cloud.ec2.create_capacity_reservation(
        InstanceType="m5.large",
        InstancePlatform="Linux/UNIX",
        AvailabilityZone="us-east-1a",
        InstanceCount=100,
        InstanceMatchCriteria="targeted",
        TagSpecifications=[
            {"ResourceType": "capacity-reservation", "Tags": [{"Key": "bench", "Value": "scaling"}]}
        ],
    )
    apply_pool(cloud, capacity_types=("reserved", "on-demand"), selector_tags=TAG)
    cloud.wait_out_consistency()
    wiring.Adapters(get_settings()).reservation_sync().run()


def _per_request(cloud: Cloud, slug: str, named: bool = True) -> tuple[int, int]:
    def asked(request_id: str) -> dict[str, Any]:
        body = request(request_id)
        if not named:
            del body["nodePool"]  # the service picks among every compatible pool, by weight
        return body

    batch = cloud.fresh_batch()
    with counting() as cold:
        cloud.send(asked(f"{slug}-cold-{uuid.uuid4().hex[:6]}"), batch=batch)
    with counting() as warm:
        cloud.send(asked(f"{slug}-warm-{uuid.uuid4().hex[:6]}"), batch=batch)
    return cold.total, warm.total


def _curve(curve: str, sizes: tuple[int, ...], grow: Grow, named: bool = True) -> list[Point]:
    """One cloud per curve, grown from one size to the next (each point measured on its own)."""
    points = []
    with bench_cloud() as cloud:
        _stage(cloud)
        had = 1
        for size in sizes:
            grow(cloud, had, size)
            had = size
            slug = "".join(c if c.isalnum() else "-" for c in curve)[:24]
            cold, warm = _per_request(cloud, slug, named)
            points.append(Point(curve, size, cold, warm))
    return points


def _unrelated_reservations(cloud: Cloud, had: int, size: int) -> None:
    stored = [i for i in _items(cloud, "Reservation") if i["sk"]["S"].startswith("cr-")]
    item = copy.deepcopy(min(stored, key=lambda i: len(i["sk"]["S"])))
    item["tags"] = {"M": {"team": {"S": "other"}}}
    _clone(cloud, item, item["sk"]["S"], size - 1, "cr-0bench", had - 1)


def _selected_elsewhere(cloud: Cloud, had: int, size: int) -> None:
    """Reservations the pool's NodeClass selects too, of an instance type its pool does not
    allow: clones of its snapshot (r5.large), added to its coverage item as the sync would."""
    stored = [i for i in _items(cloud, "Reservation") if i["sk"]["S"].startswith("cr-")]
    item = copy.deepcopy(min(stored, key=lambda i: len(i["sk"]["S"])))
    item["instanceType"] = {"S": OTHER_TYPE}
    _clone(cloud, item, item["sk"]["S"], size - 1, "cr-0elsewhere", had - 1)
    table = _table(cloud.names.state_table)
    (cover,) = [i for i in _items(cloud, "Reservation") if i["sk"]["S"].startswith("Covered#")]
    zone = item["zone"]["S"]
    for n in range(had - 1, size - 1):
        member = f"cr-0elsewhere{n:06d}"
        cover["members"]["L"].append({"S": member})
        cover["placements"]["M"][member] = {"S": f"{OTHER_TYPE}/{zone}"}
    table.put_item(cover)


def _usable_here(cloud: Cloud, had: int, size: int) -> None:
    """Reservations the request could launch into: clones of the pool's own snapshot (its type,
    zone and room), added to its coverage item as the sync would (with the room it saw)."""
    stored = [i for i in _items(cloud, "Reservation") if i["sk"]["S"].startswith("cr-")]
    item = copy.deepcopy(min(stored, key=lambda i: len(i["sk"]["S"])))
    _clone(cloud, item, item["sk"]["S"], size - 1, "cr-0usable", had - 1)
    table = _table(cloud.names.state_table)
    (cover,) = [i for i in _items(cloud, "Reservation") if i["sk"]["S"].startswith("Covered#")]
    placement = f"{item['instanceType']['S']}/{item['zone']['S']}"
    room = {"N": item["available"]["N"]}
    cover.setdefault("room", {"M": {}})
    for n in range(had - 1, size - 1):
        member = f"cr-0usable{n:06d}"
        cover["members"]["L"].append({"S": member})
        cover["placements"]["M"][member] = {"S": placement}
        cover["room"]["M"][member] = room
    table.put_item(cover)


def _more_pools(cloud: Cloud, had: int, size: int) -> None:
    item = next(i for i in _items(cloud, "NodePool") if i["sk"]["S"] == POOL)
    _clone(cloud, item, f'"{POOL}', size - 1, '"other-pool-', had - 1)
    # And each clone's copy in the weight-ordered index, as its apply writes it (the sort key
    # ends with the name unquoted: the pool's name is nowhere else unquoted in the copy).
    copies = [i for i in _items(cloud, POOL_INDEX) if i["name"]["S"] == POOL]
    for index_copy in copies:  # none at a revision before the index
        _clone(cloud, index_copy, POOL, size - 1, "other-pool-", had - 1)


def _history(cloud: Cloud, had: int, size: int) -> None:
    """Past requests: a finished request's record, intent, pointer, settled lease and instance
    items, cloned."""
    if had <= 1:
        had = 0
        cloud.send(request("past"))
    record = next(i for i in _items(cloud, "Request#past") if i["sk"]["S"] == "Record")
    pointer = next(i for i in _items(cloud, "Request#past") if i["sk"]["S"].startswith("Intent#"))
    token = pointer["sk"]["S"].removeprefix("Intent#")
    intent = _items(cloud, f"Intent#{token}")[0]
    detail = json.loads(record["detail"]["S"])
    instance_id = detail["instances"][0]["instanceId"]
    instance = _items(cloud, f"Instance#{instance_id}")[0]
    # The settled lease stays in the pool's partition as proof of settlement (a week, then TTL):
    # `Lease#past` marked settled, or `Settled#past`. Read by key: the partition holds them all.
    lease = _first_found(cloud, f"Limits#{POOL}", ("Lease#past", "Settled#past"))
    for item, old in ((record, "past"), (pointer, token), (intent, token), (lease, "past")):
        _clone(cloud, item, old, size, "past-", had)
    _clone(cloud, instance, instance_id, size, "i-past", had)


def _history_curve() -> tuple[list[Point], list[SyncPoint]]:
    """Requests and one sync run on one cloud, as history grows under them."""
    points, syncs = [], []
    with bench_cloud() as cloud:
        _stage(cloud)
        had = 1
        for size in PAST_REQUESTS:
            _history(cloud, had, size)
            had = size
            cold, warm = _per_request(cloud, "past-requests")
            points.append(Point("past requests", size, cold, warm))
            with counting() as read:
                wiring.Adapters(get_settings()).reservation_sync().run()
            state = cloud.names.state_table
            kinds = {k: n for (t, k), n in read.by_kind.items() if t == state}
            live = len(cloud.managed_instances())
            syncs.append(SyncPoint(size, read.by_table.get(state, 0), kinds, live))
    return points, syncs


def unnamed() -> list[Point]:
    """The curve of compatible pools, for a request that names none."""
    return _curve(UNNAMED, POOLS_UNNAMED, _more_pools, named=False)


def unnamed_beside(baseline: str = BASELINE) -> list[Point]:
    """That curve, each point with BASELINE's figures beside it (measured in the same run)."""
    with extracted(baseline) as folder:
        theirs = measured_in(folder, __file__)
    return [
        replace(p, before_cold=t["cold"], before_warm=t["warm"])
        for p, t in zip(unnamed(), theirs, strict=True)
    ]


def run() -> tuple[list[Point], list[SyncPoint]]:
    points = _curve("reservations", RESERVATIONS, _unrelated_reservations)
    points += _curve("selected reservations of other types", RESERVATIONS, _selected_elsewhere)
    points += _curve(USABLE, RESERVATIONS, _usable_here)
    points += _curve("node pools", POOLS, _more_pools)
    points += unnamed_beside()
    history, syncs = _history_curve()
    return points + history, syncs


def main() -> int:
    """`--json`: the curve of compatible pools over the code on the path (how BASELINE is
    measured); else every curve, printed."""
    if "--json" in sys.argv:
        print(json.dumps([asdict(p) for p in unnamed()]))
        return 0
    points, syncs = run()
    for p in points:
        print(p)
    for s in syncs:
        print(s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
