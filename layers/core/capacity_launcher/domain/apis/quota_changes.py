"""What an apply or a delete of a CapacityQuota decides, from what it read: the policy across
quotas, apart from the loop that retries it (service/configuration.py) and the store that reads
and writes the items (adapters/quota_store.py).

An apply reads the quota set's version, the stored quotas, this quota as stored and the pools an
earlier apply or delete of it left to bump (`QuotaApplyRead`). It is refused when, with the
stored others, a requester would have two quotas in one flavor; it bumps the quota set's version
it read (so two applies that conflict only together cannot both succeed) and the quota
generation of each NodePool the stored and the new document name, unless the same document and
kept fields are stored already: then it is put again only while stored as it is, and bumps
nothing (a GitOps loop re-applying its quotas costs no lease a retry). A delete reads this quota
as stored and its outstanding pools (`QuotaDeleteRead`) and bumps the pools the stored document
names; a quota deleted by a delete whose later bumps failed has those bumps finished.

A quota applied naming a PriorityClass (an OME reservation's ``priorityClassName``) takes the
class's value as its priority, as the apply read it, and is written conditioned on the classes'
version it read. Naming one not stored, it is stored all the same, with priority 0, marked
waiting for the class (`unresolved`): Kubernetes applies documents in any order. The class's
apply stores each quota waiting for it again (service/configuration.py), which resolves it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from capacity_launcher.domain.apis.documents import stored_body
from capacity_launcher.domain.apis.quota_sets import conflicts
from capacity_launcher.domain.apis.quotas import CapacityQuota
from capacity_launcher.domain.errors import ConfigConflict, NotFound

if TYPE_CHECKING:
    from capacity_launcher.domain.apis.kept_fields import Kept
    from capacity_launcher.domain.apis.priority_classes import PriorityClass


@dataclass(frozen=True)
class StoredQuota:
    """A quota's item as stored: its body and kept fields as the table spells them, and the
    NodePools its document names (none when it no longer parses: it governs nothing)."""

    body: str
    kept: str | None
    pools: tuple[str, ...]
    # The PriorityClass it named that was not stored when it was written (None: resolved).
    unresolved: str | None = None


@dataclass(frozen=True)
class OutstandingBumps:
    """The pools an apply or delete of a quota left to bump (its later transactions failed),
    and whose they are (`token`)."""

    pools: tuple[str, ...] = ()
    token: str | None = None


@dataclass(frozen=True)
class QuotaApplyRead:
    """What an apply's cross-quota check reads: the quota set's version first, then the valid
    stored quotas, the applied quota as stored (None: new) and its outstanding bumps."""

    version: int
    quotas: tuple[CapacityQuota, ...]
    stored: StoredQuota | None
    outstanding: OutstandingBumps
    # The classes' version, read before the class the apply names (`named`: None when it is not
    # stored, or none is named).
    classes_version: int = 0
    named: PriorityClass | None = None


@dataclass(frozen=True)
class QuotaPut:
    """The write of an apply: `seen` is the quota set's version its check read (None: the same
    document and kept fields are stored, put again only while stored so, no version bumped);
    `priority_class` the class it was applied naming, and `classes_seen` the classes' version
    it was resolved at (the write holds only while no class was applied or deleted since);
    `unresolved` whether that class was not stored (the quota is marked waiting for it);
    `pools` the NodePools whose quota generation it bumps; `outstanding` the token of the
    earlier bumps it finishes."""

    name: str
    body: str
    kept: str | None
    seen: int | None
    priority_class: str | None
    pools: tuple[str, ...]
    outstanding: str | None
    classes_seen: int | None = None
    unresolved: bool = False


@dataclass(frozen=True)
class QuotaDeleteRead:
    """What a delete reads: the quota as stored (None: not stored) and its outstanding bumps."""

    stored: StoredQuota | None
    outstanding: OutstandingBumps


@dataclass(frozen=True)
class QuotaDelete:
    """The write of a delete: the document deleted while stored as `body` (None: deleted
    already, only its outstanding bumps are left), the pools whose quota generation it bumps,
    and the token of the earlier bumps it finishes."""

    name: str
    body: str | None
    pools: tuple[str, ...]
    outstanding: str | None


def kept_body(kept: Kept | None) -> str | None:
    """The fields an apply kept as the table stores them (None: it kept none)."""
    return json.dumps(kept.to_json(), sort_keys=True) if kept else None


def plan_apply(
    quota: CapacityQuota, kept: str | None, priority_class: str | None, read: QuotaApplyRead
) -> QuotaPut:
    """The write of `quota`'s apply, or ConfigConflict naming the quotas it conflicts with.
    Naming `priority_class`, its priority is that class's value as read (0 while it is not
    stored: then it is written waiting for the class)."""
    found = conflicts([*(q for q in read.quotas if q.name != quota.name), quota])
    if found:
        raise ConfigConflict("; ".join(str(error) for error in found))
    unresolved = priority_class is not None and read.named is None
    if priority_class is not None:
        quota = with_priority(quota, 0 if read.named is None else read.named.value)
    body = stored_body(quota)
    waiting = priority_class if unresolved else None
    unchanged = read.stored is not None and (
        read.stored.body,
        read.stored.kept,
        read.stored.unresolved,
    ) == (body, kept, waiting)
    named = set() if unchanged else {*_stored_pools(read.stored), *pools_named(quota)}
    return QuotaPut(
        name=quota.name,
        body=body,
        kept=kept,
        seen=None if unchanged else read.version,
        priority_class=priority_class,
        pools=tuple(sorted({*named, *read.outstanding.pools})),
        outstanding=read.outstanding.token,
        classes_seen=None if priority_class is None else read.classes_version,
        unresolved=unresolved,
    )


def with_priority(quota: CapacityQuota, priority: int) -> CapacityQuota:
    """`quota` with `priority` (the value of the PriorityClass it names)."""
    if quota.spec.priority == priority:
        return quota
    spec = quota.spec.model_copy(update={"priority": priority})
    return quota.model_copy(update={"spec": spec})


def plan_delete(name: str, read: QuotaDeleteRead) -> QuotaDelete:
    """The write of quota `name`'s delete, or NotFound when it is not stored and nothing of an
    earlier delete is left to finish."""
    if read.stored is None and read.outstanding.pools:
        # Deleted by a delete whose later bumps failed: finish them.
        return QuotaDelete(name, None, read.outstanding.pools, read.outstanding.token)
    if read.stored is None:
        raise NotFound("CapacityQuota", name)
    pools = sorted({*read.stored.pools, *read.outstanding.pools})
    return QuotaDelete(name, read.stored.body, tuple(pools), None)


def pools_named(quota: CapacityQuota) -> tuple[str, ...]:
    """The NodePools a quota names, sorted."""
    return tuple(sorted({flavor.name for flavor in quota.flavors()}))


def _stored_pools(stored: StoredQuota | None) -> tuple[str, ...]:
    return () if stored is None else stored.pools
