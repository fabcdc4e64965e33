"""NodeClass and NodePool documents in the state table: apply, get, list, delete."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, Literal

from botocore.exceptions import ClientError

from capacity_launcher.adapters.aws import client
from capacity_launcher.adapters.cache import TtlCache
from capacity_launcher.adapters.dynamodb import (
    from_item,
    is_condition_failure,
    key,
    raise_for,
    to_item,
)
from capacity_launcher.domain.config import NodeClass, NodePool, parse_document, to_document
from capacity_launcher.domain.errors import ConfigConflict, NotFound

Kind = Literal["NodeClass", "NodePool"]


class ConfigStore:
    def __init__(
        self, table_name: str, dynamodb: Any | None = None, cache_seconds: float = 0.0
    ) -> None:
        self._table = table_name
        self._db = dynamodb or client("dynamodb")
        self._cache: TtlCache[list[Any]] = TtlCache(cache_seconds)

    def apply(self, document: NodeClass | NodePool) -> None:
        """Create or replace a document; a NodePool must name an existing NodeClass."""
        kind: Kind = document.kind
        item = to_item(
            {
                "pk": kind,
                "sk": document.metadata.name,
                "document": json.dumps(to_document(document), sort_keys=True),
                "updatedAt": datetime.now(UTC).isoformat(),
            }
        )
        try:
            if isinstance(document, NodePool):
                ref = document.spec.node_class_ref
                self._db.transact_write_items(
                    TransactItems=[
                        {
                            "ConditionCheck": {
                                "TableName": self._table,
                                "Key": key("NodeClass", ref),
                                "ConditionExpression": "attribute_exists(pk)",
                            }
                        },
                        {"Put": {"TableName": self._table, "Item": item}},
                    ]
                )
            else:
                self._db.put_item(TableName=self._table, Item=item)
        except ClientError as error:
            if is_condition_failure(error):
                raise ConfigConflict(
                    f"NodePool {document.metadata.name}: spec.nodeClassRef: "
                    f"NodeClass {ref!r} does not exist; apply it first"
                ) from error
            raise_for("TransactWriteItems", error)
        self._cache.invalidate()

    def node_class(self, name: str) -> NodeClass:
        document = self._get("NodeClass", name)
        assert isinstance(document, NodeClass)
        return document

    def node_pool(self, name: str) -> NodePool:
        document = self._get("NodePool", name)
        assert isinstance(document, NodePool)
        return document

    def node_pools(self) -> list[NodePool]:
        return [d for d in self._cached_list("NodePool") if isinstance(d, NodePool)]

    def node_classes(self) -> list[NodeClass]:
        return [d for d in self._cached_list("NodeClass") if isinstance(d, NodeClass)]

    def delete(self, kind: Kind, name: str) -> None:
        if kind == "NodeClass":
            users = [
                p.metadata.name
                for p in self._list("NodePool")
                if isinstance(p, NodePool) and p.spec.node_class_ref == name
            ]
            if users:
                raise ConfigConflict(
                    f"NodeClass {name} is used by NodePool(s) {', '.join(sorted(users))}; "
                    "delete them first"
                )
        try:
            self._db.delete_item(
                TableName=self._table,
                Key=key(kind, name),
                ConditionExpression="attribute_exists(pk)",
            )
        except ClientError as error:
            if is_condition_failure(error):
                raise NotFound(kind, name) from error
            raise_for("DeleteItem", error)
        self._cache.invalidate()

    def _get(self, kind: Kind, name: str) -> NodeClass | NodePool:
        for document in self._cached_list(kind):
            if document.metadata.name == name:
                return document  # type: ignore[no-any-return]
        raise NotFound(kind, name)

    def _cached_list(self, kind: Kind) -> list[Any]:
        return self._cache.get_or_load(kind, lambda: self._list(kind))

    def _list(self, kind: Kind) -> list[NodeClass | NodePool]:
        try:
            pages = self._db.get_paginator("query").paginate(
                TableName=self._table,
                KeyConditionExpression="pk = :kind",
                ExpressionAttributeValues={":kind": {"S": kind}},
                ConsistentRead=True,
            )
            items = [from_item(i) for page in pages for i in page["Items"]]
        except ClientError as error:
            raise_for("Query", error)
            raise
        return [parse_document(json.loads(i["document"])) for i in items]
