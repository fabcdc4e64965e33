"""The sync's `QuotaUsageOfNominal`: each quota's use against its nominal quota, by quota,
NodePool and resource, emitted each minute with the status it stores."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from capacity_launcher.domain.apis.quotas import parse_quota
from capacity_launcher.domain.quantities import Resources
from capacity_launcher.service.quota_metrics import QUOTA_USAGE_OF_NOMINAL, usage_of_nominal
from capacity_launcher.service.quota_sync import QuotaSync
from capacity_launcher.service.reclaim_enforcement import ReclaimReport
from local_cloud.documents import capacity_quota

STATUS = {
    "capacity": [
        {"name": "general", "resources": [
            {"name": "instances", "total": "4"}, {"name": "memory", "total": "64Gi"},
            {"name": "cpu", "total": "0"},
        ]}
    ],
    "usage": [
        {"name": "general", "resources": [
            {"name": "instances", "total": "6"}, {"name": "memory", "total": "16Gi"},
            {"name": "cpu", "total": "2"},
        ]}
    ],
}  # fmt: skip


def test_usage_is_a_ratio_of_nominal_in_the_resources_units() -> None:
    # Memory is compared in MiB, not as text; a resource with no nominal quota has no ratio
    assert sorted(usage_of_nominal(STATUS)) == [
        ("general", "instances", 1.5),
        ("general", "memory", 0.25),
    ]


class _Usage:
    """Quota usage no recount can read twice the same (contended): every recount is None. (Its
    readings are not what the live range says, so a recount reads again before it writes.)"""

    def __init__(self) -> None:
        self._version = 0

    def quota_reading(self, pk: str, pool: str) -> tuple[int, dict[Any, Any]]:
        self._version += 1
        return self._version, {("team-z", "general"): Resources(instances=self._version)}

    def counted(self, pool: str) -> list[Any]:
        return []

    def replace_quota_usage(self, pk: str, usage: Any, version: Any) -> bool:
        return False

    def quota_usage(self, pk: str, pool: str) -> dict[tuple[str, str], Resources]:
        return {("team-a", "general"): Resources(instances=3)}


class _Statuses:
    saved: dict[str, Any]

    def read(self) -> dict[str, Any]:
        return {}

    def forget(self, names: Any) -> None:
        pass

    def save(self, statuses: dict[str, Any], observed_at: str) -> None:
        self.saved = statuses


class _Enforcement:
    def run(self, quotas: Any) -> ReclaimReport:
        return ReclaimReport()


def test_the_sync_emits_each_quotas_usage_of_nominal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "capacity-launcher")
    # Given team-a with a nominal quota of 4 instances in pool general, using 3
    quota = parse_quota(capacity_quota("team-a", "general", {"instances": "4"}))
    sync = QuotaSync(
        quotas=lambda: [quota],
        pools=lambda: ["general"],
        quota_usage=_Usage(),  # type: ignore[arg-type]
        statuses=_Statuses(),  # type: ignore[arg-type]
        enforcement=_Enforcement(),  # type: ignore[arg-type]
        now=lambda: datetime(2026, 11, 26, tzinfo=UTC),
    )
    # When the sync runs
    sync.run()
    # Then it emits 0.75 for team-a, general, instances
    documents = [json.loads(line) for line in capsys.readouterr().out.splitlines()
                 if QUOTA_USAGE_OF_NOMINAL in line]  # fmt: skip
    assert [
        (d["quota"], d["nodePool"], d["resource"], d[QUOTA_USAGE_OF_NOMINAL]) for d in documents
    ] == [("team-a", "general", "instances", [0.75])]
    dimensions = documents[0]["_aws"]["CloudWatchMetrics"][0]["Dimensions"][0]
    assert set(dimensions) == {"quota", "nodePool", "resource", "service"}
