"""The sync's instance-profile lifecycle: a profile the service made for a NodeClass's `role` is
deleted once no NodeClass names it (the class deleted, or no longer naming a role), as Karpenter
deletes a NodeClass's profile with it.

Each run lists this deployment's profiles in the Region (by their path,
domain/capacity/instance_profiles.py)
and deletes those no stored NodeClass with a role would launch with and no instance of ours still
runs under (a class deleted or renamed while its instances run keeps its profile until they are
gone, as Karpenter waits for a NodeClass's NodeClaims); a failure is logged and left to the next
run. Profiles are made by the launcher, when a class's first request comes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from capacity_launcher.domain.apis.config import NodeClass
from capacity_launcher.domain.capacity.fleet import ManagedInstance
from capacity_launcher.domain.errors import CapacityLauncherError
from capacity_launcher.domain.records.tags import NODE_CLASS, STACK, Ownership
from capacity_launcher.observability import logger


class ProfileStore(Protocol):
    def name(self, node_class: NodeClass) -> str | None: ...
    def name_of(self, node_class: str) -> str: ...
    def managed(self) -> list[str]: ...
    def delete(self, name: str) -> bool: ...


@dataclass
class ProfileSweepReport:
    deleted: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


class ManagedInstances(Protocol):
    def find_managed(
        self, tag_filters: Mapping[str, str] | None = None
    ) -> list[ManagedInstance]: ...


# An instance in these states runs no more: its profile is not needed.
GONE = frozenset({"terminated"})


class ProfileSweep:
    def __init__(
        self, profiles: ProfileStore, instances: ManagedInstances, ownership: Ownership
    ) -> None:
        self._profiles = profiles
        self._instances = instances
        self._ownership = ownership

    def run(self, node_classes: Callable[[], Iterable[NodeClass]]) -> ProfileSweepReport:
        """Delete the service's profiles that no stored NodeClass (`node_classes` reads them)
        names. The profiles are listed first, the classes and instances read after: a class
        applied, and its profile made, while the sync runs is never missed (a launcher makes a
        profile only for a stored class)."""
        report = ProfileSweepReport()
        try:
            listed = self._profiles.managed()
            named = {self._profiles.name(c) for c in node_classes() if c.spec.role is not None}
            # The profiles of the classes our instances were launched from, while they run: read
            # only when a profile is left without a class (most runs read no instances here).
            if set(listed) - named:
                named |= {
                    self._profiles.name_of(i.tags[NODE_CLASS])
                    for i in self._instances.find_managed()
                    if i.state not in GONE and NODE_CLASS in i.tags and self._may_use_ours(i)
                }
        except CapacityLauncherError as error:
            logger.warning(
                "instance profiles, classes or instances not listed; the next sync tries again",
                extra={"error": error},
            )
            return report
        for name in sorted(set(listed) - named):
            try:
                if self._profiles.delete(name):
                    report.deleted.append(name)
            except CapacityLauncherError as error:
                report.failed.append(name)
                logger.warning(
                    "instance profile not deleted; the next sync tries again",
                    extra={"profile": name, "error": error},
                )
        if report.deleted or report.failed:
            logger.info(
                "instance profiles deleted",
                extra={"deleted": report.deleted, "failed": report.failed},
            )
        return report

    def _may_use_ours(self, instance: ManagedInstance) -> bool:
        """Whether the instance may run under one of this deployment's profiles: one of its own,
        or one made before instances carried a stack (kept, to be safe)."""
        return STACK not in instance.tags or self._ownership.owns(instance.tags)
