"""`get TYPE NAME...`: only the named items, one NAME printed as the object itself and several as
a listing, and each name that is not there reported as kubectl reports it (exit 1), unless
`--ignore-not-found`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from capacity_launcher_cli import views
from capacity_launcher_cli.output_formats import TABLES

if TYPE_CHECKING:
    from rich.table import Table

EXIT_NOT_FOUND = 1


def not_found(resource: str, name: str, deleting: object = None) -> str:
    """kubectl's line for a name that is not there (`resource`: the type's plural; `deleting`:
    the file `delete -f` read it from)."""
    where = f'error when deleting "{deleting}": ' if deleting is not None else ""
    return f'Error from server (NotFound): {where}{resource} "{name}" not found'


def report_missing(args: argparse.Namespace, missing: Iterable[str]) -> int:
    """Each missing name on stderr (nothing with --ignore-not-found); the exit code that says so."""
    names = list(missing)
    if not names or args.ignore_not_found:
        return 0
    for name in names:
        print(not_found(args.resource, name), file=sys.stderr)
    return EXIT_NOT_FOUND


def missing_from(args: argparse.Namespace, present: Iterable[str]) -> list[str]:
    """The names asked for that are not among ``present``, in the order asked."""
    found = set(present)
    return [name for name in dict.fromkeys(args.names) if name not in found]


def chosen[Item](
    args: argparse.Namespace, items: Sequence[Item], key: Callable[[Item], str]
) -> list[Item]:
    """The items named (all of them when no NAME was given)."""
    if not args.names:
        return list(items)
    asked = set(args.names)
    return [item for item in items if key(item) in asked]


def answer(
    args: argparse.Namespace,
    missing: list[str],
    documents: Callable[[], list[dict[str, Any]]],
    table: Callable[[], Table],
) -> int:
    """Print what was found (`documents` for -o json|yaml|name|jsonpath, else `table`), after
    kubectl's NotFound for each missing name; 1 when a name was missing."""
    code = report_missing(args, missing)
    if args.names and len(missing) == len(set(args.names)):
        return code  # nothing found: nothing to print, as kubectl
    if args.output in TABLES:
        views.show(table())
        return code
    found = documents()
    views.emit(found[0] if len(args.names) == 1 else found, args)
    return code
