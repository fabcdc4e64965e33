"""Where the service runs: names of its bus, queues and tables, and how to reach them.

Locally the local cloud writes them to `.capacity-launcher/local.json`; against AWS they are the
CloudFormation stack's outputs (`--stack-name`). AWS_ENDPOINT_URL, when set, wins over both.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from capacity_launcher_client import clients
from capacity_launcher_client.clients import LOCAL_CREDENTIALS as LOCAL_CREDENTIALS

if TYPE_CHECKING:  # boto3 and the service's settings load when a command first needs them
    import boto3

    from capacity_launcher.settings import Settings

DEFAULT_LOCAL_FILE = Path(".capacity-launcher") / "local.json"
# When neither --region, AWS_REGION / AWS_DEFAULT_REGION nor the profile names one.
DEFAULT_REGION = "us-east-1"
LOCAL_FILE_ENV_VAR = "CAPACITY_LAUNCHER_LOCAL_FILE"
# Stack output -> Deployment field.
STACK_OUTPUTS = {
    "LaunchBusName": "event_bus",
    "LaunchQueueUrl": "launch_queue_url",
    "LaunchDeadLetterQueueUrl": "dead_letter_queue_url",
    "StateTableName": "state_table",
    "UnavailableOfferingsTableName": "unavailable_offerings_table",
    "IdempotencyTableName": "idempotency_table",
}


class DeploymentNotFound(RuntimeError):
    """Neither a running local cloud nor a stack was named."""


@dataclass(frozen=True)
class Deployment:
    region: str
    event_bus: str
    launch_queue_url: str
    dead_letter_queue_url: str
    state_table: str
    unavailable_offerings_table: str
    idempotency_table: str
    ice_ttl_seconds: int = 180
    limit_lease_seconds: int = 900
    endpoint_url: str | None = None
    stack_name: str | None = None
    # Each function's environment (local clouds only): what `invoke` runs it with.
    environments: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    @property
    def is_local(self) -> bool:
        return self.endpoint_url is not None

    @property
    def target(self) -> clients.Target:
        return clients.Target(self.region, self.endpoint_url)

    def session(self) -> boto3.Session:
        """The process's session for this deployment's region and endpoint (clients.py)."""
        return clients.session(self.target)

    def client(self, service: str) -> Any:
        """The process's one client for `service` here, reused by every call (clients.py)."""
        return clients.client(self.target, service)

    @contextmanager
    def environment(self) -> Iterator[None]:
        """While inside, clients the service makes on its own (Powertools' SSM parameters, say)
        reach this deployment too: its region, and a local cloud's endpoint and credentials."""
        values = {"AWS_REGION": self.region, "AWS_DEFAULT_REGION": self.region}
        if self.is_local:
            values |= {**LOCAL_CREDENTIALS, "AWS_ENDPOINT_URL": str(self.endpoint_url)}
        saved = {name: os.environ.get(name) for name in values}
        os.environ.update(values)
        try:
            yield
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value

    def settings(self) -> Settings:
        """The service's settings for this deployment: what the composition root builds from."""
        from capacity_launcher.settings import Settings

        return Settings(
            state_table_name=self.state_table,
            unavailable_offerings_table_name=self.unavailable_offerings_table,
            idempotency_table_name=self.idempotency_table,
            event_bus_name=self.event_bus,
            ice_ttl_seconds=self.ice_ttl_seconds,
            limit_lease_seconds=self.limit_lease_seconds,
        )

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Deployment:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})


def local_file(path: str | os.PathLike[str] | None = None) -> Path:
    return Path(path or os.environ.get(LOCAL_FILE_ENV_VAR) or DEFAULT_LOCAL_FILE)


def write_local(deployment: Deployment, path: str | os.PathLike[str] | None = None) -> Path:
    target = local_file(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(deployment.to_json() + "\n", encoding="utf-8")
    return target


def read_local(path: str | os.PathLike[str] | None = None) -> Deployment | None:
    source = local_file(path)
    if not source.is_file():
        return None
    return Deployment.from_mapping(json.loads(source.read_text(encoding="utf-8")))


def from_stack(
    stack_name: str, region: str | None = None, cloudformation: Any | None = None
) -> Deployment:
    """Names from the stack's outputs, the ICE lifetime from its parameters. The region is
    `region`, else the environment's or the profile's, else us-east-1."""
    if cloudformation is None:
        import boto3

        session = boto3.Session(region_name=region)
        cloudformation = session.client(
            "cloudformation", region_name=session.region_name or DEFAULT_REGION
        )
    stack = cloudformation.describe_stacks(StackName=stack_name)["Stacks"][0]
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
    missing = sorted(set(STACK_OUTPUTS) - set(outputs))
    if missing:
        raise DeploymentNotFound(f"stack {stack_name} has no output(s) {', '.join(missing)}")
    parameters = {p["ParameterKey"]: p.get("ParameterValue") for p in stack.get("Parameters", [])}
    return Deployment.from_mapping(
        {
            "region": cloudformation.meta.region_name or DEFAULT_REGION,
            "stack_name": stack_name,
            "ice_ttl_seconds": int(parameters.get("IceTtlSeconds") or 180),
            **{name: outputs[output] for output, name in STACK_OUTPUTS.items()},
        }
    )


def resolve(
    stack_name: str | None = None,
    region: str | None = None,
    local_path: str | os.PathLike[str] | None = None,
) -> Deployment:
    """The deployment commands act on: the named stack, else the running local cloud."""
    if stack_name:
        deployment = from_stack(stack_name, region)
    else:
        found = read_local(local_path)
        if found is None:
            raise DeploymentNotFound(
                f"no local cloud found at {local_file(local_path)}: start one with "
                "`capacity-launcher local up`, or name a deployed stack with --stack-name"
            )
        deployment = found
    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    if endpoint and endpoint != deployment.endpoint_url:
        return Deployment.from_mapping({**asdict(deployment), "endpoint_url": endpoint})
    return deployment
