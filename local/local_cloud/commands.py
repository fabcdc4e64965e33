"""The local cloud's commands in `capacity-launcher`: `local up`, `invoke` and `demo`.

pyproject.toml registers COMMANDS under the CLI's `capacity_launcher_cli.commands` entry point;
the CLI adds them to its parser and runs them without importing this package by name. Only
argparse loads here (the CLI's `--help` and completion read it); each command loads the local
cloud, and moto with it, when it runs.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from capacity_launcher_cli.plugins import PluginCommand

if TYPE_CHECKING:
    from capacity_launcher_cli.deployment import Deployment


def _local_arguments(local: argparse.ArgumentParser) -> None:
    local_commands = local.add_subparsers(dest="local_command", required=True)
    up = local_commands.add_parser("up", help="start the local cloud in the foreground")
    up.add_argument("--host", default="127.0.0.1", help="address to listen on")
    up.add_argument("--port", type=int, default=4566, help="port to listen on (default 4566)")
    up.add_argument("--region", default="us-east-1", help="the local cloud's region")
    up.add_argument("--template", help="template.yaml to build from (default: the project's)")
    up.add_argument("--local-file", help="where to write the names")
    up.add_argument("--visibility-timeout", type=int, help="override the launch queue's")
    up.add_argument("--no-schedules", action="store_true", help="do not run scheduled functions")
    up.add_argument(
        "--web-port",
        type=int,
        help="also serve the web view (capacity-launcher web) on this port, on --host",
    )


def _local(args: argparse.Namespace) -> int:
    from local_cloud.up_command import up

    return up(args)


def _invoke_arguments(invoke: argparse.ArgumentParser) -> None:
    invoke.add_argument("function", help="logical id (LauncherFunction) or folder (launcher)")
    invoke.add_argument("-e", "--event", help="event JSON file, or - for stdin")
    invoke.add_argument("--env-vars", help="SAM's env.json: overrides of the environment")
    invoke.add_argument("--template", help="template.yaml (default: the project's)")


def _invoke(args: argparse.Namespace, deployment: Deployment) -> int:
    from local_cloud.invoke_command import invoke

    return invoke(args, deployment)


def _demo_arguments(demo: argparse.ArgumentParser) -> None:
    demo.add_argument("--examples", default="examples", help="folder of documents to apply")


def _demo(args: argparse.Namespace) -> int:
    from local_cloud.demo import run_demo

    return run_demo(args.examples)


COMMANDS = (
    PluginCommand("local", "the local cloud", _local_arguments, run=_local),
    PluginCommand(
        "invoke", "run a function once, without Docker", _invoke_arguments, run_deployed=_invoke
    ),
    PluginCommand(
        "demo", "the whole story on a local cloud (make run)", _demo_arguments, run=_demo
    ),
)
