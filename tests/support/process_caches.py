"""What every cloud a test builds would otherwise load again: set up once per test process.

- moto's image catalogue. A fresh EC2 backend (each `mock_aws()`, each moto reset) builds every
  AMI moto knows for its region: 1,301 in us-east-1, 1,227 of them ECS-optimized images no test
  uses, and `DescribeImages` serializes them all on every call. `use_the_images_tests_use()`
  points moto at a catalogue of the images the suites do use: moto's own list (the Linux and
  Windows images tests name, `tests.support.cloud.an_image`'s first Linux one) and the region's
  latest images, which moto's SSM parameters name (`/aws/service/ami-amazon-linux-latest/...`).
  It is built from moto's installed resources, so it follows moto's version.
- botocore's data loader. Each test's cloud starts new sessions (`aws.client.cache_clear()`: a
  new container's clients), and each new session re-reads botocore's service models and
  endpoint rules from disk. `shared_botocore_loader()` gives every session one loader, so each
  file is read once per process. Clients, their handlers and their retry state stay per session.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import json
import os
import sys
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import botocore.loaders
import botocore.session

MOTO_AMIS_PATH = "MOTO_AMIS_PATH"
# The tests' region: its latest images are the ones moto's SSM parameters name.
IMAGES_REGION = "us-east-1"


def use_the_images_tests_use(region: str = IMAGES_REGION) -> str | None:
    """Set MOTO_AMIS_PATH (for this process and the processes it starts) to a catalogue of moto's
    own images and `region`'s latest ones; returns its path. Does nothing (None) when the variable
    is already set, or when moto has already read its catalogue (too late to change it)."""
    if MOTO_AMIS_PATH in os.environ or "moto.ec2.models.amis" in sys.modules:
        return None
    spec = importlib.util.find_spec("moto")  # locates moto without importing it
    if spec is None or not spec.submodule_search_locations:
        return None
    resources = Path(next(iter(spec.submodule_search_locations))) / "ec2" / "resources"
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


def _read(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    loaded: list[dict[str, Any]] = json.loads(gzip.decompress(path.read_bytes()))
    return loaded


class _SearchPaths(list[str]):
    """A shared loader's search paths: boto3 adds its own data folder once per session."""

    def append(self, path: str) -> None:
        if path not in self:
            super().append(path)

    def extend(self, paths: Iterable[str]) -> None:
        for path in paths:
            self.append(path)


@contextmanager
def shared_botocore_loader() -> Iterator[None]:
    """While open, every new botocore session (and so boto3 session) uses one data loader per
    data path, so the JSON models are parsed once for all of them."""
    loaders: dict[str | None, botocore.loaders.Loader] = {}
    original = botocore.session.create_loader

    def create_loader(search_path_string: str | None = None) -> botocore.loaders.Loader:
        loader = loaders.get(search_path_string)
        if loader is None:
            loader = original(search_path_string)
            loader._search_paths = _SearchPaths(loader.search_paths)
            loaders[search_path_string] = loader
        return loader

    botocore.session.create_loader = create_loader  # type: ignore[assignment]
    try:
        yield
    finally:
        botocore.session.create_loader = original
