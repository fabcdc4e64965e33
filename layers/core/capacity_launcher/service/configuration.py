"""What operators change (`apply`, `delete`): NodeClasses, NodePools, CapacityQuotas and
PriorityClasses, each stored through its own store. Built by the composition root
(`wiring.Adapters.configuration`); the CLI reads the files, converts each document to its hubs
and prints what this answers.

The checks across documents: those applied together (`conflicts_among`, before anything is
stored) and each against what is stored (the stores refuse a NodePool naming no stored NodeClass,
a quota conflicting with the stored quotas, a reservation naming no stored PriorityClass).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from capacity_launcher.domain.apis.config import NodeClass, NodePool
from capacity_launcher.domain.apis.priority_classes import PRIORITY_CLASS, PriorityClass
from capacity_launcher.domain.apis.quotas import CapacityQuota, conflicts

if TYPE_CHECKING:
    from capacity_launcher.domain.apis.api_versions import Kept

Hub = NodeClass | NodePool | CapacityQuota | PriorityClass


class ConfigWrites(Protocol):
    def apply(
        self, document: NodeClass | NodePool | CapacityQuota, kept: Kept | None = None
    ) -> None: ...
    def delete(self, kind: Any, name: str) -> None: ...


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
        else:
            self.config.apply(document, kept)

    def delete(self, kind: str, name: str) -> None:
        """Delete one document (NotFound when none is stored)."""
        if kind == PRIORITY_CLASS:
            self.priority_classes.delete(name)
        else:
            self.config.delete(kind, name)
