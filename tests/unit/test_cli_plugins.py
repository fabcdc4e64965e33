"""The CLI runs commands other packages register (capacity_launcher_cli.plugins) without
importing them: the local cloud's `local up`, `invoke` and `demo` come through the
`capacity_launcher_cli.commands` entry point, and .importlinter forbids the CLI to import it."""

from __future__ import annotations

import argparse
import tomllib
from pathlib import Path

import pytest

from capacity_launcher_cli import main, plugins
from capacity_launcher_cli.deployment import Deployment

REPO = Path(__file__).resolve().parents[2]
DEPLOYMENT = Deployment(
    region="us-east-1",
    event_bus="bus",
    launch_queue_url="queue",
    dead_letter_queue_url="dlq",
    state_table="state",
    unavailable_offerings_table="ice",
    idempotency_table="idem",
)


def test_the_project_registers_the_local_clouds_commands_under_the_clis_group() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    registered = project["project"]["entry-points"][plugins.GROUP]

    module, _, name = registered["local_cloud"].partition(":")
    commands = getattr(__import__(module, fromlist=[name]), name)

    assert [c.name for c in commands] == ["local", "invoke", "demo"]
    assert all(isinstance(c, plugins.PluginCommand) for c in commands)


def _plugin(ran: list[object], *, deployed: bool) -> plugins.PluginCommand:
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--colour", help="a flag of the plugin's own")

    if deployed:
        return plugins.PluginCommand(
            "painted",
            "a deployed plugin",
            arguments,
            run_deployed=lambda args, deployment: ran.append((args.colour, deployment)) or 0,
        )
    return plugins.PluginCommand(
        "painted", "a plugin", arguments, run=lambda args: ran.append(args.colour) or 0
    )


def test_a_registered_command_is_parsed_and_run_without_a_deployment(monkeypatch) -> None:
    ran: list[object] = []
    monkeypatch.setattr(plugins, "installed", lambda: (_plugin(ran, deployed=False),))

    assert main.main(["painted", "--colour", "red"]) == 0
    assert ran == ["red"]


def test_a_deployed_command_gets_the_flags_and_the_deployment_they_name(monkeypatch) -> None:
    ran: list[object] = []
    monkeypatch.setattr(plugins, "installed", lambda: (_plugin(ran, deployed=True),))
    named: list[tuple[object, ...]] = []

    def resolve(*names: object) -> Deployment:
        named.append(names)
        return DEPLOYMENT

    monkeypatch.setattr("capacity_launcher_cli.deployment.resolve", resolve)

    argv = ["painted", "--colour", "blue", "--stack-name", "prod", "--region", "eu-west-1"]
    assert main.main(argv) == 0
    assert ran == [("blue", DEPLOYMENT)]
    assert named == [("prod", "eu-west-1", None)]


@pytest.mark.parametrize("runs", [{}, {"run": print, "run_deployed": print}])
def test_a_plugin_command_gives_exactly_one_way_to_run(runs) -> None:
    with pytest.raises(ValueError, match="exactly one of run, run_deployed"):
        plugins.PluginCommand("broken", "no", lambda parser: None, **runs)


def test_the_clis_own_commands_run_without_looking_for_plugins(monkeypatch, capsys) -> None:
    # Looking for them reads every installed distribution's entry points: a twentieth of a
    # second on every command. `--help` and a plugin's command still find them.
    looked: list[bool] = []

    def installed() -> tuple[plugins.PluginCommand, ...]:
        looked.append(True)
        return (_plugin([], deployed=False),)

    monkeypatch.setattr(plugins, "installed", installed)

    assert main.main(["explain", "np.spec.weight"]) == 0
    assert looked == []
    with pytest.raises(SystemExit):
        main.main(["--help"])
    assert "painted" in capsys.readouterr().out
