"""The sync's share of the launchers' resolution (issue 38): each NodeClass's selectors resolved
once and stored for every launcher container (domain/capacity/shared_resolution.py decides when
and what may be used; adapters/shared_resolutions.py stores it).

A class whose stored resolution is of its revision and younger than REFRESH_AFTER_SECONDS is
left alone (no EC2 call); one due is resolved with this run's resolvers (subnets, security
groups and images fresh: nothing carried from an earlier run, so `resolvedAt` is when EC2 said
them; the instance types from the sync's own catalog, kept across runs for its TTLs less the
300 s a launcher may hold them) and stored, its parts only when what it resolved to changed.
A class EC2 refuses now (no subnet, security group or image found, an image EC2 does not know,
a field refused) has its stored resolution deleted: launchers ask EC2 and are refused by it,
naming the field, as before any sharing."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from capacity_launcher.domain.apis.config import NodeClass
from capacity_launcher.domain.apis.documents import revision_of
from capacity_launcher.domain.capacity.shared_resolution import Head, Resolution, due
from capacity_launcher.domain.errors import LaunchFailed, NodeClassRefused
from capacity_launcher.observability import logger
from capacity_launcher.service.sync_parts import contained


class ResolutionStore(Protocol):
    def heads(self, names: Sequence[str]) -> dict[str, Head]: ...
    def save(
        self,
        node_class: str,
        revision: str,
        resolved_at: float,
        resolution: Resolution,
        previous: Head | None,
    ) -> Head: ...
    def forget(self, head: Head) -> None: ...


class SelectorResolver(Protocol):
    def shared(self, node_class: NodeClass) -> Resolution | None:
        """What the class's selectors resolve to now; None when one finds nothing."""
        ...


@dataclass
class ResolutionReport:
    resolved: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    # Classes EC2 refuses now, with the code (their stored resolution deleted).
    refused: dict[str, str] = field(default_factory=dict)


class ResolutionSync:
    def __init__(
        self,
        classes: Callable[[], list[NodeClass]],
        store: ResolutionStore,
        resolvers: Callable[[], SelectorResolver],
        now: Callable[[], float],
    ) -> None:
        """`resolvers`: built once per run (its caches this run's only); `now`: epoch seconds,
        the launchers' clock."""
        self._classes = classes
        self._store = store
        self._resolvers = resolvers
        self._now = now

    def run(self, open_reservations: frozenset[tuple[str, str]] | None = None) -> ResolutionReport:
        """`open_reservations`: the account's open reservations as this minute's list of them
        says (domain/capacity/reservations.py `open_offerings`), stored in every class's
        resolution; None when the list was not read (stored as unknown: launchers ask EC2
        where their on-demand instances landed)."""
        report = ResolutionReport()
        classes = self._classes()
        heads = self._store.heads([c.metadata.name for c in classes]) if classes else {}
        resolver: SelectorResolver | None = None
        for node_class in classes:
            name, revision = node_class.metadata.name, revision_of(node_class)
            head = heads.get(name)
            if not due(head, revision, self._now(), open_reservations):
                report.kept.append(name)
                continue
            resolver = resolver or self._resolvers()
            at = self._now()
            try:
                resolution = resolver.shared(node_class)
            except (NodeClassRefused, LaunchFailed) as refused:
                report.refused[name] = refused.code
                resolution = None
            if resolution is None:
                report.refused.setdefault(name, "NothingSelected")
                if head is not None:
                    self._store.forget(head)
                continue
            resolution = replace(resolution, open_reservations=open_reservations)
            self._store.save(name, revision, at, resolution, head)
            report.resolved.append(name)
        logger.info(
            "NodeClasses resolved for the launchers",
            extra={"resolved": report.resolved, "kept": report.kept, "refused": report.refused},
        )
        return report


def resolution_part(
    failed: list[str],
    sync: ResolutionSync | None,
    open_reservations: frozenset[tuple[str, str]] | None = None,
) -> ResolutionReport | None:
    """The sync minute's `resolutions` part, contained (service/sync_parts.py); None when the
    sync has none, or it failed."""
    if sync is None:
        return None
    return contained(failed, "resolutions", lambda: sync.run(open_reservations), None)
