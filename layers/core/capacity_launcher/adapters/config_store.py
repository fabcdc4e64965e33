"""NodeClass, NodePool and CapacityQuota documents in the state table: get, list, apply, delete.

A warm container keeps the lists for `cache_seconds`; a cache may answer "found", never "missing":
a name it lacks is read through (strongly consistent) before anyone is told it does not exist.
A stored document that no longer parses affects only itself: it is skipped with a warning, and
`invalid()` reports it. A NodePool may name a NodeClass not stored yet (Kubernetes applies in any
order; its status says so); a NodeClass's delete is conditioned on the NodePools' generation it
read the pools naming it at, so it cannot race a pool applied naming it.
Every NodePool and NodeClass item also carries its `revision` (`documents.revision_of`, of the
copy a reader parses from the stored body): a lease conditions on the revisions the request was
resolved with, so an apply that returned governs every lease written after it, and `forget`
drops this container's copies when a lease finds them older. A writer of another version may
spell a document otherwise, and so store another revision for it: the lease then reads the
stored document before it calls it changed (`PoolItems.as_stored`). Every apply and delete of a
NodePool bumps the NodePools' generation (`pool_set`) the same way as the quotas' (not an apply
of the document stored already: a GitOps loop re-applying its pools leaves every choice as it
was): a request that named no pool leases conditioned on the generation of the listing it chose
its pool from, the NodePools' weight-ordered index (adapters/pool_index.py) read a page at a
time, kept in the transaction of each pool's apply and delete (adapters/pool_writes.py).
CapacityQuota items are read here (`quota_set`, with the quota generations that leases
condition on) and written through `quotas()` (adapters/quota_store.py), by the configuration
use case that checks them across quotas (service/configuration.py); so is a NodeClass's delete,
which reads what uses it (`class_users`) and deletes it conditioned on what it read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from capacity_launcher.adapters.aws import aws_call, client
from capacity_launcher.adapters.cache import TtlCache
from capacity_launcher.adapters.cohort_store import CohortStore, cohorts_of
from capacity_launcher.adapters.config_items import (
    MEMBERS_HELD,
    POOL_INDEXED,
    POOL_SET_KEY,
    QUOTA_POOL_PREFIX,
    QUOTA_SET_KEY,
    UNRESOLVED,
    generation_check,
    kept_of,
    node_class_ref,
    parse_item,
    query_items,
    quota_pool_key,
    read_item,
)

# Re-exported: where they were defined before config_items.py (other modules import them here).
from capacity_launcher.adapters.config_items import InvalidDocument as InvalidDocument
from capacity_launcher.adapters.config_items import StoredDocument as StoredDocument
from capacity_launcher.adapters.config_items import (
    quota_generation_check as quota_generation_check,
)
from capacity_launcher.adapters.dynamodb import key, to_item
from capacity_launcher.adapters.pool_index import index_all, index_pages
from capacity_launcher.adapters.pool_writes import delete_pool, put_pool
from capacity_launcher.adapters.quota_store import QuotaStore
from capacity_launcher.domain.apis.config import (
    NodeClass,
    NodeClassUsers,
    NodePool,
    PoolSet,
)
from capacity_launcher.domain.apis.documents import revision_of, stored_body
from capacity_launcher.domain.apis.quota_changes import kept_body as kept_of_apply
from capacity_launcher.domain.apis.quota_sets import QuotaSet
from capacity_launcher.domain.apis.quotas import CapacityQuota
from capacity_launcher.domain.errors import (
    ConditionFailed,
    NotFound,
    StoredDocumentInvalid,
)
from capacity_launcher.domain.quantities import limits_token

if TYPE_CHECKING:  # PriorityClasses and the served versions are the apply path's: imported
    # there, so a launcher's cold start does not make their classes
    from capacity_launcher.adapters.priority_class_store import PriorityClassStore
    from capacity_launcher.domain.apis.kept_fields import Kept

Kind = Literal["NodeClass", "NodePool", "CapacityQuota"]
_QUOTA_SET_KEY = QUOTA_SET_KEY


@dataclass
class _Listing:
    documents: dict[str, Any] = field(default_factory=dict)
    invalid: dict[str, InvalidDocument] = field(default_factory=dict)


class ConfigStore:
    def __init__(
        self,
        table_name: str,
        dynamodb: Any | None = None,
        cache_seconds: float = 0.0,
        *,
        clock: Callable[[], datetime],
        keep_pools: bool = False,
    ) -> None:
        """`clock`: the composition root's, that each document's `updatedAt` is stamped with.
        `keep_pools`: a store a long-lived use case lists every pool through again and again
        (the sync's parts, each minute) keeps its listing while the generation says it is
        current (`_read_pools`)."""
        self._keep_pools = keep_pools
        self._table = table_name
        self._clock = clock
        self._db = dynamodb or client("dynamodb")
        self._cache: TtlCache[_Listing] = TtlCache(cache_seconds)
        self._documents: TtlCache[NodeClass | NodePool | CapacityQuota] = TtlCache(cache_seconds)
        self._quota_sets: TtlCache[QuotaSet] = TtlCache(cache_seconds)
        self._pool_sets: TtlCache[PoolSet] = TtlCache(cache_seconds)
        # The last listing read whole: kept while the NodePools' generation says it is current.
        self._listed_pools: PoolSet | None = None
        # Likewise every NodePool as `node_pools` lists them, with the generation read before.
        self._pools_listing: tuple[int, _Listing] | None = None

    def apply(self, document: NodeClass | NodePool, kept: Kept | None = None) -> None:
        """Create or replace a NodeClass or NodePool (a NodePool's NodeClass need not be stored
        yet). ``kept`` (the fields its apply kept, docs/api-versions.md) replaces what the
        item kept before. A CapacityQuota's apply is the configuration use case's, through
        `quotas()` (its cross-quota check)."""
        kept_body = kept_of_apply(kept)
        kind: Kind = document.kind
        now = self._clock().isoformat()
        body = stored_body(document)
        # Of the copy a reader parses from the body, so every reader computes the same one.
        revision = revision_of(self._parse(kind, {"sk": document.metadata.name, "document": body}))
        if isinstance(document, NodePool):
            item = {
                "pk": kind,
                "sk": document.metadata.name,
                "document": body,
                # Every lease checks it: a launcher with a stale copy cannot overrun.
                "limits": limits_token(document.spec.limits),
                # And the whole of it: a lease decided on another revision does not hold.
                "revision": revision,
                "updatedAt": now,
                # Static (spec.replicas) or dynamic, for good: the put is conditioned on it.
                "staticPool": document.spec.is_static,
            }
            if kept_body is not None:
                item["kept"] = kept_body
            put_pool(self._db, self._table, item)
        else:
            # An update, not a put: the version must survive a re-apply of the class.
            values: dict[str, Any] = {
                ":document": body,
                ":revision": revision,
                ":now": now,
                ":one": 1,
            }
            update = "SET #document = :document, revision = :revision, updatedAt = :now"
            if kept_body is None:
                update += " REMOVE kept"
            else:
                update += ", kept = :kept"
                values[":kept"] = kept_body
            with aws_call("UpdateItem"):
                self._db.update_item(
                    TableName=self._table,
                    Key=key(kind, document.metadata.name),
                    UpdateExpression=f"{update} ADD version :one",
                    ExpressionAttributeNames={"#document": "document"},
                    ExpressionAttributeValues=to_item(values),
                )
        self._invalidate()

    def priority_classes(self) -> PriorityClassStore:
        """The PriorityClasses stored in the same table (adapters/priority_class_store.py)."""
        from capacity_launcher.adapters.priority_class_store import PriorityClassStore

        return PriorityClassStore(self._table, self._db, clock=self._clock)

    def cohorts(self) -> CohortStore:
        """The Kueue Cohorts stored beside the quotas' generations (adapters/cohort_store.py);
        after a write through it, `forget` this store's copies."""
        return CohortStore(self._table, self._db, clock=self._clock)

    def quotas(self) -> QuotaStore:
        """The CapacityQuota items' reads and writes in the same table (adapters/quota_store.py);
        after a write through it, `forget` this store's copies."""
        return QuotaStore(self._table, self._db, clock=self._clock)

    def forget(self) -> None:
        """Drop this container's copies: the next read of any document goes to the table."""
        self._invalidate()

    def _invalidate(self) -> None:
        self._cache.invalidate()
        self._documents.invalidate()
        self._quota_sets.invalidate()
        self._pool_sets.invalidate()
        self._pools_listing = None

    def node_class(self, name: str) -> NodeClass:
        document = self._get("NodeClass", name)
        assert isinstance(document, NodeClass)
        return document

    def node_pool(self, name: str) -> NodePool:
        document = self._get("NodePool", name)
        assert isinstance(document, NodePool)
        return document

    def node_pools(self, *, fresh: bool = False) -> list[NodePool]:
        """Every valid NodePool; `fresh` reads the table instead of the container's copy."""
        listing = self._listing("NodePool", fresh)
        return [d for d in listing.documents.values() if isinstance(d, NodePool)]

    def pool_set(self, *, fresh: bool = False) -> PoolSet:
        """The valid NodePools with the generation they were read at (what a request naming no
        pool chooses from); `fresh` reads both now."""
        if fresh:
            self._pool_sets.invalidate()
        return self._pool_sets.get_or_load("PoolSet", self._read_pool_set)

    def _read_pool_set(self) -> PoolSet:
        # The generation first: a pool applied after it bumps it (see `_read_quota_set`).
        stored = self._read_one(*POOL_SET_KEY) or {}
        generation = int(stored.get("version", 0))
        listed = self._listed_pools
        if listed is not None and generation and listed.generation == generation:
            # Every apply that changes a pool, and every delete, bumps the generation in the
            # same transaction: nothing changed since the listing was read (one GetItem where
            # the whole partition was read again, whatever the number of pools: issue 38).
            return listed
        if POOL_INDEXED in stored and int(stored[POOL_INDEXED]) == generation:
            # Every bump since the index was complete kept it: read it a page at a time, in
            # the order pools are tried, only as far as a request looks (issue 38).
            self._listed_pools = index_pages(self._db, self._table, generation)
            return self._listed_pools
        items = self._pool_items()
        listing = self._listing_of("NodePool", items)
        pools = (d for d in listing.documents.values() if isinstance(d, NodePool))
        self._listed_pools = PoolSet(generation, tuple(pools))
        index_all(self._db, self._table, generation, items)
        return self._listed_pools

    def node_classes(self, *, fresh: bool = False) -> list[NodeClass]:
        listing = self._listing("NodeClass", fresh)
        return [d for d in listing.documents.values() if isinstance(d, NodeClass)]

    def capacity_quota(self, name: str) -> CapacityQuota:
        document = self._get("CapacityQuota", name)
        assert isinstance(document, CapacityQuota)
        return document

    def capacity_quotas(self, *, fresh: bool = False) -> list[CapacityQuota]:
        """The valid quotas: those of `quota_set`, so a request that resolves its requester's
        quota and then leases under it reads the quotas once, not twice."""
        return list(self.quota_set(fresh=fresh).quotas)

    def priority_value(self, name: str) -> int | None:
        """The value of the applied PriorityClass `name` (None: none is applied): read when a
        launch request names one (its priorityClassName), one Query of the classes."""
        return self.priority_classes().table().values.get(name)

    def quota_set(self, *, fresh: bool = False) -> QuotaSet:
        """The valid quotas with the generation they were read at; `fresh` reads both now (and
        refreshes the container's copy that `capacity_quotas` answers from too)."""
        if fresh:
            self._quota_sets.invalidate()
        return self._quota_sets.get_or_load("QuotaSet", self._read_quota_set)

    def note_members_held(self, pool: str, generation: int) -> None:
        """The container's copy of the quotas noted: `pool`'s members held at `generation` (a
        lease's admission held them, adapters/pool_members.py), so its next admissions there
        do not hold them again."""
        self._quota_sets.replace("QuotaSet", lambda held: held.members_held(pool, generation))

    def quota_generation(self, pool: str) -> int:
        """`pool`'s quota generation as stored now (strongly consistent)."""
        return int((self._read_one(*quota_pool_key(pool)) or {}).get("version", 0))

    def _read_quota_set(self) -> QuotaSet:
        # The generations first: a quota written after them bumps those of the pools it names,
        # so a lease conditioned on its pool's fails rather than trust a listing newer than its
        # generation says. One Query reads the quota-set version and every pool's.
        # The same Query reads the Cohorts, stored in that partition (adapters/cohort_store.py).
        generations = self._query(_QUOTA_SET_KEY[0])
        found = {str(i["sk"]): int(i.get("version", 0)) for i in generations}
        pools = {
            sk.removeprefix(QUOTA_POOL_PREFIX): version
            for sk, version in found.items()
            if sk.startswith(QUOTA_POOL_PREFIX)
        }
        holds = {
            str(i["sk"]).removeprefix(QUOTA_POOL_PREFIX): int(i[MEMBERS_HELD])
            for i in generations
            if str(i["sk"]).startswith(QUOTA_POOL_PREFIX) and MEMBERS_HELD in i
        }
        items = self._query("CapacityQuota")
        listing = self._listing_of("CapacityQuota", items)
        quotas = (d for d in listing.documents.values() if isinstance(d, CapacityQuota))
        waiting = {str(i["sk"]): str(i[UNRESOLVED]) for i in items if UNRESOLVED in i}
        return QuotaSet(
            found.get(_QUOTA_SET_KEY[1], 0),
            tuple(quotas),
            pools,
            waiting,
            cohorts=cohorts_of(generations),
            pool_holds=holds,
        )

    def invalid(self) -> list[InvalidDocument]:
        """Stored documents that no longer parse, read now (for operators)."""
        found = [*self._read_all("NodeClass").invalid.values()]
        found += self._read_all("NodePool").invalid.values()
        found += self._read_all("CapacityQuota").invalid.values()
        return found

    def delete_pool(self, name: str) -> None:
        """Delete the pool and its index copy and bump the NodePools' generation in one
        transaction, conditioned on the pool being stored as read (NotFound if it is not)."""
        delete_pool(self._db, self._table, name)
        self._invalidate()

    # -- reading -----------------------------------------------------------------------------

    def stored(self, kind: Kind, name: str) -> StoredDocument:
        """One document as stored now, with its kept fields (NotFound if it is not stored)."""
        item = self._read_one(kind, name)
        if item is None:
            raise NotFound(kind, name)
        return StoredDocument(self._parse(kind, item), kept_of(item))

    def stored_all(self, kind: Kind) -> list[StoredDocument]:
        """Every valid document of a kind as stored now, by name, with its kept fields."""
        found = []
        for item in sorted(self._query(kind), key=lambda i: str(i["sk"])):
            try:
                found.append(StoredDocument(self._parse(kind, item), kept_of(item)))
            except StoredDocumentInvalid:
                continue  # listed by invalid()
        return found

    def _get(self, kind: Kind, name: str) -> NodeClass | NodePool | CapacityQuota:
        # One item, not the whole listing: a request naming its pool reads what it uses (a miss
        # raises before anything is cached, so the cache never answers "missing").
        return self._documents.get_or_load((kind, name), lambda: self._read_document(kind, name))

    def _read_document(self, kind: Kind, name: str) -> NodeClass | NodePool | CapacityQuota:
        item = self._read_one(kind, name)
        if item is None:
            raise NotFound(kind, name)
        return self._parse(kind, item)

    def _listing(self, kind: Kind, fresh: bool) -> _Listing:
        if fresh:
            self._cache.invalidate(kind)
        kept = kind == "NodePool" and self._keep_pools
        load = self._read_pools if kept else lambda: self._read_all(kind)
        return self._cache.get_or_load(kind, load)

    def _read_pools(self) -> _Listing:
        """Every NodePool, listed again only when the NodePools' generation moved since the last
        listing (issue 38: the sync lists them in several parts each minute; one GetItem each
        where the partition was read and every document parsed). The generation is read first,
        so a pool applied after it makes the next read list again (see `_read_pool_set`)."""
        generation = int((self._read_one(*POOL_SET_KEY) or {}).get("version", 0))
        kept = self._pools_listing
        if kept is not None and generation and kept[0] == generation:
            return kept[1]
        listing = self._read_all("NodePool")
        self._pools_listing = (generation, listing)
        return listing

    def _read_all(self, kind: Kind) -> _Listing:
        return self._listing_of(kind, self._query(kind))

    def _listing_of(self, kind: Kind, items: list[dict[str, Any]]) -> _Listing:
        listing = _Listing()
        for item in items:
            try:
                listing.documents[str(item["sk"])] = self._parse(kind, item)
            except StoredDocumentInvalid as invalid:
                listing.invalid[invalid.name] = InvalidDocument(kind, invalid.name, invalid.reason)
        return listing

    def _read_one(self, kind: str, name: str) -> dict[str, Any] | None:
        return read_item(self._db, self._table, kind, name)

    @staticmethod
    def _parse(kind: Kind, item: dict[str, Any]) -> NodeClass | NodePool | CapacityQuota:
        return parse_item(kind, item)

    # -- deleting ----------------------------------------------------------------------------

    def class_users(self, name: str) -> NodeClassUsers:
        """NodeClass `name`'s version and the NodePools' generation, then the NodePools naming
        it, read after both (a pool applied naming the class in between bumps the generation);
        NotFound if it is not stored."""
        item = self._read_one("NodeClass", name)
        if item is None:
            raise NotFound("NodeClass", name)
        generation = int((self._read_one(*POOL_SET_KEY) or {}).get("version", 0))
        users = sorted(
            str(pool["sk"]) for pool in self._pool_items() if node_class_ref(pool) == name
        )
        return NodeClassUsers(int(item.get("version", 0)), generation, tuple(users))

    def delete_class(self, name: str, read: NodeClassUsers) -> bool:
        """Delete NodeClass `name` while it is at the version and the NodePools at the
        generation `read` says (False when either moved; NotFound if gone)."""
        condition = "attribute_exists(pk) AND version = :version"
        if read.version == 0:
            condition += " OR attribute_exists(pk) AND attribute_not_exists(version)"
        delete = {
            "TableName": self._table,
            "Key": key("NodeClass", name),
            "ConditionExpression": condition,
            "ExpressionAttributeValues": {":version": {"N": str(read.version)}},
        }
        check = generation_check(self._table, POOL_SET_KEY, read.pools_generation)
        try:
            with aws_call("TransactWriteItems"):
                self._db.transact_write_items(TransactItems=[check, {"Delete": delete}])
        except ConditionFailed as failed:
            if self._read_one("NodeClass", name) is not None:
                return False
            raise NotFound("NodeClass", name) from failed
        self._invalidate()
        return True

    def stored_names(self, kind: Kind) -> frozenset[str]:
        """The names of every stored document of `kind`, read now (valid or not)."""
        return frozenset(str(item["sk"]) for item in self._query(kind))

    def _pool_items(self) -> list[dict[str, Any]]:
        return self._query("NodePool")

    def _query(self, kind: str) -> list[dict[str, Any]]:
        return query_items(self._db, self._table, kind)
