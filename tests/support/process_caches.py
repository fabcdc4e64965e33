"""What every cloud a test builds would otherwise load again: set up once per test process.

- moto's image catalogue. A fresh EC2 backend (each `mock_aws()`, each moto reset) builds every
  AMI moto knows for its region: 1,301 in us-east-1, 1,227 of them ECS-optimized images no test
  uses, and `DescribeImages` serializes them all on every call. `use_the_images_tests_use()`
  points moto at a catalogue of the images the suites do use: moto's own list (the Linux and
  Windows images tests name, `tests.support.cloud.an_image`'s first Linux one) and the region's
  latest images, which moto's SSM parameters name (`/aws/service/ami-amazon-linux-latest/...`).
  It is built from moto's installed resources, so it follows moto's version (its own module,
  tests/support/moto_images.py, which imports neither moto nor botocore).
- botocore's data loader. Each test's cloud starts new sessions (`aws.client.cache_clear()`: a
  new container's clients), and each new session re-reads botocore's service models and
  endpoint rules from disk. `shared_botocore_loader()` gives every session one loader, so each
  file is read once per process. Clients, their handlers and their retry state stay per session.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import botocore.loaders
import botocore.session

from tests.support.moto_images import MOTO_AMIS_PATH, use_the_images_tests_use

__all__ = ["MOTO_AMIS_PATH", "shared_botocore_loader", "use_the_images_tests_use"]


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
