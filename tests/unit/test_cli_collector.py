"""The installed command (`main()` on the process's own command line) keeps the cyclic collector
off while its command's modules load, then freezes what they made and runs the command with the
collector on; `main(argv)` called from other code leaves the collector as it found it."""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from capacity_launcher_cli import deployment as cli_deployment
from capacity_launcher_cli import main as cli_main


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """What the collector was like while `get nodepools` ran (the command and the deployment
    replaced: nothing is read)."""
    found: dict[str, Any] = {}

    def command(args: argparse.Namespace, deployment: object) -> int:
        found["enabled"] = gc.isenabled()
        found["frozen"] = gc.get_freeze_count()
        return 0

    def load(module: str, name: str) -> Any:
        found["enabled_while_loading"] = gc.isenabled()
        return command

    monkeypatch.setattr(cli_main, "_load", load)
    # A stack's names (not a local cloud's: botocore is imported as for AWS, CRT and all).
    found_deployment = cli_deployment.Deployment(
        "us-east-1", "bus", "queue", "dlq", "state", "ice", "idem"
    )
    monkeypatch.setattr(cli_deployment, "resolve", lambda *names: found_deployment)
    monkeypatch.setattr(sys, "argv", ["capacity-launcher", "get", "nodepools"])
    found["frozen_before"] = gc.get_freeze_count()
    try:
        yield found
    finally:  # what main froze stays frozen: this session's heap, as tests/conftest.py froze it
        gc.enable()


def test_the_installed_command_loads_without_the_collector_and_runs_with_it(
    seen: dict[str, Any],
) -> None:
    assert cli_main.main() == 0

    assert seen["enabled_while_loading"] is False
    assert seen["enabled"] is True
    assert seen["frozen"] > seen["frozen_before"]
    assert gc.isenabled()


def test_main_called_with_its_arguments_leaves_the_collector_alone(seen: dict[str, Any]) -> None:
    assert cli_main.main(["get", "nodepools"]) == 0

    assert seen["enabled_while_loading"] is True
    assert seen["enabled"] is True
    # nothing more frozen (a frozen object freed meanwhile lowers the count: not a freeze)
    assert seen["frozen"] <= seen["frozen_before"]


def test_the_installed_command_gives_the_collector_back_however_it_ends(
    seen: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # commands that ask no deployment, so load no command module
    for argv in (["explain", "nodepool"], ["completion", "bash"]):
        monkeypatch.setattr(sys, "argv", ["capacity-launcher", *argv])
        cli_main.main()

        assert gc.isenabled(), argv
