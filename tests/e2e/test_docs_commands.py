"""Every `capacity-launcher ...` line of the ```sh blocks in the documents below works as
written: run in order, by the installed entry point, from the project folder, against the
local cloud (`local up` and `demo` have their own tests; `--stack-name` lines need AWS)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import REPO, E2eCloud, run_cli

# README.md joins when its blocks follow the same rule (syntax summaries in ```console).
DOCUMENTS = ("docs/cli.md", "README.md")
_SH_BLOCK = re.compile(r"^```sh\n(.*?)^```", re.MULTILINE | re.DOTALL)
_RUN_ELSEWHERE = ("capacity-launcher local up", "capacity-launcher demo")
# Commands for a deployed stack need an AWS account; the same commands run here without it.
_NEEDS_AWS = "--stack-name"


def documented_commands(path: Path) -> list[str]:
    if not path.is_file():
        return []
    lines = [
        line.split(" #", 1)[0].strip()
        for block in _SH_BLOCK.findall(path.read_text(encoding="utf-8"))
        for line in block.splitlines()
    ]
    return [
        line
        for line in lines
        if line.startswith("capacity-launcher ")
        and not line.startswith(_RUN_ELSEWHERE)
        and _NEEDS_AWS not in line
    ]


def entry_point() -> list[str]:
    script = Path(sys.executable).with_name("capacity-launcher")
    return (
        [str(script)] if script.exists() else [sys.executable, "-m", "capacity_launcher_cli.main"]
    )


@pytest.fixture
def examples_restored(e2e_cloud: E2eCloud) -> Iterator[None]:
    """The walkthrough ends by deleting an example; later tests need it back."""
    yield
    assert run_cli("apply", "-f", str(REPO / "examples")).code == 0


def test_the_cli_guide_has_a_walkthrough_to_run() -> None:
    commands = documented_commands(REPO / "docs" / "cli.md")

    assert len(commands) >= 10
    assert any(c.startswith("capacity-launcher submit") for c in commands)
    assert any(c.startswith("capacity-launcher invoke") for c in commands)


def test_every_documented_command_works_as_written(
    e2e_cloud: E2eCloud, examples_restored: None
) -> None:
    commands = [c for document in DOCUMENTS for c in documented_commands(REPO / document)]

    for command in commands:
        argv = shlex.split(command)[1:]
        done = subprocess.run(
            [*entry_point(), *argv],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
