"""`capacity-launcher invoke FUNCTION -e EVENT.json`: `sam local invoke` without Docker.

The function runs once in this process with its template environment resolved against the
deployment (the local cloud, or a stack's resources with your AWS credentials). Like SAM, the
result goes to stdout and the function's logs to stderr; `--env-vars` takes SAM's env.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from capacity_launcher_cli.emulator_clock import service_host
from capacity_launcher_client.deployment import LOCAL_CREDENTIALS, Deployment
from local_cloud import function_output
from local_cloud.lambda_runtime import LOCAL_FUNCTION_ENVIRONMENT, LocalFunction
from local_cloud.template import DeployedNames, function_spec, load_template


def function_environment(
    deployment: Deployment, logical_id: str, template_path: str | None
) -> dict[str, str]:
    """The local cloud recorded each function's environment; a stack's is resolved here."""
    if logical_id in deployment.environments:
        environment = dict(deployment.environments[logical_id])
    else:
        names = DeployedNames(
            state_table=deployment.state_table,
            unavailable_offerings_table=deployment.unavailable_offerings_table,
            idempotency_table=deployment.idempotency_table,
            event_bus=deployment.event_bus,
            launch_queue_url=deployment.launch_queue_url,
            launch_queue_arn="",
            dlq_url=deployment.dead_letter_queue_url,
            region=deployment.region,
            stack_name=deployment.stack_name or "capacity-launcher",
            template_path=template_path,
        )
        environment = names.environment(logical_id)
    # Lambda sets both; boto3 reads the second.
    environment.update({"AWS_REGION": deployment.region, "AWS_DEFAULT_REGION": deployment.region})
    if deployment.is_local:
        environment.update(
            {
                **LOCAL_CREDENTIALS,
                **LOCAL_FUNCTION_ENVIRONMENT,
                "AWS_ENDPOINT_URL": str(deployment.endpoint_url),
            }
        )
    return environment


def env_vars_overrides(path: str | None, logical_id: str) -> dict[str, str]:
    """SAM's env.json: "Parameters" for every function, then the function's own object."""
    if not path:
        return {}
    data: Mapping[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))
    merged = {**data.get("Parameters", {}), **data.get(logical_id, {})}
    return {name: str(value) for name, value in merged.items()}


def read_event(path: str) -> Any:
    text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    return json.loads(text)


# A usage error, as argparse exits for one.
EXIT_USAGE = 2


class InvokeUsageError(ValueError):
    """The function, the event file or the env.json cannot be used as given."""


def _inputs(args: argparse.Namespace, deployment: Deployment) -> tuple[str, dict[str, str], Any]:
    """The function's logical id, its environment and its event; InvokeUsageError names what
    cannot be read."""
    try:
        template = load_template(args.template)
    except OSError as error:
        raise InvokeUsageError(f"--template: {error.strerror}: {error.filename}") from None
    try:
        logical_id = function_spec(args.function, template)["LogicalId"]
    except KeyError as error:
        raise InvokeUsageError(str(error.args[0])) from None
    try:
        overrides = env_vars_overrides(args.env_vars, logical_id)
    except OSError as error:
        raise InvokeUsageError(f"--env-vars: {error.strerror}: {error.filename}") from None
    except ValueError as error:
        raise InvokeUsageError(f"--env-vars {args.env_vars}: not JSON: {error}") from None
    try:
        event = read_event(args.event) if args.event else {}
    except OSError as error:
        raise InvokeUsageError(f"-e/--event: {error.strerror}: {error.filename}") from None
    except ValueError as error:
        raise InvokeUsageError(f"-e/--event {args.event}: not JSON: {error}") from None
    environment = {**function_environment(deployment, logical_id, args.template), **overrides}
    return logical_id, environment, event


def invoke(args: argparse.Namespace, deployment: Deployment) -> int:
    try:
        logical_id, environment, event = _inputs(args, deployment)
    except InvokeUsageError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USAGE
    saved = {name: os.environ.get(name) for name in environment}
    try:
        # On the local cloud's clock, as `local up` runs its functions (a handler may build its
        # service when it is loaded).
        function = LocalFunction(
            logical_id,
            environment,
            template_path=args.template,
            region=deployment.region,
            host=service_host(deployment),
        )
        invocation = function.invoke(event)
    finally:
        function_output.release()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    sys.stderr.write(invocation.logs)
    sys.stderr.write(
        f"END RequestId: {invocation.request_id}\n"
        f"REPORT RequestId: {invocation.request_id}\tDuration: {invocation.duration_ms:.2f} ms\n"
    )
    if invocation.error is not None:
        sys.stdout.write(json.dumps(invocation.error) + "\n")
        return 1
    sys.stdout.write(json.dumps(invocation.result) + "\n")
    return 0
