"""moto's image catalogue, cut to the images the suites use (tests/support/process_caches.py says
why). Its own module, importing neither moto nor botocore: tests/conftest.py calls it before any
test module imports moto, and a unit test's session pays nothing for it."""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import json
import os
import sys
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

MOTO_AMIS_PATH = "MOTO_AMIS_PATH"
# The tests' region: its latest images are the ones moto's SSM parameters name.
IMAGES_REGION = "us-east-1"


def use_the_images_tests_use(region: str = IMAGES_REGION) -> str | None:
    """Set MOTO_AMIS_PATH (for this process and the processes it starts) to a catalogue of moto's
    own images and `region`'s latest ones; returns its path. Does nothing (None) when the variable
    is already set, or when moto has already read its catalogue (too late to change it)."""
    if MOTO_AMIS_PATH in os.environ or "moto.ec2.models.amis" in sys.modules:
        return None
    resources = _moto_resources()
    if not resources.exists():
        return None
    images = [
        *_read(resources / "amis.json.gz"),
        *_read(resources / "latest_amis" / f"{region}.json.gz"),
    ]
    text = json.dumps(images, sort_keys=True)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / f"capacity-launcher-test-amis-{digest}.json"
    if not path.exists():
        # Written whole then renamed: parallel test processes may race to write the same file.
        partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, path)
    os.environ[MOTO_AMIS_PATH] = str(path)
    return str(path)


def first_linux_image() -> str | None:
    """The id of the first image that is not Windows in the catalogue moto loads (MOTO_AMIS_PATH,
    else moto's own list): what listing the amazon-owned images and taking the first Linux one
    answers, in moto's order (its catalogue's), without asking moto for them all. None when there
    is none, or moto is not installed."""
    path = os.environ.get(MOTO_AMIS_PATH)
    return _first_linux_image(path or str(_moto_resources() / "amis.json.gz"))


@cache
def _first_linux_image(path: str) -> str | None:
    catalogue = Path(path)
    images = _read(catalogue) if catalogue.suffix == ".gz" else _read_json(catalogue)
    return next((str(i["ami_id"]) for i in images if i.get("platform") != "windows"), None)


def _moto_resources() -> Path:
    spec = importlib.util.find_spec("moto")  # locates moto without importing it
    if spec is None or not spec.submodule_search_locations:
        return Path("/nonexistent")
    return Path(next(iter(spec.submodule_search_locations))) / "ec2" / "resources"


def _read_json(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    loaded: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


def _read(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    loaded: list[dict[str, Any]] = json.loads(gzip.decompress(path.read_bytes()))
    return loaded
