"""Every port of the use cases: what they need from the outside world, as protocols adapters/
implements. One protocol per concept; a use case that needs fewer methods still names it. A
pool's limits are several concepts, one protocol each, and each use case takes those it uses:
the launcher `PoolLeases`; reconciliation `ExpiringLeases`, `PoolMembers` and `PoolUsage`;
instance events `PoolMembers` and `PoolUsage`; quota reclaim `PoolMembers` and `QuotaUsage`;
the quota sync `QuotaUsage`."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from capacity_launcher.domain.accounting.admission_queue import QueueEntry
from capacity_launcher.domain.accounting.lease_reads import (
    ConfigReads,
    LeaseReads,
    QuotaReading,
    UnreadyReading,
)
from capacity_launcher.domain.accounting.pool_usage import (
    Lease,
    LeaseFit,
    Member,
    Readiness,
)
from capacity_launcher.domain.accounting.quota_admission import UsageKey
from capacity_launcher.domain.accounting.quota_leases import LeaseAsk
from capacity_launcher.domain.apis.config import NodeClass, NodePool, PoolSet
from capacity_launcher.domain.apis.documents import Revisions
from capacity_launcher.domain.apis.node_class_terms import CapacityReservationSelectorTerm
from capacity_launcher.domain.apis.quota_sets import QuotaSet
from capacity_launcher.domain.apis.quotas import CapacityQuota
from capacity_launcher.domain.capacity.capacity_wait import HeldWait
from capacity_launcher.domain.capacity.fleet import (
    FleetResult,
    InstanceLanding,
    LaunchTemplate,
    ManagedInstance,
)
from capacity_launcher.domain.capacity.image_architectures import ImageArchitectures
from capacity_launcher.domain.capacity.instance_types import InstanceTypeInfo
from capacity_launcher.domain.capacity.offerings import Turn
from capacity_launcher.domain.capacity.reservation_state import (
    Coverage,
    ReservationScope,
    StoredReservation,
)
from capacity_launcher.domain.capacity.reservations import (
    ReservationSnapshot,
    ReservationSource,
    ReservedTarget,
)
from capacity_launcher.domain.capacity.single_flight import Evidence, Standing
from capacity_launcher.domain.capacity.static_pools import StaticState
from capacity_launcher.domain.errors import QuotaExceeded
from capacity_launcher.domain.quantities import PoolLimits, Resources
from capacity_launcher.domain.records.claims import Claim
from capacity_launcher.domain.records.instance_records import InstanceRecord
from capacity_launcher.domain.records.intents import LaunchIntent
from capacity_launcher.domain.records.reclaims import ReclaimRequested
from capacity_launcher.domain.records.status import RequestRecord

if TYPE_CHECKING:  # the launcher's alone: the sync's and instance events' cold starts skip it
    from capacity_launcher.domain.launch_request import Message

# -- configuration --------------------------------------------------------------------------------


class Configuration(Protocol):
    def node_pool(self, name: str) -> NodePool: ...
    def node_pools(self, *, fresh: bool = False) -> list[NodePool]: ...
    # The pools with the generation they were read at (a request naming no pool chooses here).
    def pool_set(self, *, fresh: bool = False) -> PoolSet: ...
    def node_class(self, name: str) -> NodeClass: ...
    def node_classes(self, *, fresh: bool = False) -> list[NodeClass]: ...
    def capacity_quotas(self, *, fresh: bool = False) -> list[CapacityQuota]: ...
    # The value of the applied PriorityClass of that name (None: no class of that name).
    def priority_value(self, name: str) -> int | None: ...
    # The quotas with their generations, and those waiting for a PriorityClass.
    def quota_set(self, *, fresh: bool = False) -> QuotaSet: ...
    # Drop the container's copies (a lease found one older than the stored document).
    def forget(self) -> None: ...


# -- records of requests, intents and instances ---------------------------------------------------


class Records(Protocol):
    def load(self, request_id: str) -> tuple[RequestRecord | None, list[LaunchIntent]]: ...
    # held_by: the id of the queue message that carries a Waiting request's wait.
    def put_record(self, record: RequestRecord, held_by: str | None = None) -> None: ...
    # The records of distinct requests (served together), each put as put_record puts it.
    def put_records(self, records: Sequence[RequestRecord]) -> None: ...
    def waiting(self, request_id: str) -> tuple[RequestRecord, str | None] | None: ...
    # The delivery of the held copy begins serving the wait; False if it is not held by it now.
    def take_wait(self, request_id: str, held_by: str) -> bool: ...
    def put_record_if_absent(self, record: RequestRecord) -> bool: ...
    def get_record(self, request_id: str) -> RequestRecord | None: ...
    # A requestId is bound to the hash of its first body (bind: the hash bound, ours if first).
    def bind_body(self, request_id: str, body_hash: str) -> str: ...
    # And whether this call bound it (no delivery did before: nothing of it is stored yet).
    def bind_first_body(self, request_id: str, body_hash: str) -> tuple[str, bool]: ...
    def bound_body(self, request_id: str) -> str | None: ...
    def write_intent(self, intent: LaunchIntent) -> bool: ...
    def complete_intent(
        self, token: str, instance_ids: Sequence[str], errors: Iterable[Mapping[str, str]]
    ) -> None: ...


class HeldRequests(Protocol):
    """Waiting records as a wake reads them and hands their wait to the copy it sends."""

    def waiting(self, request_id: str) -> tuple[RequestRecord, str | None] | None: ...
    def rehold(self, request_id: str, held_by: str | None, new: str) -> bool: ...


class QueueItems(Protocol):
    """The admission queues' items (adapters/admission_queue.py): one partition per NodePool."""

    def put(self, entry: QueueEntry) -> QueueEntry | None: ...
    def head(self, pool: str, after: str | None = None, limit: int = 1) -> list[QueueEntry]: ...
    def woken(self, entry: QueueEntry, wake: int) -> None: ...
    def passed_over(self, entry: QueueEntry) -> None: ...
    def remove(self, pool: str, entry_key: str) -> None: ...


class Redrive(Protocol):
    """The launch queue, as a wake sends a waiting request's message again."""

    def redrive(self, queue_arn: str, body: str) -> str: ...


class HeldWaits(Protocol):
    """Waiting records as the backstop reads and ends them (service/wait_backstop.py)."""

    def overdue_waits(self, deadline_before: datetime) -> list[HeldWait]: ...
    def end_wait(self, wait: HeldWait, outcome: RequestRecord) -> bool: ...
    def clear_wait(self, request_id: str) -> None: ...


class InstanceItems(Protocol):
    def put(self, records: Iterable[InstanceRecord]) -> None: ...
    def get(self, instance_id: str) -> InstanceRecord | None: ...
    def many(self, instance_ids: Sequence[str]) -> dict[str, InstanceRecord]: ...
    def release(self, instance_id: str, state: str, at: str) -> InstanceRecord | None: ...
    def rearm(self, instance_id: str) -> None: ...
    def adopt(self, records: Sequence[InstanceRecord]) -> list[str]: ...
    def note_on_request(self, request_id: str, instance_id: str, state: str) -> None: ...


# -- the ICE cache --------------------------------------------------------------------------------


class Entry(Protocol):
    @property
    def reason(self) -> str: ...


class UnavailableCache(Protocol):
    def current(self) -> Mapping[str, Entry]: ...
    def mark(self, offerings: Iterable[tuple[str, str, str]]) -> Any: ...
    def clear(self, offering: str) -> None: ...

    # Single flight (service/single_flight.py loops, domain/capacity/single_flight.py decides):
    # what the container knows (no call), one claim write over exactly `keys`, one read of
    # what stands on `keys`, the turn's claims ended once EC2 answered.
    claim_seconds: int

    def evidence(self) -> Evidence: ...
    def take_turn(self, keys: Sequence[str], token: str | None = None) -> Turn: ...
    def standing(self, keys: Sequence[str]) -> Mapping[str, Standing | None]: ...
    def end_turn(
        self, turn: Turn, launched: Iterable[str] = (), dry: Iterable[str] = ()
    ) -> None: ...


# -- pool limits: leases, members, usage, quota usage ----------------------------------------------


class LeaseSnapshot(Protocol):
    """What the lease's admission (service/admission.py) reads before it decides, each read
    strongly consistent: a write conditioned on it fails only when it moved since."""

    # The stored limits; NodePoolDeleted, or NodePoolChanged when stored at another revision.
    def limits_in_force(self, pool: str, seen: Revisions | None = None) -> PoolLimits | None: ...
    # `seen` as the stored items spell it (None: the pool or class is another document now).
    def as_stored(self, pool: str, seen: Revisions) -> Revisions | None: ...
    def usage(self, pool: str) -> Resources: ...
    def pools_generation(self) -> int: ...
    def quota_set(self, *, fresh: bool = False) -> QuotaSet: ...
    def quota_generation(self, pool: str) -> int: ...
    # Each (quota usage item, NodePool) of `items`, by item key.
    def quota_usage(self, items: Sequence[UsageKey]) -> dict[str, QuotaReading]: ...
    # The pool's count for `limits.unready` (None: this store does not gate it).
    def readiness(self, pool: str) -> UnreadyReading | None: ...


class SettlingLeases(Protocol):
    """What a settle reads and writes (adapters/pool_leases.py, tests/fakes/leases.py)."""

    # The lease as this container took it, once (None: not taken here, or asked before).
    def taken(self, pool: str, lease_id: str) -> Lease | None: ...
    def lease(self, pool: str, lease_id: str) -> Lease | None: ...
    # The instance ids counted as the pool's members.
    def counted(self, pool: str) -> set[str]: ...
    # Members and settlement in one write conditioned on `lease` as read; False if it moved.
    def write_settlement(
        self,
        pool: str,
        lease_id: str,
        lease: Lease | None,
        pending: Mapping[str, Resources],
        launched: int,
    ) -> bool: ...


class PoolLeases(LeaseSnapshot, SettlingLeases, Protocol):
    """The launcher's room in a pool's limits (and its requester's quota): leased before EC2 is
    asked, settled into members after, or cancelled (adapters/pool_leases.py). `write` and
    `extend` raise LeaseConflict naming the items that moved since `reads`."""

    def write(self, ask: LeaseAsk, lease_id: str, fit: LeaseFit, reads: LeaseReads) -> Lease: ...
    def extend(self, lease: Lease, reads: ConfigReads) -> Lease: ...
    def cancel(self, pool: str, lease_id: str) -> bool: ...
    def reclaim(self, lease: Lease) -> bool: ...
    def stored_limits(self, pool: str) -> PoolLimits | None: ...


class ExpiringLeases(Protocol):
    """Reconciliation's view of leases: the open ones, and the expired ones given back."""

    @property
    def lease_seconds(self) -> int: ...
    def leases(self) -> list[Lease]: ...
    def reclaim(self, lease: Lease) -> bool: ...


class PoolMembers(Protocol):
    """Instances counted in their pool's usage, one member each (adapters/pool_members.py):
    instance events, reconciliation and quota reclaim count and release them."""

    def members(self, pool: str) -> list[Member]: ...
    def member(self, pool: str, instance_id: str) -> Member | None: ...
    def count(
        self,
        pool: str,
        instance_id: str,
        amount: Resources,
        *,
        unless_released: bool = False,
        requester: str | None = None,
    ) -> bool: ...
    def hold(self, member: Member, requester: str) -> bool: ...
    def uncount(self, member: Member) -> bool: ...
    def uncount_instance(self, pool: str, instance_id: str) -> bool: ...


class PoolUsage(Protocol):
    """A pool's usage as stored, what it is made of, and its conditioned replacement: the reads
    and the write of a recount (service/usage_recount.py; adapters/pool_usage_store.py)."""

    def usage(self, pool: str) -> Resources: ...
    def usage_version(self, pool: str) -> tuple[Resources, int | None]: ...
    def counted(self, pool: str) -> list[Lease | Member]: ...
    def replace_usage(self, pool: str, usage: Resources, version: int | None) -> bool: ...


class PoolReadinessCount(Protocol):
    """A pool's instances for `limits.unready`, counted as the lease's gate counts them
    (adapters/pool_readiness.py)."""

    def count(self, pool: str) -> Readiness: ...


class QuotaUsage(Protocol):
    """Quota usage, one item per cohort and flavor (its key: CapacityQuota.usage_item), as the
    quota sync and reclaim read and recount it (adapters/quota_usage_store.py)."""

    def quota_usage(self, pk: str, pool: str) -> dict[tuple[str, str], Resources]: ...
    def quota_reading(
        self, pk: str, pool: str
    ) -> tuple[int | None, dict[tuple[str, str], Resources]]: ...
    def counted(self, pool: str) -> list[Lease | Member]: ...
    def replace_quota_usage(
        self, pk: str, usage: dict[tuple[str, str], Resources], version: int | None
    ) -> bool: ...


# -- quotas: open reclaims and the status the sync keeps -------------------------------------------


class ReclaimStore(Protocol):
    def open(self, reclaim: ReclaimRequested) -> bool: ...
    def get(self, quota: str, pool: str) -> ReclaimRequested | None: ...
    def many(self, lenders: Iterable[tuple[str, str]]) -> list[ReclaimRequested]: ...
    def every_open(self, lenders: Iterable[tuple[str, str]]) -> list[ReclaimRequested]: ...
    def close(self, reclaim: ReclaimRequested) -> bool: ...


class QuotaStatusStore(Protocol):
    def save(self, statuses: Mapping[str, Mapping[str, Any]], observed_at: str) -> None: ...
    def forget(self, names: Iterable[str]) -> None: ...
    def read(self) -> dict[str, dict[str, Any]]: ...


class Reclaims(Protocol):
    """What the launcher asks when a request is refused because its nominal quota is lent out."""

    def request(self, refused: QuotaExceeded, request_id: str, requester: str | None) -> str: ...


# -- EC2: instances, templates, instance types, subnets -------------------------------------------


class FleetLauncher(Protocol):
    def create(self, request: Mapping[str, Any]) -> FleetResult: ...
    def describe(self, instance_ids: Sequence[str]) -> list[InstanceLanding]: ...
    # The ids found gone already; `fresh` ids (just launched) EC2 does not list are not gone.
    def terminate(self, instance_ids: Sequence[str], *, fresh: bool = False) -> list[str]: ...
    # The ids left untagged (still unknown to EC2): the sync's reconciliation tags them later.
    def tag(self, instance_ids: Sequence[str], tags: Mapping[str, str]) -> list[str]: ...
    def find_managed(
        self, tag_filters: Mapping[str, str] | None = None
    ) -> list[ManagedInstance]: ...


class Templates(Protocol):
    # `image_id`: one of the class's images (an image per architecture); by default its main one.
    def ensure(
        self,
        node_class: NodeClass,
        target: ReservedTarget | None,
        *,
        spot: bool = False,
        image_id: str | None = None,
    ) -> LaunchTemplate: ...
    def image_platform(self, node_class: NodeClass) -> str | None: ...
    # The security groups its instances launch in; NodeClassRefused when its terms find none.
    def security_group_ids(self, node_class: NodeClass) -> tuple[str, ...]: ...
    def image_architectures(self, node_class: NodeClass) -> ImageArchitectures | None: ...
    # A launch found these templates gone: the next `ensure` creates them again.
    def forget(self, names: Iterable[str]) -> None: ...
    # The class's instance profile (made for its `role`); InstanceProfileNotReady when the role
    # cannot be given to its instances.
    def instance_profile(self, node_class: NodeClass) -> str | None: ...


class Catalog(Protocol):
    def offered(
        self, zones: Iterable[str], names: Iterable[str] | None = None
    ) -> list[InstanceTypeInfo]: ...


class SubnetLookup(Protocol):
    def by_zone(self, node_class: NodeClass) -> dict[str, tuple[str, ...]]: ...


# -- capacity reservations ------------------------------------------------------------------------


class Reservations(Protocol):
    """The launcher's reservations (service/reservations.py)."""

    def sources(
        self,
        node_class: NodeClass,
        scope: ReservationScope = ...,
        enough_room: Callable[[Sequence[ReservationSource]], bool] | None = None,
    ) -> list[ReservationSource]: ...
    def as_of(self, node_class: NodeClass) -> float | None: ...
    def claim(self, reservation_id: str, count: int) -> int | None: ...
    def give_back(self, reservation_id: str, count: int) -> None: ...
    def mark_exhausted(self, reservation_ids: Sequence[str]) -> None: ...
    def note_launched(self, launched: Mapping[str, int]) -> None: ...


class Ec2Reservations(Protocol):
    def describe(
        self, ids: Sequence[str] | None = None, filters: Sequence[Mapping[str, Any]] | None = None
    ) -> list[ReservationSnapshot]: ...
    def group_members(self, group_arn: str) -> list[str]: ...
    def matching(self, term: CapacityReservationSelectorTerm) -> list[ReservationSnapshot]: ...


class ReservationStore(Protocol):
    """The shared snapshots and coverage (adapters/reservation_snapshots.py)."""

    def read(self) -> tuple[dict[str, StoredReservation], dict[str, Coverage]]: ...
    def coverage(self, keys: Sequence[str]) -> dict[str, Coverage]: ...
    def snapshots(
        self, reservation_ids: Sequence[str]
    ) -> tuple[dict[str, StoredReservation], set[str]]: ...
    def get(self, reservation_id: str) -> StoredReservation | None: ...
    def save(self, reservation: StoredReservation, expected_version: int | None) -> bool: ...
    def save_coverage(self, coverage: Sequence[Coverage]) -> None: ...
    def forget(self, keys: Sequence[str]) -> None: ...
    def take(self, reservation_id: str, count: int) -> bool: ...
    def empty(self, reservation_id: str) -> None: ...
    def add(self, reservation_id: str, count: int, *, at_most: int) -> bool: ...
    def mark_exhausted(self, reservation_ids: Sequence[str]) -> None: ...
    def release_slot(self, reservation_id: str) -> bool: ...
    def catch_up(
        self, reservation_id: str, available: int, total: int, *, expected_version: int
    ) -> bool: ...


# -- claims on requestIds (idempotency) ------------------------------------------------------------


class RequestClaims(Protocol):
    """Each delivery's claim on its requestId (adapters/request_claims.py)."""

    def claim(self, payload: Mapping[str, Any], remaining_ms: int | None = None) -> Claim: ...
    def complete(self, payload: Mapping[str, Any], outcome: Mapping[str, Any]) -> None: ...
    def release(self, payload: Mapping[str, Any]) -> None: ...


# -- the launch queue -----------------------------------------------------------------------------


class HandBack(Protocol):
    """The launch queue: messages handed back soon, or held (a wait for scheduled capacity)."""

    def hand_back(self, messages: Sequence[Message]) -> None: ...
    def can_hold(self, message: Message) -> bool: ...
    def hold(self, message: Message, delay_seconds: int) -> str: ...


@dataclass(frozen=True)
class LaunchPorts:
    config: Configuration
    records: Records
    instances: InstanceItems
    unavailable: UnavailableCache
    leases: PoolLeases
    fleet: FleetLauncher
    templates: Templates
    catalog: Catalog
    subnets: SubnetLookup
    reservations: Reservations
    # Asked when a request's nominal quota is lent out (None: no reclaim is requested).
    reclaims: Reclaims | None = None


# -- static NodePools -----------------------------------------------------------------------------


class StaticPoolStates(Protocol):
    """A static pool's launches in flight and dry zones (adapters/static_pool_items.py)."""

    def read(self, pool: str) -> StaticState: ...
    # Stored if still at `state.version`; False if another sync moved it.
    def write(self, pool: str, state: StaticState) -> bool: ...
    def forget(self, pool: str) -> None: ...
