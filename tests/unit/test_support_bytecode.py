"""Where the environment forbids bytecode, the test processes cache it outside the project
(tests/support/bytecode.py); otherwise they leave Python's own choice alone."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

from tests.support.bytecode import FOLDER_PREFIX, cache_bytecode


@pytest.fixture
def temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The system's temporary directory, as the tests see it."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def test_bytecode_forbidden_is_cached_in_a_private_folder_for_the_processes_started(
    temporary: Path,
) -> None:
    environment = {"PYTHONDONTWRITEBYTECODE": "1", "PATH": "/bin"}
    folder = cache_bytecode(environment)
    assert folder is not None
    assert folder.parent == temporary
    assert folder.name.startswith(FOLDER_PREFIX)
    assert folder.stat().st_mode & 0o777 == 0o700
    assert environment == {"PYTHONPYCACHEPREFIX": str(folder), "PATH": "/bin"}
    # and again, the same folder
    assert cache_bytecode({"PYTHONDONTWRITEBYTECODE": "1"}) == folder


@pytest.mark.parametrize(
    "environment",
    [
        {},  # Python writes its bytecode beside the sources already
        {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": "/elsewhere"},  # the user's
    ],
)
def test_an_environment_that_chose_is_left_alone(
    temporary: Path, environment: dict[str, str]
) -> None:
    before = dict(environment)
    assert cache_bytecode(environment) is None
    assert environment == before
    assert list(temporary.iterdir()) == []


def test_a_folder_that_is_not_a_private_folder_of_this_user_is_not_used(temporary: Path) -> None:
    # Given the folder's name taken by something else (here a link to another folder)
    elsewhere = temporary / "elsewhere"
    elsewhere.mkdir()
    user_folder = cache_bytecode({"PYTHONDONTWRITEBYTECODE": "1"})
    assert user_folder is not None
    user_folder.rmdir()
    user_folder.symlink_to(elsewhere)
    # Then bytecode stays forbidden
    environment = {"PYTHONDONTWRITEBYTECODE": "1"}
    assert cache_bytecode(environment) is None
    assert environment == {"PYTHONDONTWRITEBYTECODE": "1"}


def test_only_the_process_environment_changes_this_process(temporary: Path) -> None:
    # A mapping other than os.environ changes nothing of this interpreter's own settings
    settings = (sys.pycache_prefix, sys.dont_write_bytecode, dict(os.environ))
    assert cache_bytecode({"PYTHONDONTWRITEBYTECODE": "1"}) is not None
    assert (sys.pycache_prefix, sys.dont_write_bytecode, dict(os.environ)) == settings
