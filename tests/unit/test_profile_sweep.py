"""The sync's instance-profile sweep reads the instances only when a profile has lost its class."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from capacity_launcher.domain.capacity.fleet import ManagedInstance
from capacity_launcher.domain.records.tags import Ownership
from capacity_launcher.service.profile_sweep import ProfileSweep

pytestmark = pytest.mark.unit


class _Profiles:
    def __init__(self, listed: list[str]) -> None:
        self.listed = listed
        self.deleted: list[str] = []

    def name(self, node_class: Any) -> str:
        return f"profile-{node_class.metadata.name}"

    def name_of(self, node_class: str) -> str:
        return f"profile-{node_class}"

    def managed(self) -> list[str]:
        return list(self.listed)

    def delete(self, name: str) -> bool:
        self.deleted.append(name)
        return True


class _Instances:
    def __init__(self) -> None:
        self.reads = 0

    def find_managed(self, tag_filters: Mapping[str, str] | None = None) -> list[ManagedInstance]:
        self.reads += 1
        return []


class _Class:
    def __init__(self, name: str) -> None:
        self.metadata = type("M", (), {"name": name})()
        self.spec = type("S", (), {"role": "KarpenterNodeRole-x"})()


def test_a_run_whose_profiles_all_have_their_class_reads_no_instances() -> None:
    # Given two profiles, each named by a stored class
    profiles, instances = _Profiles(["profile-a", "profile-b"]), _Instances()
    sweep = ProfileSweep(profiles, instances, Ownership("stack"))
    # When the sync sweeps
    report = sweep.run(lambda: [_Class("a"), _Class("b")])  # type: ignore[list-item]
    # Then nothing is deleted and no instance listing was asked for
    assert report.deleted == [] and instances.reads == 0


def test_a_profile_left_without_its_class_is_deleted_after_the_instances_are_read() -> None:
    profiles, instances = _Profiles(["profile-a", "profile-gone"]), _Instances()
    report = ProfileSweep(profiles, instances, Ownership("stack")).run(lambda: [_Class("a")])  # type: ignore[list-item]
    assert report.deleted == ["profile-gone"] and instances.reads == 1
