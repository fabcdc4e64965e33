"""What operators change (`apply`, `delete`): NodeClasses, NodePools, CapacityQuotas and
PriorityClasses, each stored through its own store. Built by the composition root
(`wiring.Adapters.configuration`); the CLI reads the files, converts each document to its hubs
and prints what this answers.

The checks across documents: those applied together (`conflicts_among`, before anything is
stored) and each against what is stored (a NodePool naming no stored NodeClass, a quota
conflicting with the stored quotas, a reservation naming no stored PriorityClass, a NodeClass
deleted while a NodePool names it). The stores read and write conditioned on what was read;
the decisions across quotas are the domain's (`domain/apis/quota_changes.py`); the loops that
read, decide and write again when a concurrent change moved what was read are here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from capacity_launcher.domain.apis.config import NodeClass, NodePool
from capacity_launcher.domain.apis.priority_classes import (
    PRIORITY_CLASS,
    PriorityClass,
    check_change,
    check_global_default,
    missing_class,
    named_class,
)
from capacity_launcher.domain.apis.quota_changes import (
    QuotaApplyRead,
    QuotaDelete,
    QuotaDeleteRead,
    QuotaPut,
    kept_body,
    plan_apply,
    plan_delete,
)
from capacity_launcher.domain.apis.quota_sets import conflicts
from capacity_launcher.domain.apis.quotas import CapacityQuota
from capacity_launcher.domain.errors import ConditionFailed, ConfigConflict, NotFound

if TYPE_CHECKING:
    from capacity_launcher.domain.apis.kept_fields import Kept

Hub = NodeClass | NodePool | CapacityQuota | PriorityClass

# An apply or delete that keeps meeting concurrent changes gives up and says so (the user
# retries).
_APPLY_QUOTA_TRIES = 3
_DELETE_TRIES = 3


class QuotaWrites(Protocol):
    """CapacityQuota items: what an apply or delete reads, and its conditioned write
    (ConditionFailed when something read moved)."""

    def apply_read(self, name: str) -> QuotaApplyRead: ...
    def put(self, write: QuotaPut) -> None: ...
    def delete_read(self, name: str) -> QuotaDeleteRead: ...
    def delete(self, write: QuotaDelete) -> None: ...
    def priority_class_stored(self, name: str) -> bool: ...


class ConfigWrites(Protocol):
    def apply(self, document: NodeClass | NodePool, kept: Kept | None = None) -> None: ...
    def delete_pool(self, name: str) -> None: ...
    def class_users(self, name: str) -> tuple[int, list[str]]: ...
    def delete_class(self, name: str, version: int) -> bool: ...
    def quotas(self) -> QuotaWrites: ...
    def forget(self) -> None: ...


class PriorityClassWrites(Protocol):
    def priority_classes(self) -> list[PriorityClass]: ...
    def apply(self, applied: PriorityClass) -> None: ...
    def delete(self, name: str) -> None: ...


def conflicts_among(documents: Iterable[Hub]) -> list[str]:
    """What the documents of one apply refuse together (their quotas are checked together,
    as the store checks each against the rest)."""
    quotas = (d for d in documents if isinstance(d, CapacityQuota))
    return [str(error) for error in conflicts(quotas)]


@dataclass(frozen=True)
class Configuration:
    config: ConfigWrites
    priority_classes: PriorityClassWrites

    def stored_priority_classes(self) -> list[PriorityClass]:
        """The PriorityClasses stored now (what an apply's reservations may name, beside those
        it applies)."""
        return self.priority_classes.priority_classes()

    def apply(self, document: Hub, kept: Kept | None = None) -> None:
        """Store one hub document (CapacityLauncherError naming the rule when a store refuses
        it)."""
        if isinstance(document, PriorityClass):
            self.priority_classes.apply(document)
        elif isinstance(document, CapacityQuota):
            apply_quota(self.config.quotas(), document, kept)
            self.config.forget()
        else:
            self.config.apply(document, kept)

    def check(
        self, document: Hub, kept: Kept | None = None, applied_with: Iterable[Hub] = ()
    ) -> None:
        """What `apply` of this document would refuse, against what is stored, writing nothing
        (`apply --dry-run=server`, `diff`): the same CapacityLauncherError. ``applied_with``: the
        documents the same apply stores before it, which its references may name."""
        earlier = list(applied_with)
        if isinstance(document, PriorityClass):
            stored = {c.name: c for c in self.priority_classes.priority_classes()}
            check_change(stored.get(document.name), document)
            others = {**stored, **{d.name: d for d in earlier if isinstance(d, PriorityClass)}}
            check_global_default(others.values(), document)
        elif isinstance(document, CapacityQuota):
            quotas = self.config.quotas()
            named = _quota_write(quotas, document, kept).priority_class
            applied = named is None or _named(PriorityClass, named, earlier)
            if not applied and not quotas.priority_class_stored(str(named)):
                raise missing_class(str(named))
        elif isinstance(document, NodePool):
            _check_class_stored(self.config, document, earlier)

    def delete(self, kind: str, name: str) -> None:
        """Delete one document (NotFound when none is stored)."""
        if kind == PRIORITY_CLASS:
            self.priority_classes.delete(name)
        elif kind == "CapacityQuota":
            delete_quota(self.config.quotas(), name)
            self.config.forget()
        elif kind == "NodeClass":
            delete_class(self.config, name)
        else:
            self.config.delete_pool(name)


def apply_quota(quotas: QuotaWrites, quota: CapacityQuota, kept: Kept | None = None) -> None:
    """Store `quota` if, with the stored others, no requester has two quotas in one flavor, and
    the PriorityClass it was applied naming (in ``kept``) is stored; checked again on what
    moved when another apply lands between the check and the write."""
    priority_class = named_class(kept)
    for _ in range(_APPLY_QUOTA_TRIES):
        write = _quota_write(quotas, quota, kept)
        try:
            quotas.put(write)
            return
        except ConditionFailed:
            if priority_class is not None and not quotas.priority_class_stored(priority_class):
                raise missing_class(priority_class) from None
            # another quota was applied meanwhile: check the conflicts again
    raise ConfigConflict(
        f"CapacityQuota {quota.name}: other quotas kept changing while it was applied; try again"
    )


def _named(kind: type, name: str, documents: list[Hub]) -> bool:
    return any(isinstance(d, kind) and d.name == name for d in documents)


def _check_class_stored(config: ConfigWrites, pool: NodePool, earlier: list[Hub]) -> None:
    """The NodeClass a pool names is stored, or applied before it (the store's own refusal)."""
    ref = pool.spec.node_class_ref
    if _named(NodeClass, ref, earlier):
        return
    try:
        config.class_users(ref)
    except NotFound:
        raise ConfigConflict(
            f"NodePool {pool.name}: spec.nodeClassRef: NodeClass {ref!r} does not exist; "
            "apply it first"
        ) from None


def _quota_write(quotas: QuotaWrites, quota: CapacityQuota, kept: Kept | None) -> QuotaPut:
    """The write `quota`'s apply would make now, or ConfigConflict naming the stored quotas it
    conflicts with."""
    return plan_apply(quota, kept_body(kept), named_class(kept), quotas.apply_read(quota.name))


def delete_quota(quotas: QuotaWrites, name: str) -> None:
    """Delete quota `name` (NotFound if it is not stored): a lease decided with it stored
    cannot be written after this returns. The delete holds only for the document read (an
    apply meanwhile may name other pools): read again when it moved."""
    for _ in range(_DELETE_TRIES):
        try:
            quotas.delete(plan_delete(name, quotas.delete_read(name)))
            return
        except ConditionFailed:
            continue  # applied or deleted meanwhile: read it again
    raise ConfigConflict(
        f"CapacityQuota {name} kept changing while it was being deleted; try again"
    )


def delete_class(config: ConfigWrites, name: str) -> None:
    """Delete NodeClass `name` unless a NodePool names it (ConfigConflict naming them; NotFound
    if it is not stored), conditioned on the version read before its users."""
    for _ in range(_DELETE_TRIES):
        version, users = config.class_users(name)
        if users:
            raise ConfigConflict(
                f"NodeClass {name} is used by NodePool(s) {', '.join(users)}; delete them first"
            )
        if config.delete_class(name, version):
            return
    raise ConfigConflict(f"NodeClass {name} kept changing while it was being deleted; try again")
