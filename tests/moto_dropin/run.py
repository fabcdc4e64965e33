"""moto's own tests for the services moto_capacity extends, run with the extension installed.

The extension must stay a drop-in for moto: the test files moto ships for EC2 (fleets,
instances, launch templates, spot, instance types, tags, images), DynamoDB, SQS, EventBridge and
Resource Groups pass with it, except the tests `local/moto_capacity/README.md` lists under
"moto's own tests, with the extension", each with the AWS page that documents the behaviour the
extension emulates. This runner deselects exactly those, and no others.

moto's tests are not in its wheel and none of them is kept in this repository: they are exported
into a temporary directory for each run, from the first of

- `MOTO_SOURCE=DIR`: a moto checkout or an unpacked sdist (its `tests/`);
- `MOTO_SOURCE=FILE.tar.gz`: a moto sdist;
- `MOTO_SOURCE=GIT_DIR`: a clone of moto, bare or not, at the tag of the installed version;
- otherwise the sdist of the installed moto version, fetched with `pip download` and kept in
  `.moto-dropin/` for the next run.

The run is moto's own configuration plus the extension: moto's pytest settings, Docker tests
skipped as moto's CI does without Docker (`TESTS_SKIP_REQUIRES_DOCKER`), freezegun (the one test
dependency moto's runtime lacks) installed into `.moto-dropin/deps`, and moto's image catalogue
loaded, which is moto's default: moto's `tests/__init__.py` turns it off for speed, yet its tests
launch the catalogue's images (the sample ids it defines come from the catalogue, and the public
SSM parameters name catalogue images too). moto alone launches any image id; EC2, and so the
extension, refuses one that does not exist.

    python -m tests.moto_dropin [--bare] [--keep] [-- PYTEST ARGS]

`--bare` runs the same tests without the extension (to tell moto's own failures from the
extension's), `--keep` leaves the exported tree in place, and anything after `--` goes to pytest
(`-k`, `-x`, a narrower path).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".moto-dropin"
README = REPO / "local" / "moto_capacity" / "README.md"
SECTION = "## moto's own tests, with the extension"
FREEZEGUN = "freezegun==1.5.5"
EC2_FILES = (
    "test_fleets.py",
    "test_instances.py",
    "test_launch_templates.py",
    "test_spot_instances.py",
    "test_spot_fleet.py",
    "test_instance_types.py",
    "test_instance_type_offerings.py",
    "test_tags.py",
    "test_amis.py",
)
SERVICE_DIRS = ("test_dynamodb", "test_sqs", "test_events", "test_resourcegroups")
TEST_PATHS = (
    *(f"tests/test_ec2/{name}" for name in EC2_FILES),
    *(f"tests/{d}" for d in SERVICE_DIRS),
)
HARNESS = '''"""Written by tests/moto_dropin/run.py for moto's own tests."""

import pytest

{install}
# The tests local/moto_capacity/README.md lists, by exact node id (or a parametrized test whole):
# pytest's --deselect matches prefixes, and would take test_x_response along with test_x.
DESELECTED = {deselected!r}


def pytest_collection_modifyitems(config, items):
    dropped = [i for i in items if i.nodeid in DESELECTED or i.nodeid.split("[")[0] in DESELECTED]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [i for i in items if i not in dropped]


@pytest.fixture(autouse=True)
def _moto_image_catalogue(monkeypatch):
    # moto's default, which moto's tests/__init__.py turns off for speed: the catalogue images
    # the tests launch (its EXAMPLE_AMI_* ids, and those the public SSM parameters name) exist,
    # as EC2 requires of an image it launches.
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "true")
'''
INSTALL_EXTENSION = "import moto_capacity\n\nmoto_capacity.install()\n"


def _pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "--quiet", *args], check=True)


def _sdist(version: str) -> Path:
    """The sdist of moto `version`, from PyPI once, then from the cache."""
    found = CACHE / f"moto-{version}.tar.gz"
    if not found.exists():
        CACHE.mkdir(exist_ok=True)
        _pip("download", "--no-deps", "--no-binary", ":all:", f"moto=={version}", "-d", str(CACHE))
    return found


def _from_tarball(tarball: Path, into: Path) -> None:
    with tarfile.open(tarball) as archive:
        for member in archive.getmembers():
            _, _, inner = member.name.partition("/")
            if inner == "pyproject.toml" or inner.startswith("tests/"):
                member.name = inner
                archive.extract(member, into, filter="data")


def _from_git(git_dir: Path, version: str, into: Path) -> None:
    command = ["git", "--git-dir", str(git_dir), "archive", "--format=tar", version]
    found = subprocess.run([*command, "tests", "pyproject.toml"], capture_output=True, check=False)
    if found.returncode != 0:
        raise SystemExit(f"{git_dir} has no moto {version} (git archive: {found.stderr.decode()})")
    archive = found.stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")


def export_tests(version: str, into: Path) -> str:
    """moto's tests/ and pytest settings into `into`; says where they came from."""
    source = os.environ.get("MOTO_SOURCE")
    if not source:
        tarball = _sdist(version)
        _from_tarball(tarball, into)
        return f"{tarball.name} (PyPI)"
    path = Path(source)
    if path.is_file():
        _from_tarball(path, into)
    elif (path / "HEAD").is_file() or (path / ".git").exists():
        _from_git(path / ".git" if (path / ".git").exists() else path, version, into)
    elif (path / "tests").is_dir():
        shutil.copytree(path / "tests", into / "tests")
        shutil.copy(path / "pyproject.toml", into / "pyproject.toml")
    else:
        raise SystemExit(f"MOTO_SOURCE={source}: neither a moto sdist, a clone nor a checkout")
    return source


def moto_test_dependencies() -> Path:
    """freezegun, the one dependency of moto's tests its runtime does not bring."""
    target = CACHE / "deps"
    if not (target / "freezegun").is_dir():
        _pip("install", "--no-deps", "--target", str(target), FREEZEGUN)
    return target


def deselected() -> list[str]:
    """The node ids README lists under SECTION: each row starts with one in backticks."""
    text = README.read_text()
    if SECTION not in text:
        raise SystemExit(f"{README} has no section {SECTION!r}")
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `(tests/[^`]+::[^`]+)` \|", section, re.M)


def _check_listed(tree: Path, node_ids: list[str]) -> None:
    """A listed test that moto no longer has is a stale entry: fail, do not skip silently."""
    for node_id in node_ids:
        path, _, name = node_id.partition("::")
        function = name.split("[", 1)[0].split("::")[-1]
        file = tree / path
        if not file.is_file() or not re.search(rf"def {re.escape(function)}\(", file.read_text()):
            raise SystemExit(f"README lists {node_id}, which this moto does not have")


def _environment(deps: Path, bare: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "MOTO_", "TEST_"))}
    paths = [str(deps)] if bare else [str(REPO / "local"), str(deps)]
    env.update(
        PYTHONPATH=os.pathsep.join(paths),
        AWS_DEFAULT_REGION="us-east-1",
        TESTS_SKIP_REQUIRES_DOCKER="true",
    )
    return env


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.moto_dropin", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--bare", action="store_true", help="without the extension")
    parser.add_argument("--keep", action="store_true", help="keep the exported tests")
    parser.add_argument("pytest_args", nargs="*", help="after --: passed to pytest")
    args = parser.parse_args(argv)
    version = importlib.metadata.version("moto")
    tree = Path(tempfile.mkdtemp(prefix=f"moto-{version}-tests-"))
    try:
        origin = export_tests(version, tree)
        node_ids = deselected()
        _check_listed(tree, node_ids)
        install = "" if args.bare else INSTALL_EXTENSION
        harness = HARNESS.format(install=install, deselected=sorted(node_ids))
        (tree / "conftest.py").write_text(harness)
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--color=no"]
        narrowed = any(arg.startswith("tests/") for arg in args.pytest_args)
        command += ["-rfE", *([] if narrowed else TEST_PATHS), *args.pytest_args]
        extension = "without" if args.bare else "with"
        print(
            f"moto {version} tests from {origin}, {extension} moto_capacity, "
            f"{len(node_ids)} deselected",
            flush=True,
        )
        started = time.monotonic()
        code = subprocess.run(
            command, cwd=tree, env=_environment(moto_test_dependencies(), args.bare)
        ).returncode
        print(f"moto drop-in: exit {code} after {time.monotonic() - started:.0f} s", flush=True)
        return code
    finally:
        if args.keep:
            print(f"kept {tree}")
        else:
            shutil.rmtree(tree, ignore_errors=True)
