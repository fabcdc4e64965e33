"""The ports of the use cases: what they need from the outside world, as protocols adapters/
implements. One protocol per concept; a use case that needs fewer methods still names it. The
ports of accounting (a pool's limits and quotas) are in service/accounting_ports.py."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from capacity_launcher.domain.accounting.admission_queue import QueueEntry
from capacity_launcher.domain.apis.config import NodeClass, NodePool, PoolSet
from capacity_launcher.domain.apis.node_class_terms import CapacityReservationSelectorTerm
from capacity_launcher.domain.apis.quota_sets import QuotaSet
from capacity_launcher.domain.apis.quotas import CapacityQuota
from capacity_launcher.domain.capacity.block_extensions import (
    BlockExtension,
    BlockExtensionOffering,
)
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
from capacity_launcher.domain.capacity.request_block_ends import (
    BlockEndState as RequestBlockEndState,
)
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
from capacity_launcher.domain.quantities import Resources
from capacity_launcher.domain.records.claims import Claim
from capacity_launcher.domain.records.instance_records import InstanceRecord
from capacity_launcher.domain.records.intents import IntentCompletion, LaunchIntent
from capacity_launcher.domain.records.status import RequestRecord
from capacity_launcher.service.accounting_ports import PoolLeases, Reclaims

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
    # Those of `request_ids` that exist, by id, in one read per hundred.
    def get_records(self, request_ids: Sequence[str]) -> dict[str, RequestRecord]: ...
    # A requestId is bound to the hash of its first body (bind: the hash bound, ours if first).
    def bind_body(self, request_id: str, body_hash: str) -> str: ...
    # And whether this call bound it (no delivery did before: nothing of it is stored yet).
    def bind_first_body(self, request_id: str, body_hash: str) -> tuple[str, bool]: ...
    def bound_body(self, request_id: str) -> str | None: ...
    # The intent, its pointers and the slots it claims (`claimed`) in one write: False when it
    # exists already, ConditionFailed when its reservation has not those slots claimable.
    def write_intent(self, intent: LaunchIntent) -> bool: ...
    # Its answer, the slots it claimed that no instance took given back, and those its instances
    # took in reservations it did not claim noted, once (`IntentCompletion`).
    def complete_intent(self, done: IntentCompletion) -> None: ...
    # A pending intent's claim let go with its slots, once (its CreateFleet raised).
    def release_claim(self, intent: LaunchIntent) -> None: ...


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


class ShareReads(Protocol):
    """What a wake orders its window by (fair sharing, domain/accounting/fair_sharing.py): the
    cohorts' usage items of one pool, in one read (adapters/quota_usage_store.py)."""

    def usage_in(self, items: Sequence[str], pool: str) -> Mapping[tuple[str, str], Resources]: ...


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


class OpenReservationSummary(Protocol):
    """The account's open reservations as the sync shares them (adapters/shared_resolutions.py)."""

    def open_reservations(self, node_class: NodeClass) -> frozenset[tuple[str, str]] | None:
        """(instance type, zone) of each, as the class's resolution held now says, read with no
        call; None when none is held or it cannot say."""
        ...


# -- capacity reservations ------------------------------------------------------------------------


class Reservations(Protocol):
    """The launcher's reservations (service/reservations.py)."""

    def sources(
        self,
        node_class: NodeClass,
        scope: ReservationScope = ...,
        enough_room: Callable[[Sequence[ReservationSource]], bool] | None = None,
        *,
        most_room_first: bool = False,
    ) -> list[ReservationSource]: ...
    def as_of(self, node_class: NodeClass) -> float | None: ...
    # `take(n)`: the write that takes n slots (False: the snapshot has not them claimable).
    def claim(
        self, reservation_id: str, count: int, take: Callable[[int], bool] | None = None
    ) -> int | None: ...
    def give_back(self, reservation_id: str, count: int) -> None: ...
    def mark_exhausted(self, reservation_ids: Sequence[str]) -> None: ...
    def note_launched(self, launched: Mapping[str, int]) -> None: ...
    # The snapshots of reservations a launch landed in that its read did not return.
    def landed_in(
        self, node_class: NodeClass, reservation_ids: Collection[str], known: Collection[str]
    ) -> dict[str, ReservationSnapshot]: ...


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
    def coverage_with(
        self, keys: Sequence[str], reservation_ids: Sequence[str]
    ) -> tuple[dict[str, Coverage], dict[str, StoredReservation], set[str]]: ...
    def snapshots(
        self, reservation_ids: Sequence[str]
    ) -> tuple[dict[str, StoredReservation], set[str]]: ...
    def get(self, reservation_id: str) -> StoredReservation | None: ...
    def save(self, reservation: StoredReservation, expected_version: int | None) -> bool: ...
    def save_coverage(self, coverage: Sequence[Coverage]) -> None: ...
    def forget(self, keys: Sequence[str]) -> None: ...
    def take(self, reservation_id: str, count: int) -> bool: ...
    def take_claimable(self, reservation_id: str, count: int) -> bool: ...
    def empty(self, reservation_id: str) -> None: ...
    def add(self, reservation_id: str, count: int, *, at_most: int) -> bool: ...
    def mark_exhausted(self, reservation_ids: Sequence[str]) -> None: ...
    def release_slot(self, reservation_id: str, synced_at: datetime | None) -> bool: ...
    def catch_up(
        self, reservation_id: str, available: int, total: int, *, expected_version: int
    ) -> bool: ...


# -- claims on requestIds (idempotency) ------------------------------------------------------------


class RequestClaims(Protocol):
    """Each delivery's claim on its requestId (adapters/request_claims.py)."""

    def claim(self, payload: Mapping[str, Any], remaining_ms: int | None = None) -> Claim: ...
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
    # Whether a launch naming a static pool is one the sync sent (None: its id's shape says).
    static_pools: StaticPoolStates | None = None
    # The account's open reservations: an on-demand launch none can hold is located by
    # CreateFleet's answer (None: always asks EC2).
    open_reservations: OpenReservationSummary | None = None


# -- static NodePools -----------------------------------------------------------------------------


class BlockExtensionSales(Protocol):
    """Capacity Block extensions as EC2 sells them (adapters/capacity_reservations.py)."""

    def extension_offerings(
        self, reservation_id: str, duration_hours: int
    ) -> list[BlockExtensionOffering]: ...
    def purchase_extension(self, offering_id: str, reservation_id: str) -> BlockExtension: ...


class RequestBlockEndStates(Protocol):
    """What was chosen for one block end for the requests that opted in
    (adapters/request_block_end_items.py)."""

    def read(self, block: str, ends_at: int) -> RequestBlockEndState: ...
    # Stored if still at `state.version`; False if another sync moved it.
    def write(self, block: str, state: RequestBlockEndState) -> bool: ...


class StaticPoolStates(Protocol):
    """A static pool's launches in flight and dry zones (adapters/static_pool_items.py)."""

    def read(self, pool: str) -> StaticState: ...
    # Stored if still at `state.version`; False if another sync moved it.
    def write(self, pool: str, state: StaticState) -> bool: ...
    def forget(self, pool: str) -> None: ...
