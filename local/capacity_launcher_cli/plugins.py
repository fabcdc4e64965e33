"""Commands other packages add to `capacity-launcher`: the local cloud's `local up`, `invoke` and
`demo`.

A package names a sequence of `PluginCommand` under the `capacity_launcher_cli.commands` entry
point (pyproject.toml's [project.entry-points]). The CLI adds each to its parser and runs it, and
never imports the package: the local cloud (moto, the `local` extra) builds on the CLI and the
client, not the other way round (.importlinter holds it). Loading the entry point must stay cheap
(argparse only): `--help` and completion load it; the command's code loads when it runs.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from importlib.metadata import entry_points
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from capacity_launcher_cli.deployment import Deployment

GROUP = "capacity_launcher_cli.commands"


@dataclass(frozen=True)
class PluginCommand:
    """A command the CLI does not own: its name, help and flags, and what runs it.

    `run` runs without a deployment (`local up`, `demo`); `run_deployed` with the one the
    CLI's --stack-name, --region and --local-file name (`invoke`), which the CLI adds and
    resolves as for its own commands. Exactly one of them is given."""

    name: str
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int] | None = None
    run_deployed: Callable[[argparse.Namespace, Deployment], int] | None = None

    def __post_init__(self) -> None:
        if (self.run is None) == (self.run_deployed is None):
            raise ValueError(f"plugin command {self.name!r}: give exactly one of run, run_deployed")


@cache
def installed() -> tuple[PluginCommand, ...]:
    """The commands every installed distribution registers under GROUP, in name order."""
    found: list[PluginCommand] = []
    for entry in sorted(entry_points(group=GROUP), key=lambda e: e.name):
        commands: Sequence[PluginCommand] = entry.load()
        found.extend(commands)
    return tuple(found)


def by_name() -> dict[str, PluginCommand]:
    return {command.name: command for command in installed()}
