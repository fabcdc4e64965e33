"""The CLI starts fast and explains itself: `--help`, `--version` and `completion` load neither
boto3 nor the service (benchmarks/cli_startup.py times them), every flag says what it does, and
the completion script completes what the parser has."""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from importlib.metadata import version

import pytest

from capacity_launcher_cli.completion import completions, script
from capacity_launcher_cli.main import parser
from capacity_launcher_client.deployment import Deployment

HEAVY = ("boto3", "botocore", "pydantic", "capacity_launcher", "rich")


def _loaded_after(*argv: str) -> tuple[list[str], str]:
    """Heavy packages `capacity-launcher ARGV` imported in a fresh interpreter; its output."""
    probe = (
        "import io, json, sys, contextlib\n"
        "from capacity_launcher_cli.main import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        "    try:\n"
        f"        main({list(argv)!r})\n"
        "    except SystemExit:\n"
        "        pass\n"
        f"heavy = sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))\n"
        "print(json.dumps([heavy, out.getvalue()]))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    heavy, output = json.loads(done.stdout.splitlines()[-1])
    return heavy, output


@pytest.mark.parametrize(
    "argv",
    [
        ("--help",),
        ("get", "--help"),
        ("submit", "--help"),
        ("--version",),
        ("completion", "bash"),
        ("completion", "fish"),
    ],
)
def test_help_version_and_completion_load_neither_boto3_nor_the_service(argv) -> None:
    heavy, output = _loaded_after(*argv)
    assert heavy == []
    assert output  # and they did print


def test_a_command_with_no_deployment_to_ask_fails_without_loading_boto3_or_the_service(
    tmp_path,
) -> None:
    # What completion runs on every TAB (`get TYPE -o name`) where no local cloud runs: the
    # deployment is looked for first, and boto3, pydantic and the service load only once found.
    heavy, _output = _loaded_after(
        "get", "nodepools", "-o", "name", "--local-file", str(tmp_path / "none.json")
    )
    assert not {"boto3", "pydantic", "rich"} & set(heavy)


@pytest.mark.parametrize("endpoint", ["http://127.0.0.1:4566", None])
def test_a_command_that_calls_aws_loads_botocore_without_pyopenssl(tmp_path, endpoint) -> None:
    # botocore takes the standard library's SSLContext through urllib3's pyOpenSSL module when it
    # is installed: pyOpenSSL and cryptography, a twentieth of a second on every command; and the
    # AWS CRT, which a local cloud never needs. The installed command runs (main() on its own
    # command line), its deployment found; the command itself is replaced (nothing is called).
    local = tmp_path / "local.json"
    names = ("us-east-1", "bus", "queue", "dlq", "state", "ice", "idem")
    local.write_text(Deployment(*names, endpoint_url=endpoint).to_json())
    probe = (
        "import importlib.util, json, ssl, sys\n"
        "from capacity_launcher_cli import main\n"
        "main._load = lambda module, name: lambda args, deployment: 0\n"
        f"sys.argv = ['capacity-launcher', 'get', 'nodepools', '--local-file', {str(local)!r}]\n"
        "main.main()\n"
        "import boto3, botocore.compat, botocore.httpsession\n"
        "tls = botocore.httpsession.SSLContext is ssl.SSLContext\n"
        "crt = [botocore.compat.HAS_CRT, importlib.util.find_spec('awscrt') is not None]\n"
        "print(json.dumps([tls, sorted({'OpenSSL', 'cryptography'} & set(sys.modules)), crt]))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    tls, loaded, (has_crt, crt_installed) = json.loads(done.stdout.splitlines()[-1])

    assert (tls, loaded) == (True, [])
    # Against AWS, botocore finds the CRT as it always does; a local cloud's goes without it.
    assert has_crt is (crt_installed and endpoint is None)


def test_the_commands_that_print_json_load_no_rich() -> None:
    # `status`, `get TYPE -o json`, `usage -o csv`: rich is loaded when a table is made.
    probe = (
        "import json, sys\n"
        "import capacity_launcher_cli.request_commands, capacity_launcher_cli.usage_command\n"
        "import capacity_launcher_cli.capacity_commands, capacity_launcher_cli.views as views\n"
        "views.print_json({'a': 1})\n"
        "print(json.dumps('rich' in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)

    assert json.loads(done.stdout.splitlines()[-1]) is False


def test_invoke_runs_a_function_without_loading_moto() -> None:
    # `invoke` runs a function against a deployment (the local cloud another process serves, or
    # a stack): moto's models take seconds to import and it needs none of them.
    probe = "import json, sys, local_cloud.invoke_command; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)

    assert not [m for m in json.loads(done.stdout) if m.split(".")[0] == "moto"]


def test_version_is_the_installed_distributions() -> None:
    _heavy, output = _loaded_after("--version")
    assert output.strip() == f"capacity-launcher {version('capacity-launcher')}"


def _every_action(
    root: argparse.ArgumentParser, path: str = ""
) -> list[tuple[str, argparse.Action]]:
    found = []
    for action in root._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _every_action(sub, f"{path} {name}".strip())
        elif not isinstance(action, argparse._HelpAction):
            found.append((path, action))
    return found


def test_every_flag_and_argument_has_help() -> None:
    missing = [
        f"{path or 'capacity-launcher'} {action.option_strings or action.dest}"
        for path, action in _every_action(parser())
        if not action.help or action.help == argparse.SUPPRESS
    ]
    assert missing == []


def test_completion_knows_every_command_flag_and_choice() -> None:
    table = completions(parser())
    assert {"get", "top", "completion", "--version"} <= set(table[""])
    assert {"nodepools", "requests", "--output", "--stack-name"} <= set(table["get"])
    assert {"--port", "--no-schedules"} <= set(table["local up"])
    assert script(parser(), "zsh").startswith("autoload -U +X bashcompinit && bashcompinit\n")


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
@pytest.mark.parametrize(
    ("words", "expected"),
    [
        (
            ["capacity-launcher", "get", "no"],
            "nodepools nodepool nodeclasses nodeclass nodeclaims nodeclaim",
        ),
        (["capacity-launcher", "s"], "submit status schemas"),
        (["capacity-launcher", "local", "up", "--p"], "--port"),
        (["capacity-launcher", "delete", "node"], "nodepool nodepools nodeclass nodeclasses"),
    ],
)
def test_bash_completes_as_a_person_types(words: list[str], expected: str) -> None:
    program = (
        f"{script(parser(), 'bash')}\n"
        f"COMP_WORDS=({' '.join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}\n"
        f'{"_capacity_launcher"}; echo "${{COMPREPLY[*]}}"\n'
    )
    done = subprocess.run(["bash", "-c", program], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == expected


def test_the_operators_views_make_no_ec2_client_until_a_view_reads_ec2() -> None:
    # `get`, `describe` and `top` build the service's queries first: a botocore client for EC2
    # costs a command a tenth of a second of CPU to make (its model is the largest botocore
    # loads), and a pool's readiness is counted from the state table alone.
    from capacity_launcher.service.wiring import Adapters
    from capacity_launcher_cli.deployment import Deployment

    deployment = Deployment("us-east-1", "bus", "queue", "dlq", "state", "unavailable", "idem")
    asked: list[str] = []

    def clients(service: str) -> object:
        asked.append(service)
        return object()

    Adapters(deployment.settings(), clients).queries()

    assert "ec2" not in asked


def test_every_name_the_client_package_exports_is_its_modules_own() -> None:
    # The package imports its names on first use (PEP 562): a name listed in __all__ but given
    # no module, or the wrong one, fails here rather than at a user's import.
    import importlib

    package = importlib.import_module("capacity_launcher_client")
    for name in package.__all__:
        value = getattr(package, name)
        if name == "clients":
            assert value is importlib.import_module("capacity_launcher_client.clients")
        else:
            source = importlib.import_module(package._SOURCES[name])
            assert value is getattr(source, name), name
    with pytest.raises(AttributeError):
        _ = package.NotExported
