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
- EC2's catalogue answers, parsed. A cold container lists every instance type of the region
  (`DescribeInstanceTypes`: 1,395 types, 5.8 MB of XML that botocore parses in 0.44 s of CPU) and
  the zones' offerings; each test's sync run builds a cold container, and moto answers each
  listing with the same bytes (moto_capacity/ec2/responses/listings.py). `remembered_parses()`
  keeps what botocore parsed of each large query-protocol body (`LARGE_BODY_BYTES` and more) and
  gives every later answer of the same bytes, for the same output shape, a fresh copy of it
  (unpickled: 0.03 s). What botocore parses depends on nothing else (the body, the shape, the
  parser's class and its timestamp and blob parsers, all in the key); the response's status and
  headers are added to each copy by botocore as before.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import botocore.loaders
import botocore.parsers
import botocore.session

from tests.support.moto_images import MOTO_AMIS_PATH, use_the_images_tests_use

__all__ = [
    "LARGE_BODY_BYTES",
    "MOTO_AMIS_PATH",
    "remembered_parses",
    "shared_botocore_loader",
    "use_the_images_tests_use",
]

# Bodies at least this long are remembered parsed: one zone's offerings (178 KB) parse in 13 to
# 27 ms, their copy unpickles in 0.4 ms; a body far smaller is seldom asked again byte for byte.
LARGE_BODY_BYTES = 128 * 1024
# Distinct large bodies kept (the catalogue, the zones' offerings' listings); more, and the one
# asked for least recently is let go (bodies that change with each call never push out these).
MOST_REMEMBERED_BODIES = 32


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


@contextmanager
def remembered_parses() -> Iterator[dict[tuple[Any, ...], tuple[object, bytes]]]:
    """While open, botocore parses each large query-protocol body (EC2's, SQS's XML) once per
    output shape, and answers the same bytes again with a copy of that parse. Yields the memo
    (key: the parser's class, timestamp and blob parsers, the shape, the body; value: the
    shape's table, kept so that its id is not reused, and the parse, pickled)."""
    remembered: dict[tuple[Any, ...], tuple[object, bytes]] = {}
    original = botocore.parsers.QueryParser._do_parse

    def do_parse(parser: Any, response: dict[str, Any], shape: Any) -> Any:
        body = response["body"]
        if not isinstance(body, bytes) or len(body) < LARGE_BODY_BYTES:
            return original(parser, response, shape)
        # A shape is known by its service model's shape table (one per process: the loader is
        # shared) and its name.
        resolver = getattr(shape, "_shape_resolver", None)
        table = getattr(resolver, "_shape_map", None)
        key = (
            type(parser),
            _unbound(parser, parser._timestamp_parser),
            _unbound(parser, parser._blob_parser),
            id(table),
            getattr(shape, "name", None),
            body,
        )
        kept = remembered.pop(key, None)
        if kept is None:
            answer = original(parser, response, shape)
            if len(remembered) >= MOST_REMEMBERED_BODIES:
                del remembered[next(iter(remembered))]
            remembered[key] = (table, pickle.dumps(answer, pickle.HIGHEST_PROTOCOL))
            return answer
        remembered[key] = kept  # the most recently asked for, last
        return pickle.loads(kept[1])  # our own bytes, pickled above

    botocore.parsers.QueryParser._do_parse = do_parse  # type: ignore[method-assign]
    try:
        yield remembered
    finally:
        botocore.parsers.QueryParser._do_parse = original  # type: ignore[method-assign]
        remembered.clear()


def _unbound(parser: Any, function: Any) -> Any:
    """A parser's own default (a method bound to it) as its class's function: alike for all."""
    if getattr(function, "__self__", None) is parser:
        return function.__func__
    return function
