"""The sync's launch-template lifecycle: delete the templates no NodeClass can use any more
(domain/capacity/template_lifecycle.py), a bounded amount of work each run.

Each run lists a few pages of the service's templates (the inventory goes on from where the last
run stopped) and deletes at most `budget` of them, so a backlog of thousands (a quota filled
before this existed) drains over a few runs without slowing any one of them. A NodeClass
deleted is seen by the next run: its templates go first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from capacity_launcher.domain.capacity.template_lifecycle import ManagedTemplate, unusable
from capacity_launcher.domain.errors import CapacityLauncherError
from capacity_launcher.observability import logger

# Long enough for every launcher to have read a changed NodeClass or image (their caches live
# seconds to minutes), short enough that a weekly image frees its templates the same day.
GRACE = timedelta(hours=1)
DELETIONS_PER_RUN = 100


class TemplateStore(Protocol):
    def managed(self) -> list[ManagedTemplate]: ...
    def delete(self, name: str) -> bool: ...


@dataclass
class SweepReport:
    deleted: dict[str, str] = field(default_factory=dict)  # name -> why
    failed: list[str] = field(default_factory=list)


class TemplateSweep:
    def __init__(
        self,
        templates: TemplateStore,
        now: Callable[[], datetime],
        grace: timedelta = GRACE,
        budget: int = DELETIONS_PER_RUN,
    ) -> None:
        self._templates = templates
        self._now = now
        self._grace = grace
        self._budget = budget

    def run(self, node_classes: Iterable[str], targets: Iterable[str]) -> SweepReport:
        """Delete what no NodeClass named in `node_classes` can use, nor address a reservation
        id or group ARN in `targets`; a failure is logged and left to the next run."""
        report = SweepReport()
        try:
            listed = self._templates.managed()
        except CapacityLauncherError as error:
            logger.warning(
                "launch templates not listed; the next sync tries again", extra={"error": error}
            )
            return report
        due = unusable(listed, node_classes, targets, self._now(), self._grace)
        for template, why in due[: self._budget]:
            try:
                if self._templates.delete(template.name):
                    report.deleted[template.name] = why.value
            except CapacityLauncherError as error:
                report.failed.append(template.name)
                logger.warning(
                    "launch template not deleted; the next sync tries again",
                    extra={"template": template.name, "error": error},
                )
        if report.deleted or report.failed:
            logger.info(
                "launch templates deleted",
                extra={"deleted": report.deleted, "failed": report.failed, "due": len(due)},
            )
        return report
