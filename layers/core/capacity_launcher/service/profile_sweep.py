"""The sync's instance-profile lifecycle: a profile the service made for a NodeClass's `role` is
deleted once no NodeClass names it (the class deleted, or no longer naming a role), as Karpenter
deletes a NodeClass's profile with it.

Each run lists this deployment's profiles in the Region (by their path, domain/instance_profiles.py)
and deletes those no stored NodeClass with a role would launch with; a failure is logged and left
to the next run. Profiles are made by the launcher, when a class's first request comes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from capacity_launcher.domain.config import NodeClass
from capacity_launcher.domain.errors import CapacityLauncherError
from capacity_launcher.observability import logger


class ProfileStore(Protocol):
    def name(self, node_class: NodeClass) -> str | None: ...
    def managed(self) -> list[str]: ...
    def delete(self, name: str) -> bool: ...


@dataclass
class ProfileSweepReport:
    deleted: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


class ProfileSweep:
    def __init__(self, profiles: ProfileStore) -> None:
        self._profiles = profiles

    def run(self, node_classes: Iterable[NodeClass]) -> ProfileSweepReport:
        """Delete the service's profiles that none of `node_classes` (every stored one) names."""
        report = ProfileSweepReport()
        named = {self._profiles.name(c) for c in node_classes if c.spec.role is not None}
        try:
            listed = self._profiles.managed()
        except CapacityLauncherError as error:
            logger.warning(
                "instance profiles not listed; the next sync tries again", extra={"error": error}
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
