"""The one table of the TYPEs `get`, `delete` and completion accept: each type's plural (the name
the commands act on), its singular and its short names, typed in any case, as kubectl accepts
`nodepool`, `NodePools` or `np`.

Only the standard library: the parser uses it, and `--help` must stay fast.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass


@dataclass(frozen=True)
class ResourceType:
    plural: str
    singular: str
    short: tuple[str, ...] = ()
    # The kind `delete` removes (its singular is what `delete` prints); None: not deletable.
    deletes: str | None = None
    # The field that names an item of its `-o json` listing when it is not a document.
    name_field: str | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return (self.plural, self.singular, *self.short)


# `cr` is not given to OME's CapacityReservation: here "capacity reservation" also means EC2's
# (`get reservations`), so a short name would be read both ways.
TYPES = (
    ResourceType("nodepools", "nodepool", ("np",), deletes="nodepool"),
    ResourceType("nodeclasses", "nodeclass", ("nc",), deletes="nodeclass"),
    ResourceType("ec2nodeclasses", "ec2nodeclass", ("ec2nc",), deletes="nodeclass"),
    ResourceType("nodeclaims", "nodeclaim"),
    ResourceType("capacityquotas", "capacityquota", ("cq", "quotas", "quota"), "capacityquota"),
    ResourceType("capacityreservations", "capacityreservation"),
    ResourceType("clustercapacityreservations", "clustercapacityreservation"),
    ResourceType("priorityclasses", "priorityclass", ("pc",), deletes="priorityclass"),
    # Kueue's Cohort (kueue.x-k8s.io/v1beta1): a cohort's parent and its own quota.
    ResourceType("cohorts", "cohort", deletes="cohort"),
    ResourceType("requests", "request", ("req",), name_field="requestId"),
    # Kueue's pending workloads per queue: one admission queue per NodePool (docs/queueing.md).
    ResourceType("queues", "queue", name_field="nodePool"),
    ResourceType("instances", "instance", name_field="instanceId"),
    ResourceType("reservations", "reservation", name_field="capacityReservationId"),
    ResourceType("unavailable-offerings", "unavailable-offering", name_field="offering"),
)
_BY_NAME = {name: t for t in TYPES for name in t.names}
GET_NAMES = tuple(name for t in TYPES for name in t.names)
DELETE_NAMES = tuple(name for t in TYPES if t.deletes for name in (t.singular, t.plural, *t.short))


def lookup(word: str) -> ResourceType:
    """The type a word names, in any case; a usage error listing the types otherwise."""
    found = _BY_NAME.get(word.lower())
    if found is None:
        known = ", ".join(t.plural for t in TYPES)
        raise argparse.ArgumentTypeError(f"unknown resource type {word!r} (one of: {known})")
    return found


def get_type(word: str) -> str:
    """argparse `type` of `get`'s TYPE: the plural the commands dispatch on."""
    return lookup(word).plural


def delete_type(word: str) -> str:
    """argparse `type` of `delete`'s TYPE: the kind it deletes, by its singular."""
    found = lookup(word)
    if found.deletes is None:
        raise argparse.ArgumentTypeError(f"{word!r} cannot be deleted (only applied documents)")
    return found.deletes


def add_argument(
    parser: argparse.ArgumentParser, dest: str, description: str, optional: bool = False
) -> None:
    """The TYPE positional of `get` (dest "resource") or `delete` (dest "kind"): any of its
    names in any case, completed from the lowercase names (``optional``: `delete -f` has none)."""
    deleting = dest == "kind"
    parser.add_argument(
        dest,
        type=delete_type if deleting else get_type,
        choices=DELETE_NAMES if deleting else GET_NAMES,
        metavar="TYPE",
        help=description,
        nargs="?" if optional else None,
    )
