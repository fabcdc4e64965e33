"""`capacity-launcher`: kubectl-like apply/get/delete, submit/status, sam-like invoke, the local
cloud and the demo. Locally no flags are needed; against AWS pass --stack-name (and the usual
AWS_PROFILE / AWS_REGION)."""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Callable, Sequence
from importlib import import_module
from typing import TYPE_CHECKING

from capacity_launcher_cli import (
    field_selectors,
    label_selectors,
    output_formats,
    plugins,
    resource_types,
)

# Only argparse at start: `--help`, `--version` and completion never load boto3 or the service
# (over a second); each command imports what it uses when it runs.
if TYPE_CHECKING:
    from capacity_launcher_cli.deployment import Deployment

Command = Callable[[argparse.Namespace, "Deployment"], int]


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stack-name", help="a deployed stack: names come from its outputs")
    parser.add_argument(
        "--region",
        help="AWS region (default: AWS_REGION / AWS_DEFAULT_REGION, the profile's, else us-east-1)",
    )
    parser.add_argument(
        "--local-file", help="the local cloud's names (default .capacity-launcher/local.json)"
    )


def _all_namespaces(parser: argparse.ArgumentParser) -> None:
    """kubectl's -A, typed by habit: there are no namespaces here (every object, and every
    team's requests, is listed already), so it is accepted and changes nothing."""
    parser.add_argument(
        "-A",
        "--all-namespaces",
        action="store_true",
        help="accepted as kubectl's and changes nothing: there are no namespaces, every object "
        "(and every team's requests) is listed already",
    )


def _recursive(parser: argparse.ArgumentParser) -> None:
    """kubectl's -R: the folders -f names are read with their subfolders."""
    parser.add_argument(
        "-R",
        "--recursive",
        action="store_true",
        help="read the folders -f names with their subfolders, as kubectl's -R does",
    )


def _submit_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    submit = commands.add_parser("submit", help="send a launch request to the bus or the queue")
    _common(submit)
    submit.add_argument("-f", "--filename", help="a launch request JSON file (flags override it)")
    submit.add_argument("--request-id", help="the request's id (default: cli-<milliseconds>)")
    submit.add_argument("--node-pool", help="the NodePool (default: the first compatible one)")
    submit.add_argument("--count", type=int, help="instances wanted")
    submit.add_argument("--min-count", type=int, help="fewer than this launches none (a gang)")
    submit.add_argument("--single-zone", action="store_true", help="all instances in one zone")
    submit.add_argument("--requester", help="who asks (the team a CapacityQuota names)")
    submit.add_argument("--requirement", action="append", metavar="KEY=OP:V1,V2", help="repeatable")
    submit.add_argument("--tag", action="append", metavar="KEY=VALUE", help="repeatable")
    submit.add_argument(
        "--wait-for-capacity-until",
        metavar="WHEN",
        help="wait (status Waiting, in its pool's admission queue) rather than fail for quota, "
        "limits or capacity, until WHEN: an ISO-8601 time with a zone (2026-11-24T12:00:00Z) or "
        "a duration from now on the service's clock (90s, 30m, 2h, 1d)",
    )
    submit.add_argument(
        "--priority-class-name",
        metavar="NAME",
        help="an applied PriorityClass: its value orders the request in its queue should it wait",
    )
    submit.add_argument(
        "--via", choices=("bus", "queue"), default="bus", help="the event bus (default) or queue"
    )
    submit.add_argument(
        "--source",
        help="the bus event's source (default capacity-launcher.cli): a scheduler's, as a "
        "CapacityQuota's requesterOrigins.eventSources names it",
    )
    submit.add_argument("--wait", action="store_true", help="print the status when finished")
    submit.add_argument(
        "--dry-run",
        action="store_true",
        help="send nothing: the pool it resolves to, the offerings and reservations it would "
        "try in order, the limits' and quota's headroom and the ICE entries in its way",
    )
    submit.add_argument("--timeout", type=float, default=120.0, help="seconds --wait waits")


def parser(with_plugins: bool = True) -> argparse.ArgumentParser:
    """The command line; `with_plugins=False`: the CLI's own commands only (`_parsed`)."""
    root = argparse.ArgumentParser(prog="capacity-launcher", description=__doc__)
    root.add_argument("--version", action=_Version, help="print the version and exit")
    commands = root.add_subparsers(dest="command", required=True)

    apply = commands.add_parser(
        "apply", help="create or replace NodeClasses, NodePools and CapacityQuotas"
    )
    _common(apply)
    apply.add_argument("-f", "--filename", action="append", required=True, help="file or folder")
    _recursive(apply)
    apply.add_argument(
        "--dry-run",
        choices=("none", "client", "server"),
        default="none",
        help="write nothing: client checks the documents here; server also runs the service's "
        "checks against what is stored (docs/cli.md)",
    )

    diff = commands.add_parser(
        "diff", help="what apply -f would change: a unified diff of stored and applied objects"
    )
    _common(diff)
    diff.add_argument("-f", "--filename", action="append", required=True, help="file or folder")
    _recursive(diff)

    get = commands.add_parser("get", help="list resources")
    _common(get)
    _all_namespaces(get)
    resource_types.add_argument(
        get, "resource", "what to list: a plural, singular or short name, in any case"
    )
    get.add_argument(
        "names",
        nargs="*",
        action=_Names,
        metavar="NAME",
        help="only these (a request by its requestId, an instance or reservation by its id): "
        "their rows, or the object itself with -o yaml|json",
    )
    get.add_argument(
        "--ignore-not-found",
        action="store_true",
        help="a NAME that does not exist is not an error (exit 0, nothing printed for it)",
    )
    get.add_argument(
        "-o",
        "--output",
        type=output_formats.output_format,
        default="table",
        metavar="FORMAT",
        help="table (default), wide, json, yaml, name or jsonpath=TEMPLATE (docs/cli.md)",
    )
    get.add_argument(
        "-l",
        "--selector",
        type=label_selectors.selector,
        default=(),
        metavar="SELECTOR",
        help="only documents whose metadata.labels match: key=value,key!=value,key,!key",
    )
    get.add_argument(
        "--field-selector",
        type=field_selectors.field_selector,
        default=(),
        metavar="SELECTOR",
        help="requests only: field=value,field!=value on status, requester, nodePool, "
        "requestId, errors.code",
    )
    get.add_argument(
        "-w",
        "--watch",
        action="store_true",
        help="after the listing, print each row that changes, until Ctrl-C (table, wide, name)",
    )
    get.add_argument(
        "--watch-interval", type=float, default=2.0, help="seconds between --watch's polls"
    )
    get.add_argument(
        "--output-version",
        help="print documents in this served apiVersion of their kind (docs/api-versions.md)",
    )

    convert = commands.add_parser(
        "convert", help="print documents in another served apiVersion (kubectl convert)"
    )
    convert.add_argument("-f", "--filename", action="append", required=True, help="file or folder")
    _recursive(convert)
    convert.add_argument("--output-version", required=True, help="e.g. capacity-launcher/v1")
    convert.add_argument(
        "-o", "--output", choices=("yaml", "json"), default="yaml", help="output format"
    )

    delete = commands.add_parser(
        "delete",
        help="delete a NodePool, NodeClass, CapacityQuota, PriorityClass or Cohort (TYPE NAME, "
        "or -f)",
    )
    _common(delete)
    _all_namespaces(delete)
    resource_types.add_argument(
        delete,
        "kind",
        "nodepool (np), nodeclass (nc, ec2nodeclass), capacityquota (cq), priorityclass (pc) or "
        "cohort",
        optional=True,
    )
    delete.add_argument("name", nargs="?", help="the document's metadata.name")
    delete.add_argument(
        "-f",
        "--filename",
        action="append",
        help="file or folder (- for standard input): delete every object its documents apply",
    )
    _recursive(delete)
    delete.add_argument(
        "--ignore-not-found",
        action="store_true",
        help="a document that does not exist is not an error (exit 0, nothing printed)",
    )

    describe = commands.add_parser("describe", help="one resource as a page for people")
    _common(describe)
    _all_namespaces(describe)
    resource_types.add_argument(
        describe,
        "resource",
        "nodepool, nodeclass, ec2nodeclass, capacityquota, capacityreservation, "
        "clustercapacityreservation or request",
    )
    describe.add_argument("name", help="its name (a request: its requestId)")

    _submit_parser(commands)

    top = commands.add_parser(
        "top", help="a live view: queue, requests, pools, quotas, reservations, dry offerings"
    )
    _common(top)
    _all_namespaces(top)
    top.add_argument("--interval", type=float, default=2.0, help="seconds between refreshes")
    top.add_argument("--once", action="store_true", help="print one screen and exit")

    web = commands.add_parser(
        "web", help="a read-only web view: pools, reservations, requests, the ICE cache"
    )
    _common(web)
    web.add_argument("--host", default="127.0.0.1", help="address to listen on (default loopback)")
    web.add_argument("--port", type=int, default=8466, help="port to listen on (default 8466)")
    web.add_argument("--interval", type=float, default=2.0, help="seconds between the page's polls")

    usage = commands.add_parser(
        "usage", help="usage by team: instance-hours, reservation hours, idle shares, cost"
    )
    _common(usage)
    usage.add_argument(
        "--since", help="from this UTC date or ISO-8601 time (default: today, 00:00 UTC)"
    )
    usage.add_argument("--until", help="to this UTC date (the whole day) or time (default: now)")
    usage.add_argument(
        "-o", "--output", choices=("table", "json", "csv"), default="table", help="how to print"
    )
    usage.add_argument(
        "--prices",
        help="a price table (JSON or YAML: onDemand, spot, reserved, block, each mapping an "
        "instance type to USD per hour) to estimate costs with; without it no cost is shown",
    )

    status = commands.add_parser("status", help="a request's status record (JSON)")
    _common(status)
    status.add_argument("request_id", help="the request's requestId")
    status.add_argument("--wait", action="store_true", help="wait until the request finishes")
    status.add_argument("--timeout", type=float, default=120.0, help="seconds --wait waits")

    explain = commands.add_parser(
        "explain", help="a kind's fields: their types, descriptions and rules (kubectl explain)"
    )
    explain.add_argument(
        "target",
        metavar="TYPE[.FIELD.PATH]",
        help="a TYPE by any of its names, then the path of a field (np.spec.limits)",
    )
    explain.add_argument(
        "--api-version", help="another served version of the kind (docs/api-versions.md)"
    )

    schemas = commands.add_parser("schemas", help="JSON Schemas of the contracts")
    schemas.add_argument("--write", action="store_true", help="write them to --directory")
    schemas.add_argument("--directory", default="schemas", help="where --write writes")
    schemas.add_argument(
        "--template", default="template.yaml", help="whose event schema registry to rewrite"
    )

    completion = commands.add_parser(
        "completion",
        help='shell completion: eval "$(capacity-launcher completion bash)" (or zsh); '
        "capacity-launcher completion fish | source",
    )
    completion.add_argument(
        "shell", choices=("bash", "zsh", "fish"), help="the shell to complete in"
    )
    if with_plugins:
        _plugin_parsers(commands)
    return root


def _parsed(argv: Sequence[str] | None) -> tuple[argparse.Namespace, bool]:
    """The arguments, and whether they name one of the CLI's own commands. Those are parsed
    without looking for other packages' commands: finding them reads every installed
    distribution's entry points (a twentieth of a second of CPU, on every command)."""
    words = list(sys.argv[1:] if argv is None else argv)
    root = parser(with_plugins=False)
    (commands,) = [a for a in root._actions if isinstance(a, argparse._SubParsersAction)]
    own = bool(words) and words[0] in commands.choices
    if not own:  # --help, --version, a plugin's command, a mistake: every command
        _plugin_parsers(commands)
    return root.parse_args(words), own


def _plugin_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Commands installed packages register (the local cloud's `local`, `invoke`, `demo`)."""
    for plugin in plugins.installed():
        added = commands.add_parser(plugin.name, help=plugin.help)
        if plugin.run_deployed is not None:
            _common(added)
        plugin.arguments(added)


class _Names(argparse.Action):
    """`get`'s NAMEs, and `name`: the one NAME of the types that take one (None without)."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, *rest: object
    ) -> None:
        names = list(rest[0]) if isinstance(rest[0], list) else []
        namespace.names = names
        namespace.name = names[0] if names else None


class _Version(argparse.Action):
    """--version: the installed distribution's version, looked up only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help=str(kwargs.get("help")))

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = version("capacity-launcher")
        except PackageNotFoundError:  # run from a checkout without `pip install -e .`
            found = "unknown (not installed)"
        print(f"capacity-launcher {found}")
        parser.exit()


# Each command's module and function, imported when it runs: a command loads its own module and
# what that needs, not every other command's (a shell's completion runs `get TYPE -o name`).
_GETS = {
    # get's TYPE is a plural of resource_types.TYPES, whatever name was typed.
    "capacityreservations": ("ome_commands", "get_reservations"),
    "clustercapacityreservations": ("ome_commands", "get_reservations"),
    "priorityclasses": ("priority_commands", "get_priority_classes"),
    "cohorts": ("cohort_commands", "get_cohorts"),
    "nodeclaims": ("karpenter_commands", "get_nodeclaims"),
    "nodepools": ("config_commands", "get_config"),
    "nodeclasses": ("config_commands", "get_config"),
    "ec2nodeclasses": ("config_commands", "get_config"),
    "capacityquotas": ("quota_commands", "get_quotas"),
    "requests": ("request_commands", "get_requests"),
    "queues": ("request_commands", "get_queues"),
    "instances": ("request_commands", "get_instances"),
    "reservations": ("capacity_commands", "get_reservations"),
    "unavailable-offerings": ("capacity_commands", "get_unavailable_offerings"),
}
_DOCUMENTS = ("version_commands", "get_documents")
_COMMANDS = {
    "diff": ("file_diffs", "diff"),
    "describe": ("describe_commands", "describe"),
    "usage": ("usage_command", "usage"),
    "top": ("top", "top"),
    "web": ("web_server", "web"),
}
_DELETE = ("config_commands", "delete")
_DELETE_FILES = ("file_deletes", "delete_files")


def _command(args: argparse.Namespace) -> Command:
    if args.command == "get":
        return _load(*(_DOCUMENTS if _documents_asked(args) else _GETS[args.resource]))
    if args.command == "delete":
        return _load(*(_DELETE_FILES if args.filename else _DELETE))
    if args.command in _COMMANDS:
        return _load(*_COMMANDS[args.command])
    if args.command == "apply":
        return _load("config_commands", "apply")
    if args.command in ("submit", "status"):
        return _load("request_commands", args.command)
    run_deployed = plugins.by_name()[args.command].run_deployed
    assert run_deployed is not None  # main runs the others without a deployment
    return run_deployed


def _load(module: str, name: str) -> Command:
    command: Command = getattr(import_module(f"capacity_launcher_cli.{module}"), name)
    return command


# Types whose `get` takes several NAMEs; the others take one.
_MANY_NAMES = ("requests", "queues", "instances", "reservations", "unavailable-offerings")


def _refused(args: argparse.Namespace) -> str | None:
    """A `get` or `delete` whose flags cannot go together, as kubectl refuses them."""
    if args.command == "delete":
        if args.filename and args.kind:
            return "delete takes TYPE NAME or -f FILE, not both"
        if not args.filename and not (args.kind and args.name):
            return "delete takes TYPE NAME, or -f FILE"
        return None
    if args.command != "get":
        return None
    if len(args.names) > 1 and args.resource not in _MANY_NAMES:
        return f"get {args.resource} takes one NAME (several: {', '.join(_MANY_NAMES)})"
    if getattr(args, "field_selector", ()) and args.resource not in field_selectors.SELECTABLE:
        return (
            f"--field-selector selects {', '.join(field_selectors.SELECTABLE)}, not {args.resource}"
        )
    if not args.selector:
        return None
    if args.resource not in label_selectors.LABELLED:
        return f"{args.resource} carry no labels: -l selects {', '.join(label_selectors.LABELLED)}"
    if args.names:
        return "a NAME cannot be given with -l (a selector)"
    return None


def _watch(command: Command, args: argparse.Namespace, deployment: Deployment) -> int:
    from capacity_launcher_cli.output_formats import TABLES
    from capacity_launcher_cli.watch import watch

    if args.output not in (*TABLES, "name") or args.names:
        print("error: --watch lists rows: -o table, wide or name, and no NAME", file=sys.stderr)
        return 2
    return watch(command, args, deployment)


# Types whose listing (no NAME, no --output-version) is a table, and in these outputs; the rest
# of their outputs print the stored documents.
_LISTINGS = (*output_formats.TABLES, "json", "name", "jsonpath")
_LISTED_AS = {
    "nodepools": _LISTINGS,
    "nodeclasses": _LISTINGS,
    "ec2nodeclasses": output_formats.TABLES,
    "capacityquotas": _LISTINGS,
}


def _documents_asked(args: argparse.Namespace) -> bool:
    """`get` of configuration documents as YAML, by name in any output but a table (a NAME's
    table is its row, as kubectl prints it), or in a version: the stored objects. The types
    listed as documents are version_commands.RESOURCES', the keys of _LISTED_AS."""
    if args.resource not in _LISTED_AS:
        return False
    if args.output_version is not None:
        return True
    if args.name is not None:
        return args.output not in output_formats.TABLES
    output = args.output.split("=", 1)[0]  # jsonpath=TEMPLATE: jsonpath
    return output not in _LISTED_AS[args.resource]


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; a reader that stops reading (`| head`) ends it quietly, as kubectl's
    output to a closed pipe does, with no traceback. Without `argv` (the installed command) it
    is this process's own command line: the collector then stays off while the command's modules
    load (`_loaded`)."""
    if argv is None:
        _loading()
    try:
        code = _main(argv)
        sys.stdout.flush()  # a pipe closed early fails here, not at the interpreter's exit
        return code
    except BrokenPipeError:
        _quiet_stdout()
        return 0
    finally:
        _loaded()  # whichever way the command ended (an error, a command that loads no module)


def _loading() -> None:
    """Loading a command's modules makes objects by the hundred thousand and frees almost none:
    the cyclic collector, run every few thousand allocations, would scan them again and again
    (about a fifth of a short command's CPU). Off until `_loaded`."""
    gc.disable()
    _LOADING.append(True)


def _loaded() -> None:
    """The command's modules are loaded: what they made is kept out of the collector's scans
    from now on (gc.freeze), and it runs again as usual for what the command does, however long
    it runs."""
    if _LOADING:
        _LOADING.clear()
        gc.freeze()
        gc.enable()


_LOADING: list[bool] = []


def _quiet_stdout() -> None:
    """stdout's reader is gone: point it at /dev/null, so the interpreter's final flush has
    nowhere to fail (Python's documented idiom for SIGPIPE)."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _main(argv: Sequence[str] | None = None) -> int:
    args, own = _parsed(argv)
    plugin = None if own else plugins.by_name().get(args.command)
    if plugin is not None and plugin.run is not None:
        _loaded()
        return plugin.run(args)
    if args.command == "completion":
        from capacity_launcher_cli.completion import script

        print(script(parser(), args.shell))
        return 0
    if args.command == "convert":
        from capacity_launcher_cli.version_commands import convert

        return convert(args)
    if args.command == "explain":
        from capacity_launcher_cli.explain import explain

        return explain(args)
    if args.command == "schemas":
        from capacity_launcher_cli.schemas import schemas_command

        return schemas_command(args.write, args.directory, args.template)
    from botocore.exceptions import (
        BotoCoreError,
        ClientError,
        ConnectTimeoutError,
        EndpointConnectionError,
    )

    from capacity_launcher.domain.errors import CapacityLauncherError
    from capacity_launcher_cli.deployment import DeploymentNotFound, resolve
    from capacity_launcher_client.clients import load_sdk

    deployment = None
    # diff's 1 says "differences", as kubectl's and diff's: its errors exit 2.
    failed = 2 if args.command == "diff" else 1
    try:
        deployment = resolve(args.stack_name, args.region, args.local_file)
        # Found: the command calls AWS. The CRT is left out in the installed command's own
        # process only (a caller's may go on to call AWS itself): clients.load_sdk.
        load_sdk(local=deployment.is_local and argv is None)
        refused = _refused(args)
        if refused:
            print(f"error: {refused}", file=sys.stderr)
            return 2
        command = _command(args)
        _loaded()
        if args.command == "get" and args.watch:
            return _watch(command, args, deployment)
        return command(args, deployment)
    except DeploymentNotFound as error:
        print(f"error: {error}", file=sys.stderr)
        return failed
    except (EndpointConnectionError, ConnectTimeoutError) as error:
        print(f"error: {error}{_unreachable_hint(deployment)}", file=sys.stderr)
        return failed
    except (ClientError, BotoCoreError, CapacityLauncherError) as error:
        print(f"error: {error}", file=sys.stderr)
        return failed


def _unreachable_hint(deployment: Deployment | None) -> str:
    if deployment is not None and deployment.is_local:
        return ": is the local cloud running? (`capacity-launcher local up`)"
    return ""


if __name__ == "__main__":
    sys.exit(main())
