"""An apply or delete of a CapacityQuota decided apart from the store (domain/apis/quota_changes.py)
and retried by the configuration use case (service/configuration.py), against an in-memory
quota port: the cross-quota check, what is bumped, and the words of each refusal."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from capacity_launcher.domain.apis.documents import parse_document, stored_body
from capacity_launcher.domain.apis.priority_classes import PriorityClass, parse_priority_class
from capacity_launcher.domain.apis.quota_changes import (
    OutstandingBumps,
    QuotaApplyRead,
    QuotaDelete,
    QuotaDeleteRead,
    QuotaPut,
    StoredQuota,
    plan_apply,
    plan_delete,
)
from capacity_launcher.domain.apis.quotas import CapacityQuota
from capacity_launcher.domain.errors import (
    ConditionFailed,
    ConfigConflict,
    NotFound,
)
from capacity_launcher.service.configuration import apply_quota, delete_quota


def _quota(name: str, requesters: list[str], *pools: str) -> CapacityQuota:
    flavors = [
        {"name": pool, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "8"}]}
        for pool in pools or ("training",)
    ]
    document = parse_document(
        {
            "apiVersion": "capacity-launcher/v1",
            "kind": "CapacityQuota",
            "metadata": {"name": name},
            "spec": {
                "requesters": requesters,
                "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": flavors}],
            },
        }
    )
    assert isinstance(document, CapacityQuota)
    return document


def _read(
    *quotas: CapacityQuota,
    stored: StoredQuota | None = None,
    outstanding: OutstandingBumps | None = None,
) -> QuotaApplyRead:
    return QuotaApplyRead(7, quotas, stored, outstanding or OutstandingBumps())


def test_a_quota_conflicting_with_a_stored_one_is_refused_naming_the_requester() -> None:
    stored = _quota("team-a", ["shared"])
    with pytest.raises(ConfigConflict, match="'shared' is already covered in flavor training"):
        plan_apply(_quota("team-b", ["shared"]), None, None, _read(stored))


def test_a_quota_is_checked_against_the_others_not_its_stored_self() -> None:
    old = _quota("team-a", ["shared"], "batch")
    stored = StoredQuota(stored_body(old), None, ("batch",))
    new = _quota("team-a", ["shared"], "training")
    write = plan_apply(new, None, None, _read(old, stored=stored))
    # It bumps the version read, and the pools of its stored and its new document
    assert (write.seen, write.pools) == (7, ("batch", "training"))


def test_the_document_stored_already_is_put_again_bumping_only_what_is_outstanding() -> None:
    quota = _quota("team-a", ["a"], "training")
    stored = StoredQuota(stored_body(quota), None, ("training",))
    left = OutstandingBumps(("spare",), "t-1")
    write = plan_apply(quota, None, None, _read(quota, stored=stored, outstanding=left))
    assert (write.seen, write.pools, write.outstanding) == (None, ("spare",), "t-1")
    # Other kept fields are a change
    kept = plan_apply(quota, '{"k": 1}', None, _read(quota, stored=stored))
    assert (kept.seen, kept.pools) == (7, ("training",))


def test_a_delete_bumps_what_the_stored_quota_names_or_finishes_an_earlier_delete() -> None:
    stored = StoredQuota("{}", None, ("training",))
    left = OutstandingBumps(("spare",), "t-1")
    assert plan_delete("team-a", QuotaDeleteRead(stored, left)) == QuotaDelete(
        "team-a", "{}", ("spare", "training"), None
    )
    assert plan_delete("team-a", QuotaDeleteRead(None, left)) == QuotaDelete(
        "team-a", None, ("spare",), "t-1"
    )
    with pytest.raises(NotFound):
        plan_delete("team-a", QuotaDeleteRead(None, OutstandingBumps()))


@dataclass
class _Quotas:
    """An in-memory quota port: `conflicts` puts that fail as moved before one holds."""

    quotas: dict[str, CapacityQuota] = field(default_factory=dict)
    classes: dict[str, PriorityClass] = field(default_factory=dict)
    conflicts: int = 0
    writes: list[Any] = field(default_factory=list)
    # Applied between the first read and its write (the write then fails: the classes moved).
    class_applied_meanwhile: PriorityClass | None = None

    def apply_read(self, name: str, priority_class: str | None = None) -> QuotaApplyRead:
        named = None if priority_class is None else self.classes.get(priority_class)
        return QuotaApplyRead(
            len(self.writes),
            tuple(self.quotas.values()),
            None,
            OutstandingBumps(),
            classes_version=len(self.classes),
            named=named,
        )

    def put(self, write: QuotaPut) -> None:
        self.writes.append(write)
        meanwhile, self.class_applied_meanwhile = self.class_applied_meanwhile, None
        if meanwhile is not None:
            self.classes[meanwhile.name] = meanwhile
        if self.conflicts > 0 or (
            write.classes_seen is not None and write.classes_seen != len(self.classes)
        ):
            self.conflicts -= 1
            raise ConditionFailed("TransactWriteItems")

    def delete_read(self, name: str) -> QuotaDeleteRead:
        stored = StoredQuota("{}", None, ()) if name in self.quotas else None
        return QuotaDeleteRead(stored, OutstandingBumps())

    def delete(self, write: QuotaDelete) -> None:
        self.writes.append(write)
        if self.conflicts > 0:
            self.conflicts -= 1
            raise ConditionFailed("TransactWriteItems")

    def waiting_for(self, priority_class: str) -> list[Any]:
        return []

    def waited_for(self) -> set[str]:
        return set()


def test_an_apply_that_met_a_concurrent_one_checks_again_then_gives_up_saying_so() -> None:
    port = _Quotas(conflicts=2)
    apply_quota(port, _quota("team-a", ["a"]))
    assert [w.seen for w in port.writes] == [0, 1, 2]

    port = _Quotas(conflicts=3)
    with pytest.raises(ConfigConflict, match="other quotas kept changing while it was applied"):
        apply_quota(port, _quota("team-a", ["a"]))
    assert len(port.writes) == 3


def _naming(priority_class: str) -> Any:
    from capacity_launcher.domain.apis.kept_fields import Kept
    from capacity_launcher.domain.apis.priority_classes import PRIORITY_CLASS_NAME_PATH

    return Kept("ome.io/v1beta1", "CapacityReservation", {PRIORITY_CLASS_NAME_PATH: priority_class})


def _priority_class(name: str, value: int) -> PriorityClass:
    return parse_priority_class(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
        }
    )


def test_a_quota_naming_a_class_not_stored_is_written_waiting_for_it_with_priority_0() -> None:
    port = _Quotas()
    write = apply_quota(port, _quota("team-a", ["a"]), _naming("serving"))
    assert (write.priority_class, write.unresolved, write.classes_seen) == ("serving", True, 0)
    assert parse_document(json.loads(write.body)).spec.priority == 0


def test_a_quota_naming_a_stored_class_takes_its_value_as_read() -> None:
    port = _Quotas(classes={"serving": _priority_class("serving", 700)})
    write = apply_quota(port, _quota("team-a", ["a"]), _naming("serving"))
    assert (write.unresolved, write.classes_seen) == (False, 1)
    assert parse_document(json.loads(write.body)).spec.priority == 700


def test_a_class_applied_between_the_read_and_the_write_is_read_again() -> None:
    """The write is conditioned on the classes' version it read: the class applied meanwhile
    sends it back, and the next read resolves it (never stored waiting for a stored class)."""
    port = _Quotas(class_applied_meanwhile=_priority_class("serving", 700))
    write = apply_quota(port, _quota("team-a", ["a"]), _naming("serving"))
    assert [w.unresolved for w in port.writes] == [True, False]
    assert parse_document(json.loads(write.body)).spec.priority == 700


def test_the_same_document_waiting_then_resolved_is_a_change() -> None:
    """A reservation stored waiting (priority 0) is written again once its class is stored,
    even when the class's value is 0: the mark is part of what is stored."""
    quota = _quota("team-a", ["a"], "training")
    waiting = StoredQuota(stored_body(quota), None, ("training",), "serving")
    read = QuotaApplyRead(
        7, (quota,), waiting, OutstandingBumps(), 2, _priority_class("serving", 0)
    )
    write = plan_apply(quota, None, "serving", read)
    assert (write.seen, write.unresolved, write.pools) == (7, False, ("training",))


def test_a_delete_that_kept_meeting_changes_gives_up_saying_so() -> None:
    port = _Quotas(quotas={"team-a": _quota("team-a", ["a"])}, conflicts=3)
    with pytest.raises(ConfigConflict, match="team-a kept changing while it was being deleted"):
        delete_quota(port, "team-a")
    port.conflicts = 2
    delete_quota(port, "team-a")
