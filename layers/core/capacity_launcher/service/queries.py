"""What operators read (`get`, `describe`, `top`, the status views): the stored documents with
their status, the capacity the service sees, requests and their instances. Read-only: nothing
here writes, leases or launches. Built by the composition root (`wiring.Adapters.queries`); the
CLI formats and prints what it answers.

The ports below are the operators' alone (the launcher and the lifecycle never read these
views), so they live beside their one use case rather than in ports.py.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime, timedelta
from typing import Any, Protocol

from capacity_launcher.domain.accounting.pool_status import pool_status
from capacity_launcher.domain.accounting.pool_usage import Lease
from capacity_launcher.domain.accounting.quota_admission import UsageKey
from capacity_launcher.domain.accounting.quota_status import (
    quota_status,
    reference_conditions,
    with_conditions,
)
from capacity_launcher.domain.accounting.team_usage import (
    MAX_REPORT_DAYS,
    PriceTable,
    ReservationHours,
    UsageBucket,
    UsageReport,
    merged_hours,
    usage_report,
)
from capacity_launcher.domain.apis.config import CAPACITY_QUOTA as QUOTA
from capacity_launcher.domain.apis.config import NodeClass, NodePool
from capacity_launcher.domain.apis.documents import InvalidDocument, StoredDocument
from capacity_launcher.domain.apis.karpenter.status import (
    Resolved,
    ResolvedNodeClass,
    ec2nodeclass_status,
    nodeclaim,
    nodeclaim_name,
)
from capacity_launcher.domain.apis.kueue.cohorts import Cohort, cohort_status
from capacity_launcher.domain.apis.priority_classes import (
    PriorityClass,
    PriorityTable,
    named_class,
)
from capacity_launcher.domain.apis.quotas import CapacityQuota
from capacity_launcher.domain.capacity.capacity_wait import HeldWait
from capacity_launcher.domain.capacity.idle_reservations import idle_hours_at
from capacity_launcher.domain.capacity.image_architectures import ImageArchitectures
from capacity_launcher.domain.capacity.offerings import RESERVED, UnavailableEntry, offering_key
from capacity_launcher.domain.capacity.reservation_state import StoredReservation
from capacity_launcher.domain.capacity.reservations import (
    ReservationSnapshot,
    selection_of,
    term_matches,
)
from capacity_launcher.domain.errors import CapacityLauncherError
from capacity_launcher.domain.quantities import Resources
from capacity_launcher.domain.records.instance_records import InstanceRecord
from capacity_launcher.domain.records.status import RequestRecord, format_timestamp
from capacity_launcher.service.accounting_ports import (
    PoolReadinessCount,
    PoolUsage,
    QuotaStatusStore,
    QuotaUsage,
)
from capacity_launcher.service.ports import Configuration, InstanceItems


class UsageDays(Protocol):
    def day(self, day: date) -> tuple[dict[UsageBucket, float], list[ReservationHours]]: ...


# -- the operators' ports ---------------------------------------------------------------------


class StoredConfiguration(Configuration, Protocol):
    """The configuration documents as stored now, with what their applies kept and those that
    no longer parse (adapters/config_store.py)."""

    def capacity_quota(self, name: str) -> CapacityQuota: ...
    def stored(self, kind: Any, name: str) -> StoredDocument: ...
    def stored_all(self, kind: Any) -> list[StoredDocument]: ...
    def invalid(self) -> list[InvalidDocument]: ...
    def cohorts(self) -> StoredCohorts: ...


class StoredCohorts(Protocol):
    """The Kueue Cohorts as stored now (adapters/cohort_store.py)."""

    def cohorts(self) -> list[Cohort]: ...
    def cohort(self, name: str) -> Cohort: ...


class PriorityClasses(Protocol):
    def priority_classes(self) -> list[PriorityClass]: ...
    def priority_class(self, name: str) -> PriorityClass: ...
    def table(self) -> PriorityTable: ...


class RequestRecords(Protocol):
    def load(self, request_id: str) -> tuple[RequestRecord | None, list[Any]]: ...
    def get_record(self, request_id: str) -> RequestRecord | None: ...
    def list_records(self, limit: int = 100) -> list[RequestRecord]: ...
    def overdue_waits(self, deadline_before: datetime) -> list[HeldWait]: ...


class OpenLeases(Protocol):
    def leases(self) -> list[Lease]: ...


class Snapshots(Protocol):
    def list(self) -> list[StoredReservation]: ...
    def invalid(self) -> Sequence[Any]: ...


class ReservationCatalog(Protocol):
    def describe(self) -> list[ReservationSnapshot]: ...
    def group_members(self, group_arn: str) -> list[str]: ...


class UnavailableEntries(Protocol):
    def current(self) -> Mapping[str, UnavailableEntry]: ...


class NodeClassResolvers(Protocol):
    """What a NodeClass's selectors resolve to now, and the names EC2 gives what they find."""

    def subnets(self, node_class: NodeClass) -> dict[str, tuple[str, ...]]: ...
    def security_groups(self, node_class: NodeClass) -> tuple[str, ...]: ...
    def images(self, node_class: NodeClass) -> ImageArchitectures | None: ...
    def security_group_names(self, ids: Sequence[str]) -> dict[str, str]: ...
    def image_names(self, ids: Sequence[str]) -> dict[str, str]: ...


class RoleProfiles(Protocol):
    """A NodeClass's role's instance profile, read only: its name, or InstanceProfileNotReady."""

    def status(self, node_class: NodeClass) -> str | None: ...


# -- the use case --------------------------------------------------------------------------------


@dataclasses.dataclass
class Queries:
    """The operators' read-only views, each from what the service stores and what AWS reports
    now. `resolvers`: a NodeClass's selectors (built on first use: only `get ec2nodeclass` and
    `describe nodeclass` resolve them)."""

    config: StoredConfiguration
    priority_classes: PriorityClasses
    records: RequestRecords
    instances: InstanceItems
    pool_usage: PoolUsage
    readiness: PoolReadinessCount
    leases: Callable[[], OpenLeases]
    quota_usage: QuotaUsage
    quota_statuses: QuotaStatusStore
    snapshots: Snapshots
    reservations_now: Callable[[], ReservationCatalog]
    unavailable: UnavailableEntries
    resolvers: Callable[[], NodeClassResolvers]
    profiles: Callable[[], RoleProfiles]
    # The clock the service stamps what it stores with (the emulator's locally): a view computed
    # here is observed on it, and a deadline stored on it is compared with it.
    now: Callable[[], datetime]
    # Usage by team, as the sync rolled it up (adapters/usage_store.py); None: not wired.
    usage: UsageDays | None = None

    # -- configuration ----------------------------------------------------------------------

    def invalid(self, kind: str) -> list[InvalidDocument]:
        """The stored documents of `kind` that no longer parse, read now."""
        return [d for d in self.config.invalid() if d.kind == kind]

    def pool_status_reader(self) -> Callable[[NodePool], dict[str, Any]]:
        """A pool's status from its stored usage and, with `limits.unready`, its unready
        instances counted as the lease's gate counts them (adapters/pool_readiness.py)."""
        applied = {c.name for c in self.config.node_classes()}

        def status_of(pool: NodePool) -> dict[str, Any]:
            limits = pool.spec.limits
            counted = (
                self.readiness.count(pool.name)
                if limits is not None and limits.unready is not None
                else None
            )
            return pool_status(pool, applied, self.pool_usage.usage(pool.name), counted)

        return status_of

    def cohort_statuses(self) -> tuple[list[Cohort], dict[str, dict[str, Any]]]:
        """The stored Cohorts, and each one's status: its member quotas, child cohorts and
        `Ready` condition (False, `ParentNotFound`, while its parent is not applied)."""
        cohorts = self.config.cohorts().cohorts()
        by_name = {c.name: c for c in cohorts}
        quotas = self.config.capacity_quotas(fresh=True)
        return cohorts, {c.name: cohort_status(by_name, quotas, c) for c in cohorts}

    def pool_statuses(self) -> tuple[list[NodePool], dict[str, dict[str, Any]]]:
        """The stored NodePools, and each one's status (usage against limits, conditions)."""
        pools = self.config.node_pools()
        status_of = self.pool_status_reader()
        return pools, {p.name: status_of(p) for p in pools}

    def quota_usage_of(self, quotas: Sequence[CapacityQuota]) -> dict[UsageKey, Resources]:
        """What each requester uses in each pool, from the quota usage items (one GetItem
        each)."""
        usage: dict[UsageKey, Resources] = {}
        items = sorted({(q.usage_item(f.name), f.name) for q in quotas for f in q.flavors()})
        for pk, pool in items:
            for where, amount in self.quota_usage.quota_usage(pk, pool).items():
                usage[where] = usage.get(where, Resources.ZERO) + amount
        return usage

    def quota_status_of(self) -> dict[str, dict[str, Any]]:
        """Each stored quota's status: as the sync last stored it, or computed now from the
        same usage items if it has not seen the quota yet (applied within the last minute).
        What its references say (its NodePools, its PriorityClass) is read now, so a document
        applied in any order reads ready as soon as what it names is applied."""
        quota_set = self.config.quota_set(fresh=True)
        quotas = list(quota_set.quotas)
        stored = self.quota_statuses.read()
        pools = {p.name for p in self.config.node_pools()}
        unseen = [q for q in quotas if q.name not in stored]
        if unseen:
            usage = self.quota_usage_of(quotas)
            now = format_timestamp(self.now())
            for quota in unseen:
                stored[quota.name] = {
                    **quota_status(quota, quotas, usage, pools),
                    "observedAt": now,
                }
        named = {s.document.name: named_class(s.kept) for s in self.config.stored_all(QUOTA)}
        for quota in quotas:
            conditions = reference_conditions(
                quota, quotas, pools, named.get(quota.name), quota_set.unresolved.get(quota.name)
            )
            stored[quota.name] = with_conditions(stored[quota.name], conditions)
        return stored

    # -- capacity -----------------------------------------------------------------------------

    def reservation_snapshots(self) -> list[ReservationSnapshot]:
        """Reservations as EC2 reports them now (complete and live), with what the service has
        learned of them: exhausted (snapshot or ICE cache), and groups (snapshots and the groups
        our NodeClasses target)."""
        reservations = self.reservations_now()
        found = reservations.describe()
        stored = {s.snapshot.reservation_id: s.snapshot for s in self.snapshots.list()}
        groups = {rid: list(snapshot.groups) for rid, snapshot in stored.items()}
        for node_class in self.config.node_classes():
            target = selection_of(node_class).target
            arn = target.group_arn if target else None
            if arn:
                for member in _members(reservations, arn):
                    groups.setdefault(member, []).append(arn)
        cached = self.unavailable.current()

        def exhausted(reservation_id: str) -> bool:
            snapshot = stored.get(reservation_id)
            in_cache = offering_key(RESERVED, None, None, reservation_id) in cached
            return in_cache or (snapshot is not None and snapshot.exhausted)

        return [
            dataclasses.replace(
                r,
                groups=tuple(sorted(set(groups.get(r.reservation_id, [])))),
                exhausted=exhausted(r.reservation_id),
            )
            for r in found
        ]

    def reservation_idle_hours(self) -> dict[str, float]:
        """Idle (paid and unused) instance-hours of each reservation the sync keeps a snapshot
        of, since it first saw it, up to now (domain/capacity/idle_reservations.py)."""
        now = self.now()
        return {
            s.snapshot.reservation_id: idle_hours_at(s.idle, now)
            for s in self.snapshots.list()
            if s.idle is not None
        }

    def usage_between(
        self, since: datetime, until: datetime, prices: PriceTable | None = None
    ) -> UsageReport:
        """Usage by team over the UTC days from `since` to `until` (one Query per day), with
        the idle share attributed and costs where `prices` prices them
        (domain/accounting/team_usage.py)."""
        if self.usage is None:
            raise CapacityLauncherError("usage by team is not wired in this deployment")
        days = (until.date() - since.date()).days + 1
        if until < since or days > MAX_REPORT_DAYS:
            raise CapacityLauncherError(
                f"--since and --until: --until must not be before --since, and they may span at "
                f"most {MAX_REPORT_DAYS} days (got {days})"
            )
        usage: dict[UsageBucket, float] = {}
        reservations: dict[str, ReservationHours] = {}
        for offset in range(days):
            day_usage, day_reservations = self.usage.day(since.date() + timedelta(days=offset))
            usage.update(day_usage)
            for r in day_reservations:
                reservations[r.reservation_id] = merged_hours(reservations.get(r.reservation_id), r)
        return usage_report(since, until, usage, list(reservations.values()), prices)

    def invalid_snapshots(self) -> list[Any]:
        """The stored reservation snapshots that no longer parse (the next sync replaces
        them)."""
        return list(self.snapshots.invalid())

    def unavailable_offerings(self) -> list[UnavailableEntry]:
        """The ICE cache's unexpired entries."""
        return list(self.unavailable.current().values())

    def open_leases(self) -> list[Lease]:
        """Every unsettled lease."""
        return self.leases().leases()

    # -- requests and instances -----------------------------------------------------------------

    def live_waits(self, within: Any) -> list[RequestRecord]:
        """The records of every live wait (one Query of the sparse index): a wait lasts at
        most `within`."""
        return [w.record for w in self.records.overdue_waits(self.now() + within)]

    def recent_requests(self, limit: int = 100) -> list[RequestRecord]:
        """The newest `limit` request records, newest first (one Query per shard of the
        RecentRequests index: the cost grows with `limit`, not with history)."""
        return self.records.list_records(limit)

    def instance_states(self, records: Sequence[RequestRecord]) -> dict[str, str]:
        """The state of each instance the records name, by id, for those with an instance
        item."""
        ids = [i.instance_id for record in records for i in record.instances]
        return {i: item.state for i, item in self.instances.many(ids).items()}

    def nodeclaims(self) -> dict[str, dict[str, Any]]:
        """One NodeClaim per instance the service launched (its instance item), by name, oldest
        first."""
        records = self.records.list_records()
        ids = [i.instance_id for record in records for i in record.instances]
        items: Mapping[str, InstanceRecord] = self.instances.many(ids)
        pools = {p.name: p for p in self.config.node_pools()}
        # The reservations reserved instances run in, as EC2 reports them now (asked only then).
        reserved = any(i.capacity_reservation_id for i in items.values())
        found = self.reservation_snapshots() if reserved else []
        reservations = {r.reservation_id: r for r in found}
        now = self.now()
        return {
            nodeclaim_name(item): nodeclaim(
                item,
                pools.get(item.node_pool or ""),
                reservations.get(item.capacity_reservation_id or ""),
                now,
            )
            for item in sorted(items.values(), key=lambda i: i.launched_at or "")
        }

    # -- a NodeClass's status (what Karpenter shows) ---------------------------------------------

    def node_class_status_reader(self) -> Callable[[StoredDocument], dict[str, Any]]:
        """A stored NodeClass's status as Karpenter shows it: what its selectors resolve to
        now, each with a condition."""
        resolvers, profiles = self.resolvers(), self.profiles()

        def status_of(stored: StoredDocument) -> dict[str, Any]:
            node_class = stored.document
            assert isinstance(node_class, NodeClass)
            resolved = ResolvedNodeClass(
                subnets=_resolved(
                    lambda: [
                        (subnet, zone)
                        for zone, ids in resolvers.subnets(node_class).items()
                        for subnet in ids
                    ]
                ),
                security_groups=_resolved(lambda: _security_groups(resolvers, node_class)),
                images=_resolved(lambda: _images(resolvers, node_class)),
                reservations=_resolved(lambda: self._reservations_of(node_class)),
                reservations_asked=bool(selection_of(node_class)),
                instance_profile=node_class.spec.instance_profile,
                role_profile=(
                    _resolved(lambda: [profiles.status(node_class) or ""])
                    if node_class.spec.role is not None
                    else None
                ),
            )
            return ec2nodeclass_status(resolved, self.now().isoformat())

        return status_of

    def _reservations_of(self, node_class: NodeClass) -> list[ReservationSnapshot]:
        selection = selection_of(node_class)
        found = []
        for snapshot in self.reservation_snapshots():
            target = selection.target
            if target is not None and target.reservation_id:
                chosen = snapshot.reservation_id == target.reservation_id
            elif target is not None:
                chosen = target.name in snapshot.groups
            else:
                chosen = any(term_matches(term, snapshot) for term in selection.terms)
            if chosen:
                found.append(snapshot)
        return found


def _members(reservations: ReservationCatalog, group_arn: str) -> list[str]:
    try:
        return reservations.group_members(group_arn)
    except CapacityLauncherError:  # a NodeClass may name a group that does not exist (yet)
        return []


def _resolved[Found](resolve: Callable[[], list[Found]]) -> Resolved[Found]:
    try:
        return Resolved(resolve())
    except CapacityLauncherError as error:
        return Resolved(error=str(error))


def _security_groups(resolvers: NodeClassResolvers, node_class: NodeClass) -> list[Any]:
    ids = list(resolvers.security_groups(node_class))
    names = resolvers.security_group_names(ids)
    return [(i, names.get(i, "")) for i in ids]


def _images(resolvers: NodeClassResolvers, node_class: NodeClass) -> list[Any]:
    images = resolvers.images(node_class)
    if images is None:
        return []
    names = resolvers.image_names([image.image_id for image in images.images])
    return [(image, names.get(image.image_id, "")) for image in images.images]
