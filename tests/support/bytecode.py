"""The test processes' bytecode, kept between runs where the environment says not to write it.

Where PYTHONDONTWRITEBYTECODE is set (as in many container images), every test process compiles
the project from source again, and pytest rewrites the asserts of every test module again, on
each run, in each pytest-xdist worker and each process a test starts (the e2e tests' CLI and
`local up`): collecting the whole suite took 15.5 s of CPU, 6.8 s from this cache.
`cache_bytecode()` keeps it instead outside the project, in one folder of the system's temporary
directory for this user (PYTHONPYCACHEPREFIX: the sources' tree stays without `__pycache__`), for
this process's later imports and for every process it starts. Python and pytest check each cached
file against its source's modification time and size, as they do in `__pycache__`: what runs is
the same. Its first run compiles everything once into it (the libraries too: the prefix replaces
their `__pycache__`); every later run reads it. The workers of one run collect at the same time,
so a fresh folder helps from the second run on.

Imports nothing beyond the standard library: the root conftest calls it before anything else."""

from __future__ import annotations

import getpass
import os
import sys
import tempfile
from collections.abc import MutableMapping
from pathlib import Path

FOLDER_PREFIX = "capacity-launcher-pycache-"


def cache_bytecode(environ: MutableMapping[str, str] = os.environ) -> Path | None:
    """Bytecode written to a cache folder from now on, in this process and the ones it starts,
    where the environment forbids writing it and names no cache folder of its own. Returns the
    folder, or None when nothing was changed (bytecode written as Python writes it already, a
    prefix chosen by the user, or a folder another user owns)."""
    if not environ.get("PYTHONDONTWRITEBYTECODE") or environ.get("PYTHONPYCACHEPREFIX"):
        return None
    folder = _own_folder(Path(tempfile.gettempdir()) / f"{FOLDER_PREFIX}{_user()}")
    if folder is None:
        return None
    environ.pop("PYTHONDONTWRITEBYTECODE")
    environ["PYTHONPYCACHEPREFIX"] = str(folder)
    if environ is os.environ:
        sys.pycache_prefix = str(folder)
        sys.dont_write_bytecode = False
    return folder


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container's)
        return str(os.getuid())


def _own_folder(folder: Path) -> Path | None:
    """`folder`, made private to this user if new; None if it is someone else's or not a folder
    (another user's cached bytecode is never run)."""
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        status = folder.lstat()
    except OSError:
        return None
    if not folder.is_dir() or folder.is_symlink() or status.st_uid != os.getuid():
        return None
    return folder
