"""Issue 14: the layer ships compiled bytecode, so a cold start never compiles it (/opt is
read-only: Python cannot cache what it compiles there). Issue 35: the layer ships its own pinned
boto3 and botocore, the whole dependency closure pinned at the dev lock's versions, and stays
well within Lambda's size limit."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
LAYER_REQUIREMENTS = ROOT / "layers" / "core" / "requirements.txt"
DEV_LOCK = ROOT / "requirements-dev.txt"
# The flags word of a hash-based .pyc that Python never checks against its source (PEP 552).
UNCHECKED_HASH = 0b01
# https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html: the function and all
# its layers, unzipped, at most 250 MB. The benchmark's own goal for the layer is 30 MB.
LAMBDA_UNZIPPED_LIMIT = 250 * 1024 * 1024
LAYER_GOAL = 30 * 1024 * 1024
# The Lambda platform the layer is built for (pip's environment markers).
LAMBDA_MARKERS = {"python_version": "3.13", "sys_platform": "linux", "platform_system": "Linux",
                  "platform_machine": "aarch64", "implementation_name": "cpython",
                  "platform_python_implementation": "CPython", "extra": ""}  # fmt: skip


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins(path: Path) -> dict[str, str]:
    """`name==version` lines of a requirements file, by normalized name."""
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            pins[_key(name)] = version.strip()
    return pins


def test_the_layer_pins_its_whole_closure_at_the_dev_locks_versions() -> None:
    layer, lock = _pins(LAYER_REQUIREMENTS), _pins(DEV_LOCK)
    # Every line of the layer's requirements is an exact pin (nothing resolves at build time)
    lines = [ln.strip() for ln in LAYER_REQUIREMENTS.read_text().splitlines()]
    assert [ln for ln in lines if ln and not ln.startswith("#") and "==" not in ln] == []
    # and boto3 and botocore are shipped, not taken from the runtime
    assert {"boto3", "botocore"} <= layer.keys()
    # and each pin is the dev lock's version: what the tests ran is what the layer ships
    assert {n: (v, lock.get(n)) for n, v in layer.items() if lock.get(n) != v} == {}
    # and the closure is whole: what each pinned distribution requires on Lambda is pinned too
    missing = {}
    for name in layer:
        for text in importlib.metadata.requires(name) or []:
            requirement = Requirement(text)
            if requirement.marker and not requirement.marker.evaluate(LAMBDA_MARKERS):
                continue
            if _key(requirement.name) not in layer:
                missing[requirement.name] = name
            elif layer[_key(requirement.name)] not in requirement.specifier:
                missing[requirement.name] = f"{name} wants {requirement.specifier}"
    assert missing == {}


@pytest.fixture(scope="module")
def layer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """sam build's recipe for the layer, built for this machine's platform."""
    artifacts = tmp_path_factory.mktemp("layer")
    make = [
        "make",
        "-s",
        "-f",
        str(ROOT / "layers" / "core" / "Makefile"),
        "build-CoreLayer",
        f"ARTIFACTS_DIR={artifacts}",
        f"PYTHON={sys.executable}",
        "PLATFORM=manylinux2014_x86_64",
    ]
    subprocess.run(make, check=True, capture_output=True, timeout=300)
    return artifacts / "python"


def test_the_layer_recipe_ships_bytecode_python_uses_without_its_sources_mtime(
    layer: Path,
) -> None:
    # Then every module of the package and its dependencies has its 3.13 bytecode beside it
    sources = [p for p in layer.rglob("*.py") if "__pycache__" not in p.parts]
    assert any(p.parts[-2] == "capacity_launcher" for p in sources)
    missing = [p for p in sources if not _bytecode_beside(p).exists()]
    assert missing == []
    # and the bytecode is the unchecked-hash kind, valid whatever mtime the zip gives a source
    pyc = _bytecode_beside(layer / "capacity_launcher" / "settings.py")
    header = pyc.read_bytes()[:8]
    assert header[:4] == importlib.util.MAGIC_NUMBER
    assert int.from_bytes(header[4:8], "little") == UNCHECKED_HASH
    # and the handlers' package imports from it without writing anything (its own bytecode, as
    # on Lambda: not a cache folder's the tests' processes may use, tests/support/bytecode.py)
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPYCACHEPREFIX"}
    environment |= {"PYTHONPATH": str(layer), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import capacity_launcher.domain.apis.config as c; print(c.__file__)",
        ],
        env=environment,
        check=True,
        capture_output=True,
        text=True,
    )
    assert done.stdout.strip() == str(layer / "capacity_launcher" / "domain" / "apis" / "config.py")


def _bytecode_beside(source: Path) -> Path:
    """Where Python reads `source`'s bytecode in a folder's `__pycache__` (what the layer ships),
    whatever cache folder this process writes to (sys.pycache_prefix)."""
    cached = Path(importlib.util.cache_from_source(str(source)))
    return source.parent / "__pycache__" / cached.name


def _services_named() -> set[str]:
    """Every AWS service the layer's code makes a client for (`client("x")`, `clients("x")`)."""
    named: set[str] = set()
    for source in (ROOT / "layers" / "core" / "capacity_launcher").rglob("*.py"):
        named |= set(re.findall(r"clients?\(\"([a-z0-9-]+)\"\)", source.read_text()))
    return named


def test_the_layer_ships_its_pinned_sdk_with_a_model_for_every_service_it_calls(
    layer: Path,
) -> None:
    # Given the built layer, and nothing else but the standard library (`-S`: as the layer's
    # /opt/python comes before the runtime's own boto3 on Lambda's path, it is the one imported)
    services = sorted(_services_named())
    assert {"dynamodb", "ec2", "events"} <= set(services)
    probe = (
        "import json, sys, boto3, botocore\n"
        "for s in sys.argv[1:]: boto3.client(s, region_name='us-east-1')\n"
        "fleet = boto3.client('ec2', region_name='us-east-1').meta.service_model"
        ".operation_model('CreateFleet').input_shape.members\n"
        "print(json.dumps([botocore.__file__, botocore.__version__, boto3.__version__,"
        " 'ReservedCapacityOptions' in fleet]))"
    )
    environment = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(layer),
                   "PYTHONDONTWRITEBYTECODE": "1", "AWS_ACCESS_KEY_ID": "testing",
                   "AWS_SECRET_ACCESS_KEY": "testing"}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-S", "-c", probe, *services],
        env=environment,
        check=True,
        capture_output=True,
        text=True,
    )
    found, version, boto3_version, interruptible = json.loads(done.stdout)
    # Then botocore is the layer's own, at its pin, and boto3 too
    pins = _pins(LAYER_REQUIREMENTS)
    assert found.startswith(str(layer))
    assert (version, boto3_version) == (pins["botocore"], pins["boto3"])
    # and every service the code names has its model (the layer keeps no other)
    kept = {p.name for p in (layer / "botocore" / "data").iterdir() if p.is_dir()}
    assert kept == set(services)
    # and its CreateFleet knows ReservedCapacityOptions (interruptible reservations)
    assert interruptible is True


def test_the_layer_stays_well_within_lambdas_unzipped_limit(layer: Path) -> None:
    size = sum(f.stat().st_size for f in layer.rglob("*") if f.is_file())
    assert size <= LAYER_GOAL < LAMBDA_UNZIPPED_LIMIT
