"""A backend's URL table, built once for what it is built from, not once per request.

For every request it mocks in process, moto's `BotocoreStubber.process_request` asks the
service's backend for `urls` (`BaseBackend.urls`), which formats each of the service's URL
patterns for each of its URL bases again and rewrites each for the China suffix by a regular
expression (about 5% of a DynamoDB GetItem's CPU here). The table is a function of the backend's
`url_bases`, its URL module's `url_paths` (the patterns and their handlers: this extension adds
some at `install()`), and whether ISO regions are enabled: it is kept under exactly those, and each
caller is given its own copy of it.
"""

from collections.abc import Callable
from typing import Any

from moto.settings import enable_iso_regions

# (url_bases, url_paths' items, ISO regions on) -> the table moto builds from them
_TABLES: dict[tuple[Any, ...], dict[str, Any]] = {}
# Distinct tables kept: one a service and a handful of settings; more, and all are built again.
_MOST_KEPT = 512


def built_once(original: property) -> Callable[[Any], dict[str, Any]]:
    """The hook's getter for moto's `BaseBackend.urls` (`core.patching.hook_property`)."""
    build: Callable[[Any], dict[str, Any]] = original.fget  # type: ignore[assignment]

    def urls(backend: Any) -> dict[str, Any]:
        try:
            key = (
                tuple(backend.url_bases),
                tuple(backend._url_module.url_paths.items()),
                enable_iso_regions(),
            )
            table = _TABLES.get(key)
        except TypeError:  # something unhashable: moto builds it
            return build(backend)
        if table is None:
            if len(_TABLES) >= _MOST_KEPT:
                _TABLES.clear()
            table = _TABLES[key] = build(backend)
        return dict(table)

    return urls
