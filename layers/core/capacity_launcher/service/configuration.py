"""What operators change (`apply`, `delete`): NodeClasses, NodePools, CapacityQuotas,
PriorityClasses and Kueue Cohorts, each stored through its own store. Built by the composition root
(`wiring.Adapters.configuration`); the CLI reads the files, converts each document to its hubs
and prints what this answers.

The checks across documents: those applied together (`conflicts_among`, before anything is
stored) and each against what is stored (a quota conflicting with the stored quotas, a class's
value changed or a second global default, a NodeClass deleted while a NodePool names it, a
PriorityClass deleted while a reservation names it, a Cohort making a cycle or a third level). A
document naming something not applied yet (a NodePool's NodeClass, a quota's NodePools, a
reservation's PriorityClass, a Cohort's parent) is applied all
the same, as Kubernetes does, and `apply` says what it waits for (domain/apis/references.py); a
reservation's priority is its class's value, copied by whichever of the two is applied last.
The stores read and write conditioned on what was read; the decisions are the domain's
(`domain/apis/quota_changes.py`, `priority_class_changes.py`); the loops that read, decide and
write again when a concurrent change moved what was read are here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from capacity_launcher.domain.apis.config import NodeClass, NodeClassUsers, NodePool
from capacity_launcher.domain.apis.kueue.cohort_changes import (
    CohortDelete,
    CohortPut,
    CohortsRead,
)
from capacity_launcher.domain.apis.kueue.cohort_changes import (
    plan_apply as plan_cohort_apply,
)
from capacity_launcher.domain.apis.kueue.cohort_changes import (
    plan_delete as plan_cohort_delete,
)
from capacity_launcher.domain.apis.kueue.cohorts import COHORT, PARENT_PATH, Cohort
from capacity_launcher.domain.apis.priority_class_changes import (
    PriorityClassDelete,
    PriorityClassDeleteRead,
    PriorityClassesRead,
    PriorityClassPut,
)
from capacity_launcher.domain.apis.priority_class_changes import (
    plan_apply as plan_class_apply,
)
from capacity_launcher.domain.apis.priority_class_changes import (
    plan_delete as plan_class_delete,
)
from capacity_launcher.domain.apis.priority_classes import (
    PRIORITY_CLASS,
    PriorityClass,
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
from capacity_launcher.domain.apis.references import waiting_for
from capacity_launcher.domain.errors import CapacityLauncherError, ConditionFailed, ConfigConflict
from capacity_launcher.domain.field_errors import FieldError
from capacity_launcher.observability import logger

if TYPE_CHECKING:
    from capacity_launcher.domain.apis.documents import StoredDocument
    from capacity_launcher.domain.apis.kept_fields import Kept

Hub = NodeClass | NodePool | CapacityQuota | PriorityClass | Cohort

# An apply or delete that keeps meeting concurrent changes gives up and says so (the user
# retries).
_APPLY_TRIES = 3
_DELETE_TRIES = 3


class QuotaWrites(Protocol):
    """CapacityQuota items: what an apply or delete reads, and its conditioned write
    (ConditionFailed when something read moved)."""

    def apply_read(self, name: str, priority_class: str | None = None) -> QuotaApplyRead: ...
    def put(self, write: QuotaPut) -> None: ...
    def delete_read(self, name: str) -> QuotaDeleteRead: ...
    def delete(self, write: QuotaDelete) -> None: ...
    # The stored quotas marked waiting for a PriorityClass, with their kept fields.
    def waiting_for(self, priority_class: str) -> list[StoredDocument]: ...
    # The PriorityClasses some stored quota is marked waiting for.
    def waited_for(self) -> set[str]: ...


class CohortWrites(Protocol):
    """Cohort items: what an apply or delete reads, and its write conditioned on it (False:
    what it read moved)."""

    def read(self) -> CohortsRead: ...
    def put(self, write: CohortPut) -> bool: ...
    def delete(self, write: CohortDelete) -> bool: ...


class ConfigWrites(Protocol):
    def apply(self, document: NodeClass | NodePool, kept: Kept | None = None) -> None: ...
    def cohorts(self) -> CohortWrites: ...
    def delete_pool(self, name: str) -> None: ...
    def class_users(self, name: str) -> NodeClassUsers: ...
    def delete_class(self, name: str, read: NodeClassUsers) -> bool: ...
    def stored_names(self, kind: Any) -> frozenset[str]: ...
    def quotas(self) -> QuotaWrites: ...
    def forget(self) -> None: ...


class PriorityClassWrites(Protocol):
    """PriorityClass items: what an apply or delete reads, and its write conditioned on it
    (False when something read moved)."""

    def priority_classes(self) -> list[PriorityClass]: ...
    def read(self) -> PriorityClassesRead: ...
    def put(self, write: PriorityClassPut) -> bool: ...
    def delete_read(self, name: str) -> PriorityClassDeleteRead: ...
    def delete(self, write: PriorityClassDelete) -> bool: ...


def conflicts_among(documents: Iterable[Hub]) -> list[str]:
    """What the documents of one apply refuse together (their quotas are checked together,
    as the store checks each against the rest)."""
    quotas = (d for d in documents if isinstance(d, CapacityQuota))
    return [str(error) for error in conflicts(quotas)]


@dataclass(frozen=True)
class Configuration:
    config: ConfigWrites
    priority_classes: PriorityClassWrites
    # Room a pool or quota applied may make wakes the head of each pool's admission queue (issue
    # 37); a wake that fails (the caller may not send to the launch queue) is the sync's minute's.
    wake: Callable[[Iterable[str]], object] | None = None

    def stored_priority_classes(self) -> list[PriorityClass]:
        """The PriorityClasses stored now (what an apply's reservations may name, beside those
        it applies)."""
        return self.priority_classes.priority_classes()

    def apply(self, document: Hub, kept: Kept | None = None) -> list[FieldError]:
        """Store one hub document (CapacityLauncherError naming the rule when a store refuses
        it), whatever it names: it returns what the document names that is not applied yet
        (each at its field; its status says so too until it is). A PriorityClass's apply
        resolves the quotas stored waiting for it."""
        if isinstance(document, PriorityClass):
            apply_priority_class(self.priority_classes, document)
            return self._resolve_waiting(document.name)
        if isinstance(document, Cohort):
            put = apply_cohort(self.config.cohorts(), document)
            self.config.forget()
            self._wake(put.pools)
            return parent_awaited(put.applied, {c.name for c in put.cohorts})
        if isinstance(document, CapacityQuota):
            write = apply_quota(self.config.quotas(), document, kept)
            self.config.forget()
            self._wake(f.name for g in document.spec.resource_groups for f in g.flavors)
            pools = self.config.stored_names("NodePool")
            waiting = write.priority_class if write.unresolved else None
            return waiting_for(document, node_pools=pools, unresolved_class=waiting)
        self.config.apply(document, kept)
        if isinstance(document, NodePool):
            self._wake([document.metadata.name])
            return waiting_for(document, node_classes=self.config.stored_names("NodeClass"))
        return []

    def _wake(self, pools: Iterable[str]) -> None:
        if self.wake is None:
            return
        try:
            self.wake(sorted(set(pools)))
        except Exception:
            logger.warning(
                "could not wake the admission queues; the sync's minute will", exc_info=True
            )

    def _resolve_waiting(self, priority_class: str) -> list[FieldError]:
        """Store again each quota stored before `priority_class` was (its priority is the
        class's value now). One that cannot be now (a transient failure, a concurrent apply)
        is named in a warning: the class is applied all the same, and the sync's minute
        resolves the rest (`resolve_waiting_reservations`), as a controller would."""
        quotas = self.config.quotas()
        problems = []
        for stored in quotas.waiting_for(priority_class):
            assert isinstance(stored.document, CapacityQuota)
            try:
                apply_quota(quotas, stored.document, stored.kept)
            except CapacityLauncherError as error:
                problems.append(f"CapacityQuota {stored.document.name}: {error}")
        self.config.forget()
        if not problems:
            return []
        return [
            FieldError(
                "metadata.name",
                f"applied, but the reservations waiting for it are not resolved yet "
                f"({'; '.join(problems)}): the sync resolves them within a minute",
            )
        ]

    def resolve_waiting_reservations(self) -> list[str]:
        """Each reservation stored waiting for a PriorityClass that is applied now is resolved:
        level-triggered, each sync minute, whatever left it waiting (an apply of the class whose
        resolution failed half way). Returns the classes whose reservations it stored again;
        when some could not be, ConfigConflict names them after every class was tried (the
        sync counts the part failed, and the next minute tries again). The classes waited for
        are read first, once (issue 38: the classes, and the quotas once per class, were read
        each minute); with none, nothing more is read."""
        resolved, left = [], []
        waited = self.config.quotas().waited_for()
        if not waited:
            return []
        for applied in self.priority_classes.priority_classes():
            if applied.name not in waited:
                continue
            problems = self._resolve_waiting(applied.name)
            if problems:
                left.append(f"PriorityClass {applied.name}: {problems[0].rule}")
                continue
            resolved.append(applied.name)
        if left:
            raise ConfigConflict("; ".join(left))
        return resolved

    def check(
        self, document: Hub, kept: Kept | None = None, applied_with: Iterable[Hub] = ()
    ) -> list[FieldError]:
        """What `apply` of this document would refuse, against what is stored, writing nothing
        (`apply --dry-run=server`, `diff`): the same CapacityLauncherError; else what it would
        wait for, as `apply` answers. ``applied_with``: the documents the same apply stores
        before it, which count as stored."""
        earlier = list(applied_with)
        if isinstance(document, PriorityClass):
            read = self.priority_classes.read()
            before = {c.name: c for c in read.classes}
            before.update({d.name: d for d in earlier if isinstance(d, PriorityClass)})
            plan_class_apply(document, PriorityClassesRead(read.version, tuple(before.values())))
            return []
        if isinstance(document, Cohort):
            stored = self.config.cohorts().read()
            cohorts = {c.name: c for c in stored.cohorts}
            cohorts.update({d.name: d for d in earlier if isinstance(d, Cohort)})
            plan_cohort_apply(
                document,
                CohortsRead(stored.version, stored.quota_version, tuple(cohorts.values())),
            )
            return parent_awaited(document, set(cohorts))
        if isinstance(document, CapacityQuota):
            quotas, named = self.config.quotas(), named_class(kept)
            write = plan_apply(
                document, kept_body(kept), named, quotas.apply_read(document.name, named)
            )
            pools = self.config.stored_names("NodePool") | _names(NodePool, earlier)
            pending = (
                named is not None
                and write.unresolved
                and named not in _names(PriorityClass, earlier)
            )
            return waiting_for(
                document, node_pools=pools, unresolved_class=named if pending else None
            )
        if isinstance(document, NodePool):
            classes = self.config.stored_names("NodeClass") | _names(NodeClass, earlier)
            return waiting_for(document, node_classes=classes)
        return []

    def delete(self, kind: str, name: str) -> None:
        """Delete one document (NotFound when none is stored)."""
        if kind == PRIORITY_CLASS:
            delete_priority_class(self.priority_classes, name)
        elif kind == COHORT:
            self._wake(delete_cohort(self.config.cohorts(), name))
            self.config.forget()
        elif kind == "CapacityQuota":
            delete_quota(self.config.quotas(), name)
            self.config.forget()
        elif kind == "NodeClass":
            delete_class(self.config, name)
        else:
            self.config.delete_pool(name)


def _names(kind: type, documents: Iterable[Hub]) -> frozenset[str]:
    return frozenset(d.name for d in documents if isinstance(d, kind))


def apply_quota(quotas: QuotaWrites, quota: CapacityQuota, kept: Kept | None = None) -> QuotaPut:
    """Store `quota` if, with the stored others, no requester has two quotas in one flavor,
    with the value of the PriorityClass it was applied naming (in ``kept``) as its priority, or
    waiting for that class when it is not stored; checked again on what moved when another
    apply lands between the check and the write. Returns the write that held."""
    body, priority_class = kept_body(kept), named_class(kept)
    for _ in range(_APPLY_TRIES):
        read = quotas.apply_read(quota.name, priority_class)
        write = plan_apply(quota, body, priority_class, read)
        try:
            quotas.put(write)
            return write
        except ConditionFailed:
            continue  # another quota or a class was applied meanwhile: check again
    raise ConfigConflict(
        f"CapacityQuota {quota.name}: other quotas kept changing while it was applied; try again"
    )


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
        read = config.class_users(name)
        if read.users:
            raise ConfigConflict(
                f"NodeClass {name} is used by NodePool(s) {', '.join(read.users)}; "
                "delete them first"
            )
        if config.delete_class(name, read):
            return
    raise ConfigConflict(f"NodeClass {name} kept changing while it was being deleted; try again")


def apply_priority_class(classes: PriorityClassWrites, applied: PriorityClass) -> None:
    """Store `applied` unless it changes a stored class's value or makes a second global
    default (ConfigConflict naming the field); checked again when another class's apply or
    delete lands between the check and the write."""
    for _ in range(_APPLY_TRIES):
        if classes.put(plan_class_apply(applied, classes.read())):
            return
    raise ConfigConflict(
        f"PriorityClass {applied.name}: other classes kept changing while it was applied; try again"
    )


def delete_priority_class(classes: PriorityClassWrites, name: str) -> None:
    """Delete class `name` unless a stored reservation names it (ConfigConflict naming them;
    NotFound if it is not stored), conditioned on what the check read."""
    for _ in range(_DELETE_TRIES):
        if classes.delete(plan_class_delete(name, classes.delete_read(name))):
            return
    raise ConfigConflict(f"PriorityClass {name} kept changing while it was deleted; try again")


@dataclass(frozen=True)
class CohortApplied:
    """The write of a Cohort's apply that held, and the cohorts stored beside it then."""

    applied: Cohort
    pools: tuple[str, ...]
    cohorts: tuple[Cohort, ...]


def apply_cohort(cohorts: CohortWrites, applied: Cohort) -> CohortApplied:
    """Store `applied` unless the tree it makes with the stored cohorts is no tree within bounds
    (ConfigConflict naming spec.parentName); checked again when another cohort's or a
    quota's apply lands between the check and the write."""
    for _ in range(_APPLY_TRIES):
        read = cohorts.read()
        write = plan_cohort_apply(applied, read)
        if cohorts.put(write):
            return CohortApplied(applied, write.pools, read.cohorts)
    raise ConfigConflict(
        f"Cohort {applied.name}: other cohorts or quotas kept changing while it was applied; "
        "try again"
    )


def delete_cohort(cohorts: CohortWrites, name: str) -> tuple[str, ...]:
    """Delete cohort `name` (NotFound if it is not stored); returns the pools whose admissions
    it governed. Its children stay, their parent missing."""
    for _ in range(_DELETE_TRIES):
        write = plan_cohort_delete(name, cohorts.read())
        if cohorts.delete(write):
            return write.pools
    raise ConfigConflict(f"Cohort {name} kept changing while it was deleted; try again")


def parent_awaited(cohort: Cohort, stored: Iterable[str]) -> list[FieldError]:
    """What a cohort's apply waits for: its parent, when not applied (accepted all the same,
    as Kubernetes applies in any order; its status says so until the parent is)."""
    parent = cohort.parent
    if parent is None or parent == cohort.name or parent in set(stored):
        return []
    return [
        FieldError(
            PARENT_PATH,
            f"Cohort {parent} is not applied yet; {cohort.name} borrows only within itself "
            "until it is",
        )
    ]
