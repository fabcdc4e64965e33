"""One clock: the domain, adapters and service modules tell the time only by the clock they are
given.

The composition root (service/wiring/) hands every store and use case its container's clock:
AWS's in Lambda, the emulator's on the local cloud (which `POST /moto-capacity/clock` moves), the
simulated one in the simulation. A module that reads the wall clock itself stamps or judges on
another time than the rest: a lease stamped on the wall clock and judged on the emulator's had
reconciliation count its in-flight instance beside it (usage 2 for 1 instance, issue 34 item 6
and issue 36). So no domain, adapter or service module outside the composition root may call, or
keep as a default, `time.time`, `time.time_ns`, `datetime.now`, `datetime.utcnow`,
`datetime.today` or `date.today`, nor import `time` from `time`.

`time.monotonic` stays allowed: it measures how long this process has held a copy (a warm
container's caches), is never stamped into a store nor compared with another process's time.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[2] / "layers" / "core" / "capacity_launcher"
CHECKED = ("adapters", "domain", "service")
# The one module that may name the system's clock: it chooses each container's.
COMPOSITION_ROOT = CORE / "service" / "wiring" / "__init__.py"
WALL_CLOCKS = {
    ("time", "time"),
    ("time", "time_ns"),
    ("datetime", "now"),
    ("datetime", "utcnow"),
    ("datetime", "today"),
    ("date", "today"),
}


def wall_clock_reads(source: str) -> list[str]:
    """Each `module.attribute` of WALL_CLOCKS the source names (called, or kept as a value: a
    default `clock=time.time` bypasses the clock it was not given), with its line."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if (node.value.id, node.attr) in WALL_CLOCKS:
                found.append((node.lineno, f"{node.value.id}.{node.attr}"))
        elif isinstance(node, ast.ImportFrom) and node.module == "time":
            for alias in node.names:
                if ("time", alias.name) in WALL_CLOCKS:
                    found.append((node.lineno, f"from time import {alias.name}"))
    return [f"{line}: {what}" for line, what in sorted(found)]


def checked_modules() -> list[Path]:
    modules = [path for part in CHECKED for path in sorted((CORE / part).rglob("*.py"))]
    return [path for path in modules if path != COMPOSITION_ROOT]


def test_the_check_finds_a_call_a_default_and_an_import_and_spares_monotonic() -> None:
    source = textwrap.dedent(
        """
        import time
        from datetime import UTC, datetime
        from time import time_ns

        def stamp() -> str:
            return datetime.now(UTC).isoformat()

        class Store:
            def __init__(self, clock=time.time) -> None:
                self._age = time.monotonic()
                self._clock = clock
        """
    )
    assert wall_clock_reads(source) == [
        "4: from time import time_ns",
        "7: datetime.now",
        "10: time.time",
    ]


def test_the_checked_modules_are_there() -> None:
    names = {path.name for path in checked_modules()}
    assert {"pool_leases.py", "config_store.py", "queries.py"} <= names
    assert "__init__.py" in names  # the packages' own
    assert COMPOSITION_ROOT not in checked_modules()


@pytest.mark.parametrize("path", checked_modules(), ids=lambda p: str(p.relative_to(CORE)))
def test_adapters_and_services_read_only_the_clock_they_are_given(path: Path) -> None:
    assert wall_clock_reads(path.read_text()) == [], (
        f"{path.relative_to(CORE)} reads the wall clock: take the clock from the composition "
        "root (service/wiring/) instead"
    )
