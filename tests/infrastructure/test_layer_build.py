"""Issue 14: the layer ships compiled bytecode, so a cold start never compiles it (/opt is
read-only: Python cannot cache what it compiles there)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The flags word of a hash-based .pyc that Python never checks against its source (PEP 552).
UNCHECKED_HASH = 0b01


def test_the_layer_recipe_ships_bytecode_python_uses_without_its_sources_mtime(
    tmp_path: Path,
) -> None:
    # Given sam build's recipe for the layer, built for this machine's platform
    make = [
        "make",
        "-s",
        "-f",
        str(ROOT / "layers" / "core" / "Makefile"),
        "build-CoreLayer",
        f"ARTIFACTS_DIR={tmp_path}",
        f"PYTHON={sys.executable}",
        "PLATFORM=manylinux2014_x86_64",
    ]
    subprocess.run(make, check=True, capture_output=True, timeout=300)
    layer = tmp_path / "python"
    # Then every module of the package and its dependencies has its 3.13 bytecode beside it
    sources = [p for p in layer.rglob("*.py") if "__pycache__" not in p.parts]
    assert any(p.parts[-2] == "capacity_launcher" for p in sources)
    missing = [p for p in sources if not Path(importlib.util.cache_from_source(str(p))).exists()]
    assert missing == []
    # and the bytecode is the unchecked-hash kind, valid whatever mtime the zip gives a source
    pyc = Path(importlib.util.cache_from_source(str(layer / "capacity_launcher" / "settings.py")))
    header = pyc.read_bytes()[:8]
    assert header[:4] == importlib.util.MAGIC_NUMBER
    assert int.from_bytes(header[4:8], "little") == UNCHECKED_HASH
    # and the handlers' package imports from it without writing anything
    environment = {**os.environ, "PYTHONPATH": str(layer), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", "import capacity_launcher.domain.config as c; print(c.__file__)"],
        env=environment,
        check=True,
        capture_output=True,
        text=True,
    )
    assert done.stdout.strip() == str(layer / "capacity_launcher" / "domain" / "config.py")
