"""The reservation sync: every minute, what EC2 says of the reservations any NodeClass can use.

One DescribeCapacityReservations (paginated, unfiltered: every reservation the account owns or is
shared) plus one ListGroupResources per reservation group; targets, groups and selector terms are
then resolved locally. Each snapshot is written only if no launcher changed it since it was read
(its version), and the events of a crossing are published once, after the write that records them.
Reconciliation runs first, so the snapshots carry this minute's usage by requester; the quotas'
share (reclaims, quota usage recount, status) runs next (service/quota_sync.py), and the backstop
of waits for scheduled capacity last (service/wait_backstop.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import partial
from typing import Protocol

from capacity_launcher.domain.apis.config import NodeClass
from capacity_launcher.domain.capacity.offerings import RESERVED, offering_key
from capacity_launcher.domain.capacity.reservation_coverage import (
    keep_newly_expired,
    selected_by,
    term_coverage,
    with_placements,
)
from capacity_launcher.domain.capacity.reservation_state import (
    Coverage,
    HeldInstance,
    StoredReservation,
    Thresholds,
    next_state,
    unchanged,
)
from capacity_launcher.domain.capacity.reservations import (
    SELECTABLE_STATES,
    ReservationSnapshot,
    open_offerings,
    target_key,
)
from capacity_launcher.domain.records.status import (
    RESERVATION_REPLENISHED,
    RESERVATION_UNDERUTILIZED,
    Event,
)
from capacity_launcher.domain.records.wait_gauges import WaitGauge
from capacity_launcher.observability import MetricUnit, logger, metrics
from capacity_launcher.service.admission_queue import AdmissionQueue
from capacity_launcher.service.minute_waits import MinuteWaits
from capacity_launcher.service.ports import (
    Configuration,
    Ec2Reservations,
    HeldWaits,
    ReservationStore,
    UnavailableCache,
)
from capacity_launcher.service.profile_sweep import ProfileSweep, ProfileSweepReport
from capacity_launcher.service.quota_sync import QuotaSync, QuotaSyncReport
from capacity_launcher.service.reconciliation import Reconciliation, ReconciliationReport
from capacity_launcher.service.request_block_ends import RequestBlockEndReport, RequestBlockEnds
from capacity_launcher.service.reservation_groups import group_coverage_of
from capacity_launcher.service.resolution_sync import ResolutionSync, resolution_part
from capacity_launcher.service.static_pools import StaticPools, StaticReport
from capacity_launcher.service.sync_metrics import (
    RESERVATIONS_UNDERUTILIZED,
    WaitGauges,
    emit_reservation,
    run_reconciliation,
)
from capacity_launcher.service.sync_parts import contained
from capacity_launcher.service.template_sweep import SweepReport, TemplateSweep
from capacity_launcher.service.usage_rollup import UsageRollup, UsageRollupReport
from capacity_launcher.service.wait_backstop import WaitBackstop

# A snapshot launchers are writing to is re-read this many times before waiting for the next sync.
SAVE_TRIES = 3


@dataclass
class SyncReport:
    synced: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    forgotten: list[str] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    reconciliation: ReconciliationReport | None = None
    quotas: QuotaSyncReport | None = None
    # Waiting requests whose held copy was lost, ended Failed (CapacityNotActiveByDeadline).
    ended_waits: list[str] = field(default_factory=list)
    # Instances seen running with their status checks ok, in pools with limits.unready.
    ready: list[str] = field(default_factory=list)
    templates: SweepReport | None = None
    # The parts of this run that failed (service/sync_parts.py), in the order they ran; the
    # others ran all the same.
    failed: list[str] = field(default_factory=list)
    profiles: ProfileSweepReport | None = None
    # Waiting requests whose queue's head was woken this minute (issue 37).
    woken: list[str] = field(default_factory=list)
    # Requests waiting and the oldest wait, by team, as published this minute.
    waiting: list[WaitGauge] = field(default_factory=list)
    static: StaticReport | None = None
    # Each synced reservation as the previous look left it (this run's, for one seen the first
    # time): its counts held until this look, as the usage roll-up counts them (usage_rollup.py).
    counted: dict[str, StoredReservation] = field(default_factory=dict)
    usage: UsageRollupReport | None = None
    # Requests that opted in to capacityBlockEnd: replacements sent, extensions bought.
    request_block_ends: RequestBlockEndReport | None = None


class Readiness(Protocol):
    """Marks the members of a pool that are running with their status checks ok."""

    def mark_ready(self, pool: str) -> list[str]: ...


class ReservationSync:
    def __init__(
        self,
        config: Configuration,
        ec2: Ec2Reservations,
        snapshots: ReservationStore,
        unavailable: UnavailableCache,
        publish: Callable[..., None],
        thresholds: Thresholds,
        now: Callable[[], datetime],
        reconciliation: Reconciliation | None = None,
        quotas: QuotaSync | None = None,
        waits: WaitBackstop | None = None,
        readiness: Readiness | None = None,
        templates: TemplateSweep | None = None,
        profiles: ProfileSweep | None = None,
        admission: AdmissionQueue | None = None,
        static_pools: StaticPools | None = None,
        usage: UsageRollup | None = None,
        resolutions: ResolutionSync | None = None,
        gauges: WaitGauges | None = None,
        classes_applied: Callable[[], list[str]] | None = None,
        request_block_ends: RequestBlockEnds | None = None,
    ) -> None:
        self._request_block_ends = request_block_ends
        self._gauges = gauges
        # Reservations left waiting for a PriorityClass that is applied now, resolved.
        self._classes_applied = classes_applied
        self._resolutions = resolutions
        self._static_pools = static_pools
        self._readiness = readiness
        self._admission = admission
        self._usage = usage
        self._config = config
        self._ec2 = ec2
        self._snapshots = snapshots
        self._unavailable = unavailable
        self._publish = publish
        self._thresholds = thresholds
        self._now = now
        self._reconciliation = reconciliation
        self._quotas = quotas
        self._waits = waits
        self._templates = templates
        self._profiles = profiles

    def _mark_ready(self) -> list[str]:
        """limits.unready: the members now ready in each pool that limits its unready ones."""
        assert self._readiness is not None
        pools = self._config.node_pools()
        limited = [p.name for p in pools if p.spec.limits and p.spec.limits.unready is not None]
        return [i for pool in limited for i in self._readiness.mark_ready(pool)]

    def run(self) -> SyncReport:
        """The minute's parts, in order, each contained (service/sync_parts.py): one that fails
        is logged and counted, and the others still run. Those that act on EC2's list of
        reservations (the waits' backstop, the template sweep) are skipped when it was not read:
        an empty list would read as every reservation gone."""
        report = SyncReport()
        # The live waits, read once a run for the backstop and the gauges (minute_waits.py).
        waits = MinuteWaits(self._waits.waits) if self._waits is not None else None
        listed = self._observe(report)
        self._repair(report)
        if listed is not None:
            self._act_on_the_list(report, *listed, waits)
        # Shared with every launcher, with the account's open reservations (unknown when EC2's
        # list was not read): an on-demand launch none can hold is located by CreateFleet's
        # answer (service/launch/send.py).
        summary = open_offerings(listed[1].values()) if listed is not None else None
        resolution_part(report.failed, self._resolutions, summary)
        self._wake(report, waits)
        logger.info(
            "reservations synced",
            extra={
                "synced": len(report.synced),
                "conflicts": report.conflicts,
                "events": [e.detail_type for e in report.events],
                "endedWaits": report.ended_waits,
                "woken": report.woken,
                "failedParts": report.failed,
            },
        )
        return report

    def _observe(
        self, report: SyncReport
    ) -> tuple[list[NodeClass], dict[str, ReservationSnapshot]] | None:
        """Reconciliation, then the reservations' snapshots (carrying this minute's usage),
        then usage by team over both; EC2's list of reservations, None if it was not read."""
        failed = report.failed
        if self._reconciliation is not None:
            reconciliation = self._reconciliation
            report.reconciliation = contained(
                failed, "reconciliation", lambda: run_reconciliation(reconciliation), None
            )
        listed = contained(failed, "reservations", lambda: self._sync_reservations(report), None)
        if self._usage is not None and report.reconciliation is not None and listed is not None:
            # After both: the instances reconciliation listed, the snapshots just written.
            usage, reconciled = self._usage, report.reconciliation
            report.usage = contained(
                failed,
                "usage",
                lambda: usage.run(reconciled.described, reconciled.records, report.counted),
                None,
            )
        return listed

    def _repair(self, report: SyncReport) -> None:
        """What follows the membership reconciliation repaired: readiness, static pools (their
        members counted), quotas (usage recounted from it)."""
        failed = report.failed
        if self._readiness is not None:
            report.ready = contained(failed, "readiness", self._mark_ready, [])
        if self._static_pools is not None:
            report.static = contained(failed, "static", self._static_pools.run, None)
        if self._classes_applied is not None:
            none: list[str] = []
            contained(failed, "priority-classes", self._classes_applied, none)
        if self._quotas is not None:
            report.quotas = contained(failed, "quotas", self._quotas.run, None)
            if report.quotas is not None:
                failed += report.quotas.failed

    def _act_on_the_list(
        self,
        report: SyncReport,
        node_classes: list[NodeClass],
        everything: dict[str, ReservationSnapshot],
        minute: HeldWaits | None,
    ) -> None:
        """The parts that act on EC2's whole list of reservations: the waits' backstop, the
        template sweep, the profile sweep (the classes read again, after the profiles are listed:
        service/profile_sweep.py)."""
        failed = report.failed
        if self._waits is not None:
            waits = self._waits
            run = partial(waits.run, everything, minute)
            report.ended_waits = contained(failed, "waits", run, [])
        if self._request_block_ends is not None and report.reconciliation is not None:
            ends, held = self._request_block_ends, report.reconciliation.held_by_reservation
            report.request_block_ends = contained(
                failed, "request-block-ends", lambda: ends.run(everything, held), None
            )
        if self._templates is not None:
            report.templates = contained(
                failed, "templates", lambda: self._sweep(node_classes, everything), None
            )
        if self._profiles is not None:
            profiles, config = self._profiles, self._config
            report.profiles = contained(
                failed, "profiles", lambda: profiles.run(config.node_classes), None
            )

    def _wake(self, report: SyncReport, waits: HeldWaits | None) -> None:
        """Last: room the minute made (leases reclaimed, ICE entries expired, reservations
        activated or grown, usage recounted) wakes the head of every pool's queue; then what
        still waits is counted, by team."""
        if self._admission is not None:
            admission, config = self._admission, self._config
            report.woken = contained(
                report.failed,
                "queues",
                lambda: admission.wake_all(p.name for p in config.node_pools()),
                [],
            )
        if self._gauges is not None:
            gauges = partial(self._gauges.run, waits)
            report.waiting = contained(report.failed, "waiting", gauges, [])

    def _sync_reservations(
        self, report: SyncReport
    ) -> tuple[list[NodeClass], dict[str, ReservationSnapshot]]:
        """Every snapshot from what EC2 says now; the NodeClasses and EC2's whole list. One
        reservation whose snapshot fails is that reservation's failure alone."""
        usage = report.reconciliation.usage_by_reservation if report.reconciliation else {}
        held = report.reconciliation.held_by_reservation if report.reconciliation else {}
        now = self._now()
        node_classes = list(self._config.node_classes())
        coverage, groups_of, seen, everything = self._resolve(node_classes, now)
        stored, old_coverage = self._snapshots.read()
        keep_newly_expired(seen, stored, everything)
        for reservation_id in sorted(seen):
            observed = replace(seen[reservation_id], groups=groups_of.get(reservation_id, ()))
            one = partial(
                self._sync_one,
                report,
                stored.get(reservation_id),
                observed,
                usage.get(reservation_id, {}),
                now,
                held.get(reservation_id, ()),
            )
            contained(report.failed, "reservation", one, None)
        report.forgotten = sorted(
            [k for k in stored if k not in seen]
            + [k for k in old_coverage if k not in {c.key for c in coverage}]
        )
        self._snapshots.forget(report.forgotten)
        self._snapshots.save_coverage(coverage)
        return node_classes, everything

    def _sweep(
        self, node_classes: Sequence[NodeClass], everything: Mapping[str, ReservationSnapshot]
    ) -> SweepReport:
        """The template sweep, keeping every reservation EC2 lists that may still serve (active or
        upcoming, not ended) and every group a NodeClass names (readable or not)."""
        assert self._templates is not None
        serving = {k for k, r in everything.items() if r.state in SELECTABLE_STATES}
        targets = serving | selected_by(node_classes)[1]
        return self._templates.run([n.metadata.name for n in node_classes], targets)

    def refresh(self, reservation_id: str) -> SyncReport:
        """One reservation's snapshot, from what EC2 says of it now, when EC2 announces that a
        future-dated reservation changed state (`EC2 Capacity Reservation <State>`): launchers
        see it `active` (or `delayed`, `expired`) at once instead of at the next sync, and its
        crossings are published as the sync would. A reservation no snapshot holds (no
        NodeClass uses it) or EC2 no longer lists is left to the next sync."""
        report = SyncReport()
        prev = self._snapshots.get(reservation_id)
        observed = self._ec2.describe(ids=[reservation_id]) if prev is not None else []
        if prev is None or not observed:
            report.forgotten = [reservation_id]
            return report
        now = self._now()
        observed_one = replace(observed[0], groups=prev.snapshot.groups)
        self._sync_one(report, prev, observed_one, prev.usage_by_requester, now, ())
        logger.info(
            "reservation refreshed on its state event",
            extra={"reservationId": reservation_id, "state": observed_one.state},
        )
        return report

    def _sync_one(
        self,
        report: SyncReport,
        prev: StoredReservation | None,
        observed: ReservationSnapshot,
        usage: Mapping[str, int],
        now: datetime,
        held: Sequence[HeldInstance],
    ) -> None:
        """Save one reservation's snapshot, publish its crossings and emit its metrics."""
        reservation_id = observed.reservation_id
        saved = self._save(prev, observed, usage, now, held)
        if saved is None:
            # Launchers keep writing it; the next sync (a minute away) looks again.
            report.conflicts.append(reservation_id)
            return
        new, events = saved
        report.synced.append(reservation_id)
        report.counted[reservation_id] = prev if prev is not None and prev.idle else new
        if any(e.detail_type == RESERVATION_REPLENISHED for e in events):
            self._unavailable.clear(offering_key(RESERVED, None, None, reservation_id))
        if events:
            self._publish(*events)
            report.events += events
        emit_reservation(new, now)
        underutilized = sum(e.detail_type == RESERVATION_UNDERUTILIZED for e in events)
        if underutilized:
            metrics.add_metric(
                name=RESERVATIONS_UNDERUTILIZED, unit=MetricUnit.Count, value=underutilized
            )

    def _save(
        self,
        prev: StoredReservation | None,
        observed: ReservationSnapshot,
        usage: Mapping[str, int],
        now: datetime,
        held: Sequence[HeldInstance] = (),
    ) -> tuple[StoredReservation, list[Event]] | None:
        """Store what EC2 says unless a launcher wrote meanwhile; then re-read and try again."""
        for _ in range(SAVE_TRIES):
            new, events = next_state(prev, observed, usage, self._thresholds, now, held)
            if prev is not None and not events and unchanged(prev, new):
                return prev, []  # nothing to write: this run's coverage says it looked
            if self._snapshots.save(new, prev.version if prev else None):
                return new, events
            prev = self._snapshots.get(observed.reservation_id)
        return None

    def _resolve(
        self, node_classes: Sequence[NodeClass], now: datetime
    ) -> tuple[
        list[Coverage],
        dict[str, tuple[str, ...]],
        dict[str, ReservationSnapshot],
        dict[str, ReservationSnapshot],
    ]:
        """Coverage per target/term, group ARNs per reservation, every reservation needed, and
        every reservation EC2 described."""
        ids, group_arns, terms = selected_by(node_classes)
        if not (ids or group_arns or terms or self._resolutions):
            return [], {}, {}, {}
        # Read whenever the launchers are shared resolutions: their summary of the account's
        # open reservations comes from it even when no NodeClass selects any.
        everything = {r.reservation_id: r for r in self._ec2.describe()}
        at = now.timestamp()
        coverage = [Coverage(target_key(i), at, (i,) if i in everything else ()) for i in ids]
        group_coverage, groups_of = group_coverage_of(self._ec2, group_arns, everything, at)
        coverage += group_coverage
        coverage += term_coverage(terms, everything, at)
        coverage = with_placements(coverage, everything)
        wanted = {m for c in coverage for m in c.members}
        return (
            coverage,
            {k: tuple(sorted(v)) for k, v in groups_of.items()},
            {k: everything[k] for k in wanted},
            everything,
        )
