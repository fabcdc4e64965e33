"""`get quotas`: each quota's status computed from what the launcher recorded (read-only)."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import Any

import pytest

from capacity_launcher.adapters import aws
from capacity_launcher.settings import Settings, get_settings
from capacity_launcher_cli.quota_commands import get_quotas
from local_cloud.documents import capacity_quota
from tests.integration.test_launch_into_reservations import setup_pool
from tests.support.cloud import Cloud, launch_request


@dataclass
class _Deployment:
    state_table: str
    limit_lease_seconds: int = 900

    def client(self, service: str) -> Any:
        return aws.client(service)

    def settings(self) -> Settings:
        """The service's (the CLI builds its use cases from them, as it does a deployment's)."""
        return get_settings()


def _quota(name: str, instances: str, **spec: Any) -> dict[str, Any]:
    return capacity_quota(name, "general", {"instances": instances, "memory": "64Gi"}, **spec)


def _listing(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    lines = capsys.readouterr().out.splitlines()  # the service's JSON log lines come first
    start = next(i for i, line in enumerate(lines) if line == "{")  # the List, indented
    listed: list[dict[str, Any]] = json.loads("\n".join(lines[start:]))["items"]
    return listed


def _totals(status: dict[str, Any], part: str) -> dict[str, str]:
    return {r["name"]: r["total"] for f in status[part] for r in f["resources"]}


def test_get_quotas_shows_borrowing_and_use_per_requester_from_running_instances(
    cloud: Cloud, subnets: dict[str, str], image: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given team-a (1 instance of nominal quota, borrowing) running 2 m5.large, team-b 1 of 2
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",))
    cloud.apply(_quota("team-a", "1", allowBorrowing=True), _quota("team-b", "2"))
    cloud.send(
        launch_request("a-1", nodePool="general", count=2, requester="team-a"),
        launch_request("b-1", nodePool="general", requester="team-b"),
        launch_request("x-1", nodePool="general", requester="nobody"),
    )

    # When the quotas are listed as JSON
    args = argparse.Namespace(resource="quotas", output="json", names=[])
    assert get_quotas(args, _Deployment(cloud.names.state_table)) == 0  # type: ignore[arg-type]
    team_a, team_b = _listing(capsys)

    # Then team-a borrows the instance team-b lends, with memory shown in units
    assert _totals(team_a["status"], "usage") == {"instances": "2", "memory": "16Gi"}
    assert _totals(team_a["status"], "borrowed") == {"instances": "1", "memory": "0"}
    assert _totals(team_b["status"], "lent") == {"instances": "1", "memory": "0"}
    assert _totals(team_b["status"], "allocatable") == {"instances": "0", "memory": "56Gi"}
    assert team_a["status"]["associationUsages"] == [
        {"name": "team-a", "usage": [{"name": "general", "resources": [
            {"name": "instances", "total": "2"}, {"name": "memory", "total": "16Gi"}]}]}
    ]  # fmt: skip
    assert [c["status"] for c in team_b["status"]["conditions"]] == ["True", "False"]
