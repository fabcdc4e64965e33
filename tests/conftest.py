"""Marks every test by the folder it lives in, so `-m unit|integration|e2e` selects by layer."""

from pathlib import Path

import pytest

_LAYERS = ("unit", "integration", "e2e")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        parts = Path(str(item.fspath)).parts
        for layer in _LAYERS:
            if layer in parts:
                item.add_marker(getattr(pytest.mark, layer))
