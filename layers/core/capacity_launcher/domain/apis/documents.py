"""Configuration documents by kind: one document in, its validated model out, and back.

The one place that knows every kind (NodeClass and NodePool in `config.py`, CapacityQuota in
`quotas.py`), so that neither of those modules needs the other's.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from capacity_launcher.domain.apis.config import (
    CAPACITY_QUOTA,
    KINDS,
    NODE_CLASS,
    NODE_POOL,
    NodeClass,
    NodePool,
)
from capacity_launcher.domain.apis.quotas import CapacityQuota, parse_quota
from capacity_launcher.domain.errors import ConfigValidationError
from capacity_launcher.domain.field_errors import FieldError, field_errors

if TYPE_CHECKING:  # the served versions are the apply and read paths': a launcher's cold start,
    # which reads the hub alone, does not make their classes
    from capacity_launcher.domain.apis.kept_fields import Kept

Document = NodeClass | NodePool | CapacityQuota
_MODELS: dict[str, type[NodeClass] | type[NodePool]] = {NODE_CLASS: NodeClass, NODE_POOL: NodePool}


def parse_document(data: Mapping[str, Any]) -> Document:
    """Validate one configuration document; every broken rule is reported, by document path."""
    if not isinstance(data, Mapping):
        raise ConfigValidationError([FieldError("body", "must be a mapping (one document)")])
    kind = data.get("kind")
    if kind is None:
        raise ConfigValidationError([FieldError("kind", f"is required: {KINDS}")])
    if kind == CAPACITY_QUOTA:
        try:
            return parse_quota(data)
        except RecursionError:
            raise ConfigValidationError([FieldError("body", "is nested too deeply")]) from None
    model = _MODELS.get(kind) if isinstance(kind, str) else None
    if model is None:
        raise ConfigValidationError([FieldError("kind", f"must be {KINDS}")])
    try:
        return model.model_validate(dict(data))
    except ValidationError as error:
        raise ConfigValidationError(field_errors(error)) from None
    except RecursionError:
        raise ConfigValidationError([FieldError("body", "is nested too deeply")]) from None


def to_document(model: Document) -> dict[str, Any]:
    """The stored / printed form: document names, JSON types, unset fields left out."""
    document: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return document


def stored_body(model: Document) -> str:
    """The document as the state table stores it (one spelling per document)."""
    return json.dumps(to_document(model), sort_keys=True)


def revision_of(model: Document) -> str:
    """A digest of the document as stored: equal for equal documents, whatever copy it is
    computed from, so a lease can condition on the revision of the copy its decision used."""
    return hashlib.sha256(stored_body(model).encode()).hexdigest()[:32]


def is_revision(body: str, revision: str) -> bool:
    """Whether a stored body is, as this version reads it, the document of `revision`. A
    version of the service that spells a document otherwise (a field it leaves out or adds)
    stores another revision for the same document: the stored revision does not say alone
    whether the document changed."""
    try:
        document = parse_document(json.loads(body))
    except (ConfigValidationError, TypeError, ValueError):
        return False
    return revision_of(document) == revision


@dataclass(frozen=True)
class Revisions:
    """The pool and the NodeClass a request was resolved with, as revisions, and the NodePools'
    generation its pool was chosen from (a request that named no pool): a lease holds only while
    all are still stored as they were (a container's copy may be seconds old)."""

    pool: str
    node_class_name: str
    node_class: str
    pools_generation: int | None = None  # None: the request named its pool

    @classmethod
    def of(
        cls, pool: NodePool, node_class: NodeClass, pools_generation: int | None = None
    ) -> Revisions:
        name = node_class.metadata.name
        return cls(revision_of(pool), name, revision_of(node_class), pools_generation)


@dataclass(frozen=True)
class InvalidDocument:
    """A stored document that does not parse any more (a model rule changed, a hand edit)."""

    kind: str
    name: str
    reason: str


@dataclass(frozen=True)
class StoredDocument:
    """A stored hub document and what its apply kept that the hub has no place for."""

    document: NodeClass | NodePool | CapacityQuota
    kept: Kept | None
