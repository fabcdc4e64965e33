"""An apply or delete of a PriorityClass decided apart from the store
(domain/apis/priority_class_changes.py) and retried by the configuration use case
(service/configuration.py), against an in-memory port: the rules, the conditioned writes, and
the words of each refusal."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from capacity_launcher.domain.apis.priority_class_changes import (
    PriorityClassDelete,
    PriorityClassDeleteRead,
    PriorityClassesRead,
    PriorityClassPut,
    plan_apply,
    plan_delete,
)
from capacity_launcher.domain.apis.priority_classes import PriorityClass, parse_priority_class
from capacity_launcher.domain.errors import ConfigConflict, NotFound
from capacity_launcher.service.configuration import apply_priority_class, delete_priority_class


def _class(name: str, value: int, **fields: Any) -> PriorityClass:
    return parse_priority_class(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
            **fields,
        }
    )


@dataclass
class _Classes:
    """The port in memory: `moves` writes fail (another apply landed) before one holds."""

    classes: dict[str, PriorityClass] = field(default_factory=dict)
    named_by: dict[str, str | None] = field(default_factory=dict)
    version: int = 0
    moves: int = 0
    writes: list[Any] = field(default_factory=list)

    def priority_classes(self) -> list[PriorityClass]:
        return list(self.classes.values())

    def read(self) -> PriorityClassesRead:
        return PriorityClassesRead(self.version, tuple(self.classes.values()))

    def put(self, write: PriorityClassPut) -> bool:
        self.writes.append(write)
        if self.moves or write.seen != self.version:
            self.moves -= 1
            self.version += 1
            return False
        self.classes[write.applied.name] = write.applied
        self.version += 1
        return True

    def delete_read(self, name: str) -> PriorityClassDeleteRead:
        return PriorityClassDeleteRead(3, self.version, name in self.classes, self.named_by)

    def delete(self, write: PriorityClassDelete) -> bool:
        self.writes.append(write)
        if self.moves:
            self.moves -= 1
            return False
        del self.classes[write.name]
        return True


def test_a_class_is_written_conditioned_on_the_version_its_check_read() -> None:
    port = _Classes(version=4)
    apply_priority_class(port, _class("serving", 700))
    assert port.writes == [PriorityClassPut(_class("serving", 700), 4)]
    assert port.classes["serving"].value == 700


def test_the_rules_refuse_a_new_value_and_a_second_global_default() -> None:
    read = PriorityClassesRead(
        2, (_class("serving", 700), _class("everyday", 1, globalDefault=True))
    )
    with pytest.raises(ConfigConflict, match=r"serving: value: may not change .*700, not 800"):
        plan_apply(_class("serving", 800), read)
    with pytest.raises(ConfigConflict, match=r"globalDefault: .*PriorityClass everyday is"):
        plan_apply(_class("other", 5, globalDefault=True), read)
    assert plan_apply(_class("serving", 700, description="now"), read).seen == 2


def test_an_apply_that_met_concurrent_ones_checks_again_then_gives_up_saying_so() -> None:
    port = _Classes(moves=1)
    apply_priority_class(port, _class("serving", 700))
    assert [w.seen for w in port.writes] == [0, 1]  # read again after the first failed

    port = _Classes(moves=3)
    with pytest.raises(ConfigConflict, match="other classes kept changing"):
        apply_priority_class(port, _class("serving", 700))
    assert "serving" not in port.classes


def test_a_class_a_reservation_names_is_not_deleted_and_a_missing_one_is_not_found() -> None:
    port = _Classes({"serving": _class("serving", 700)}, {"inference": "serving", "b": None})
    with pytest.raises(ConfigConflict, match=r"named by reservation\(s\) inference"):
        delete_priority_class(port, "serving")
    with pytest.raises(NotFound):
        delete_priority_class(port, "absent")
    assert port.writes == []


def test_a_delete_is_conditioned_on_both_versions_and_read_again_when_one_moved() -> None:
    port = _Classes({"serving": _class("serving", 700)}, version=9, moves=1)
    delete_priority_class(port, "serving")
    assert port.writes == [PriorityClassDelete("serving", 3, 9)] * 2
    assert port.classes == {}
    assert plan_delete("x", PriorityClassDeleteRead(1, 2, True, {})) == PriorityClassDelete(
        "x", 1, 2
    )
