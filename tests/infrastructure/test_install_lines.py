"""The install line a newcomer copies runs as written (issue 40: the README's was
`pip install "capacity-launcher @ git+<this repository's URL>"`, a placeholder that pip refuses)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# Each `pip install ...` in inline code or on a line of a code block.
PIP_INSTALL = re.compile(r"`(pip install [^`]*)`|^\s*\$?\s*(pip install .*)$", re.MULTILINE)
PLACEHOLDER = re.compile(r"<[^>]*>")


def _install_lines() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        for match in PIP_INSTALL.finditer(page.read_text()):
            found.append((page.relative_to(ROOT).as_posix(), match.group(1) or match.group(2)))
    return found


@pytest.mark.unit
def test_the_pages_say_how_to_install_the_client() -> None:
    assert any(page == "README.md" for page, _ in _install_lines())


@pytest.mark.unit
@pytest.mark.parametrize(("page", "line"), _install_lines())
def test_no_install_line_carries_a_placeholder(page: str, line: str) -> None:
    assert not PLACEHOLDER.search(line), f"{page}: `{line}` has a placeholder to fill in"
