"""Completion of what is stored (issue 40; docs/cli.md, "kubectl habits"): bash (and zsh, which
runs the same function) and fish complete the names of a TYPE after `get`, `describe` and
`delete`, and requests' ids after `status`, by asking the local cloud as the user types."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from capacity_launcher_cli.completion import script
from capacity_launcher_cli.main import parser
from tests.e2e.conftest import E2E_POOL, E2eCloud, request_id, run_cli


def _environment() -> dict[str, str]:
    """This process's environment (the local cloud's file), with the CLI's entry point on PATH."""
    bin_folder = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": f"{bin_folder}{os.pathsep}{os.environ.get('PATH', '')}"}


def _bash(*words: str) -> list[str]:
    program = (
        f"{script(parser(), 'bash')}\n"
        f"COMP_WORDS=({' '.join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}\n"
        '_capacity_launcher; printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    done = subprocess.run(
        ["bash", "-c", program], capture_output=True, text=True, check=True, env=_environment()
    )
    return done.stdout.split()


def _fish(line: str) -> list[str]:
    program = f"{script(parser(), 'fish')}\ncomplete -C {line!r}\n"
    done = subprocess.run(
        ["fish", "--no-config", "-c", program],
        capture_output=True,
        text=True,
        check=True,
        env=_environment(),
    )
    return [found.split("\t")[0] for found in done.stdout.splitlines()]


@pytest.fixture(scope="module")
def a_request(e2e_cloud: E2eCloud) -> str:
    name = request_id("complete")
    submitted = run_cli(
        "submit", "--request-id", name, "--node-pool", E2E_POOL, "--count", "1", "--wait"
    )
    assert submitted.code == 0, submitted.err
    return name


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_bash_completes_the_names_stored_after_a_type(a_request: str) -> None:
    assert {E2E_POOL, "general"} <= set(_bash("capacity-launcher", "get", "np", ""))
    assert _bash("capacity-launcher", "describe", "NodeClass", "gen") == ["general"]
    assert _bash("capacity-launcher", "delete", "np", "e2") == [E2E_POOL]
    assert a_request in _bash("capacity-launcher", "status", "")
    assert a_request in _bash("capacity-launcher", "get", "requests", "")
    # flags are still flags, and a TYPE is still completed from the parser
    assert _bash("capacity-launcher", "get", "np", "--ignore") == ["--ignore-not-found"]
    assert "nodepools" in _bash("capacity-launcher", "get", "")


@pytest.mark.skipif(shutil.which("fish") is None, reason="no fish")
def test_fish_completes_commands_flags_choices_and_the_names_stored(a_request: str) -> None:
    assert {"get", "apply", "diff", "explain"} <= set(_fish("capacity-launcher "))
    assert {"nodepools", "np", "requests"} <= set(_fish("capacity-launcher get "))
    assert set(_fish("capacity-launcher apply --dry-run ")) == {"none", "client", "server"}
    assert set(_fish("capacity-launcher completion ")) == {"bash", "zsh", "fish"}
    assert {"--output", "--ignore-not-found"} <= set(_fish("capacity-launcher get np --"))
    assert {E2E_POOL, "general"} <= set(_fish("capacity-launcher get np "))
    assert "general" in _fish("capacity-launcher describe nc ")
    assert a_request in _fish("capacity-launcher status ")
    assert "up" in _fish("capacity-launcher local ")
