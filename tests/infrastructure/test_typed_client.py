"""The client is typed for those who install it (PEP 561): the wheel `pip install .` builds ships
`py.typed` for the client and the service package it re-exports, and `mypy --strict` passes on a
producer's script that imports it from the installed wheel, not from this checkout."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PRODUCER = """\
from datetime import UTC, datetime, timedelta

from capacity_launcher_client import (
    InvalidLaunchRequest,
    LaunchClient,
    LaunchRequest,
    RequestStatus,
)


def run(stack: str) -> list[str]:
    client = LaunchClient.connect(stack)
    request = LaunchRequest(request_id="run-1", node_pool="gpu", count=2)
    try:
        record = client.submit_and_wait(
            request, deadline=datetime.now(UTC) + timedelta(minutes=5)
        )
    except InvalidLaunchRequest as refused:
        return [error.field for error in refused.errors]
    if record.status is RequestStatus.FULFILLED:
        return [instance.instance_id for instance in record.instances]
    return []
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Built from a copy of what setuptools reads: a build in the checkout would leave build/
    # behind, and a stale build/lib would ship files the tree no longer has.
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(REPO / "layers" / "core" / "capacity_launcher",
                    source / "layers" / "core" / "capacity_launcher", ignore=skip)  # fmt: skip
    shutil.copytree(REPO / "local", source / "local", ignore=skip)
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(out), str(source)],
        check=True, capture_output=True,
    )  # fmt: skip
    (built,) = out.glob("*.whl")
    return built


def test_the_wheel_ships_py_typed_for_the_client_and_the_service(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())

    assert {"capacity_launcher_client/py.typed", "capacity_launcher/py.typed"} <= names


def test_mypy_strict_passes_on_a_producer_script_using_the_installed_client(
    wheel: Path, tmp_path: Path
) -> None:
    # Given an environment where the client is the installed wheel (its dependencies: ours)
    environment = tmp_path / "env"
    venv.create(environment, with_pip=False)
    python = environment / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    zipfile.ZipFile(wheel).extractall(purelib)
    ours = sysconfig.get_paths()["purelib"]
    (Path(purelib) / "dependencies.pth").write_text(ours + "\n", encoding="utf-8")
    script = tmp_path / "producer.py"
    script.write_text(PRODUCER, encoding="utf-8")

    # When mypy --strict checks the script against that environment
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental",
         "--python-executable", str(python), str(script)],
        capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip

    # Then it passes
    assert checked.returncode == 0, checked.stdout + checked.stderr
