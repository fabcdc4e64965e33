"""The one place that reads template.yaml: tests and the local cloud build AWS resources from it.

Tables, queues, the event bus and its rules are created from the template's own properties, so
code and template cannot drift apart. Works with any boto3 clients: under moto's `mock_aws`, or
against a moto server (pass a session and `endpoint_url`). Needs PyYAML and boto3 only.
"""

from __future__ import annotations

import json
import os
import pickle
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

TEMPLATE_ENV_VAR = "CAPACITY_LAUNCHER_TEMPLATE"
DEFAULT_STACK_NAME = "capacity-launcher"
LAUNCHER_FUNCTION = "LauncherFunction"
DEFAULT_REGION = "us-east-1"
DEFAULT_ACCOUNT_ID = "123456789012"

# CloudFormation property -> SQS attribute, for the properties SetQueueAttributes understands.
_QUEUE_ATTRIBUTES = (
    "DelaySeconds",
    "MaximumMessageSize",
    "MessageRetentionPeriod",
    "ReceiveMessageWaitTimeSeconds",
    "VisibilityTimeout",
    "SqsManagedSseEnabled",
    "KmsMasterKeyId",
    "KmsDataKeyReusePeriodSeconds",
    "FifoQueue",
    "ContentBasedDeduplication",
    "RedrivePolicy",
)
_SUB_VARIABLE = re.compile(r"\$\{([^}!][^}]*)\}")


class UnresolvedReferenceError(ValueError):
    """An intrinsic refers to something this module does not create (e.g. a SAM-generated rule)."""


def default_template_path() -> Path:
    configured = os.environ.get(TEMPLATE_ENV_VAR)
    if configured:
        return Path(configured)
    return Path(__file__).resolve().parents[2] / "template.yaml"


# ------------------------------------------------------------------------------------------ YAML
# libyaml's parser (in PyYAML's wheels) reads the template about 8x faster than pure Python; the
# constructors, and so what the template becomes, are SafeLoader's either way.
try:
    from yaml import CSafeLoader as _SafeLoader
except ImportError:  # pragma: no cover - a PyYAML built without libyaml
    from yaml import SafeLoader as _SafeLoader  # type: ignore[assignment]


class _CloudFormationLoader(_SafeLoader):
    """SafeLoader that reads short-form intrinsics (!Ref, !GetAtt, !Sub, ...) as their long form."""


def _construct_intrinsic(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    value: Any
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
    if suffix == "Ref":
        return {"Ref": value}
    if suffix == "Condition":
        return {"Condition": value}
    if suffix == "GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    return {f"Fn::{suffix}": value}


_CloudFormationLoader.add_multi_constructor("!", _construct_intrinsic)


# Path -> (the file's mtime, size and inode; the template, pickled; the template, read only). The
# tests and the local cloud read the template several times per cloud: it is parsed once per
# process, for as long as the file stays the same, and each caller gets its own copy (unpickled),
# free to change it; this module's own readers that change nothing read the parse itself.
_PARSED: dict[Path, tuple[tuple[int, int, int], bytes, dict[str, Any]]] = {}


def load_template(path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The template as plain data, intrinsics in long form ({"Ref": ...}, {"Fn::Sub": ...})."""
    loaded: dict[str, Any] = pickle.loads(_parsed(path)[1])  # noqa: S301 - our own bytes
    return loaded


def template_version(
    path: str | os.PathLike[str] | None = None,
) -> tuple[Path, tuple[int, int, int]]:
    """The template file and the version of it `load_template` reads now (mtime, size, inode)."""
    file = Path(path or default_template_path()).resolve()
    stat = file.stat()
    return file, (stat.st_mtime_ns, stat.st_size, stat.st_ino)


def _parsed(
    path: str | os.PathLike[str] | None,
) -> tuple[tuple[int, int, int], bytes, dict[str, Any]]:
    file, version = template_version(path)
    cached = _PARSED.get(file)
    if cached is None or cached[0] != version:
        template = _parse(file)  # no one else holds it: kept as the read-only one
        cached = (version, pickle.dumps(template), template)
        _PARSED[file] = cached
    return cached


def read_only_template(path: str | os.PathLike[str] | None = None) -> Mapping[str, Any]:
    """The parse `load_template` copies, shared: for readers that change nothing in it."""
    return _parsed(path)[2]


def _parse(file: Path) -> dict[str, Any]:
    loader = _CloudFormationLoader(file.read_text(encoding="utf-8"))
    try:
        loaded = loader.get_single_data()
    finally:
        loader.dispose()
    if not isinstance(loaded, dict) or not isinstance(loaded.get("Resources"), dict):
        raise ValueError(f"{file} is not a CloudFormation template")
    return loaded


def _resources_of_type(template: Mapping[str, Any], type_: str) -> dict[str, dict[str, Any]]:
    return {
        logical_id: resource
        for logical_id, resource in template["Resources"].items()
        if resource.get("Type") == type_
    }


def parameter_defaults(template: Mapping[str, Any]) -> dict[str, Any]:
    return {
        name: spec["Default"]
        for name, spec in template.get("Parameters", {}).items()
        if "Default" in spec
    }


# ------------------------------------------------------------------------------------ intrinsics
@dataclass(frozen=True)
class _Scope:
    """What Ref and GetAtt resolve to: parameters, pseudo parameters and created resources."""

    refs: Mapping[str, Any]
    attributes: Mapping[tuple[str, str], str]

    def ref(self, name: str) -> Any:
        if name not in self.refs:
            raise UnresolvedReferenceError(f"Ref {name} is not known here")
        return self.refs[name]

    def attribute(self, logical_id: str, attribute: str) -> str:
        if (logical_id, attribute) not in self.attributes:
            raise UnresolvedReferenceError(f"GetAtt {logical_id}.{attribute} is not known here")
        return self.attributes[(logical_id, attribute)]


def _substitute(pattern: str, lookup: Callable[[str], Any]) -> str:
    resolved = _SUB_VARIABLE.sub(lambda match: str(lookup(match.group(1))), pattern)
    return resolved.replace("${!", "${")


def resolve(value: Any, scope: _Scope) -> Any:
    """Replace Ref, Fn::GetAtt, Fn::Sub and Fn::Join by their values; everything else as is."""
    if isinstance(value, list):
        return [resolve(item, scope) for item in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        ((key, argument),) = value.items()
        if key == "Ref":
            return scope.ref(argument)
        if key == "Fn::GetAtt":
            logical_id, attribute = argument
            return scope.attribute(logical_id, attribute)
        if key == "Fn::Join":
            delimiter, parts = argument
            return delimiter.join(str(part) for part in resolve(parts, scope))
        if key == "Fn::Sub":
            pattern, variables = (argument, {}) if isinstance(argument, str) else argument
            local = {name: resolve(item, scope) for name, item in variables.items()}

            def lookup(name: str) -> Any:
                if name in local:
                    return local[name]
                if "." in name:
                    return scope.attribute(*name.split(".", 1))
                return scope.ref(name)

            return _substitute(pattern, lookup)
        if key.startswith("Fn::"):
            raise UnresolvedReferenceError(f"{key} is not supported here")
    return {key: resolve(item, scope) for key, item in value.items()}


def _as_env_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# ------------------------------------------------------------------------------------- functions
def _function_logical_id(template: Mapping[str, Any], name: str) -> str:
    functions = _resources_of_type(template, "AWS::Serverless::Function")
    if name in functions:
        return name
    for logical_id, resource in functions.items():
        code_uri = str(resource.get("Properties", {}).get("CodeUri", ""))
        if Path(code_uri).name == name:
            return logical_id
    raise KeyError(f"no function {name!r} in the template; known: {sorted(functions)}")


def function_spec(name: str, template: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """How to run a function without Docker: CodeUri, Handler, Runtime, Timeout, MemorySize, Layers,
    and Environment (Globals merged with the function's own variables, intrinsics unresolved;
    `DeployedNames.environment(name)` gives them resolved). `name` is a logical id or the
    function's folder (`launcher` for functions/launcher/)."""
    template = template if template is not None else load_template()
    logical_id = _function_logical_id(template, name)
    globals_ = template.get("Globals", {}).get("Function", {})
    properties = template["Resources"][logical_id].get("Properties", {})
    merged = {**globals_, **properties}
    environment = {
        **globals_.get("Environment", {}).get("Variables", {}),
        **properties.get("Environment", {}).get("Variables", {}),
    }
    return {
        "LogicalId": logical_id,
        "CodeUri": merged["CodeUri"],
        "Handler": merged["Handler"],
        "Runtime": merged.get("Runtime"),
        "Timeout": merged.get("Timeout", 3),
        "MemorySize": merged.get("MemorySize", 128),
        "Layers": merged.get("Layers", []),
        "Environment": environment,
    }


def _parameter_scope(template: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    return {**parameter_defaults(template), **overrides}


def launcher_event_source(template: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The launcher's SQS event source settings, parameters resolved to their defaults."""
    template = template if template is not None else load_template()
    events = template["Resources"][LAUNCHER_FUNCTION]["Properties"]["Events"]
    (properties,) = (event["Properties"] for event in events.values() if event["Type"] == "SQS")
    scope = _Scope(refs=_parameter_scope(template, {}), attributes={})
    return {
        "BatchSize": resolve(properties.get("BatchSize", 10), scope),
        "MaximumBatchingWindowInSeconds": resolve(
            properties.get("MaximumBatchingWindowInSeconds", 0), scope
        ),
        "FunctionResponseTypes": list(properties.get("FunctionResponseTypes", [])),
        "MaximumConcurrency": resolve(
            properties.get("ScalingConfig", {}).get("MaximumConcurrency"), scope
        ),
    }


# ------------------------------------------------------------------------------------- deployed
@dataclass(frozen=True)
class DeployedNames:
    """Where the template's resources ended up, and the functions' environment pointing at them."""

    state_table: str
    unavailable_offerings_table: str
    idempotency_table: str
    event_bus: str
    launch_queue_url: str
    launch_queue_arn: str
    dlq_url: str
    dlq_arn: str = ""
    region: str = DEFAULT_REGION
    account_id: str = DEFAULT_ACCOUNT_ID
    stack_name: str = DEFAULT_STACK_NAME
    # Logical id -> what Ref returns (table and bus names, queue URLs) for everything created.
    physical_ids: Mapping[str, str] = field(default_factory=dict, compare=False)
    parameters: Mapping[str, Any] = field(default_factory=dict, compare=False)
    template_path: str | None = None

    def _refs(self) -> dict[str, str]:
        return {
            "StateTable": self.state_table,
            "UnavailableOfferingsTable": self.unavailable_offerings_table,
            "IdempotencyTable": self.idempotency_table,
            "LaunchBus": self.event_bus,
            "LaunchQueue": self.launch_queue_url,
            "LaunchDeadLetterQueue": self.dlq_url,
            **self.physical_ids,
        }

    def environment(self, function: str | None = None) -> dict[str, str]:
        """The function environment (Globals, plus `function`'s own variables when named), with
        references resolved to these resources and parameters to their defaults or overrides."""
        template = read_only_template(self.template_path)
        if function is None:
            raw = template.get("Globals", {}).get("Function", {}).get("Environment", {})
            variables = raw.get("Variables", {})
        else:
            variables = function_spec(function, template)["Environment"]
        scope = _Scope(
            refs={
                **_pseudo_parameters(self.region, self.account_id, self.stack_name),
                **_parameter_scope(template, self.parameters),
                **self._refs(),
            },
            attributes={},
        )
        return {name: _as_env_value(resolve(value, scope)) for name, value in variables.items()}


def _pseudo_parameters(region: str, account_id: str, stack_name: str) -> dict[str, str]:
    partition = "aws-cn" if region.startswith("cn-") else "aws"
    return {
        "AWS::Region": region,
        "AWS::AccountId": account_id,
        "AWS::Partition": partition,
        "AWS::StackName": stack_name,
        "AWS::URLSuffix": "amazonaws.com",
    }


def _clients(session_or_clients: Any, endpoint_url: str | None) -> dict[str, Any]:
    if isinstance(session_or_clients, Mapping):
        return {name: session_or_clients[name] for name in ("dynamodb", "sqs", "events")}
    return {
        name: session_or_clients.client(name, endpoint_url=endpoint_url)
        for name in ("dynamodb", "sqs", "events")
    }


def _physical_name(
    logical_id: str,
    properties: Mapping[str, Any],
    key: str,
    names: Mapping[str, str],
    scope: _Scope,
) -> str:
    if logical_id in names:
        return names[logical_id]
    if key in properties:
        return str(resolve(properties[key], scope))
    return f"{scope.ref('AWS::StackName')}-{logical_id}"


def _create_table(client: Any, name: str, properties: Mapping[str, Any]) -> None:
    request: dict[str, Any] = {
        "TableName": name,
        "KeySchema": properties["KeySchema"],
        "AttributeDefinitions": properties["AttributeDefinitions"],
        "BillingMode": properties.get("BillingMode", "PROVISIONED"),
    }
    if "ProvisionedThroughput" in properties:
        request["ProvisionedThroughput"] = properties["ProvisionedThroughput"]
    if "GlobalSecondaryIndexes" in properties:
        request["GlobalSecondaryIndexes"] = properties["GlobalSecondaryIndexes"]
    if properties.get("SSESpecification", {}).get("SSEEnabled"):
        request["SSESpecification"] = {"Enabled": True}
    client.create_table(**request)
    client.get_waiter("table_exists").wait(TableName=name)
    ttl = properties.get("TimeToLiveSpecification")
    if ttl and ttl.get("Enabled"):
        client.update_time_to_live(
            TableName=name,
            TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl["AttributeName"]},
        )
    pitr = properties.get("PointInTimeRecoverySpecification", {})
    if pitr.get("PointInTimeRecoveryEnabled"):
        client.update_continuous_backups(
            TableName=name,
            PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True},
        )


def _queue_order(queues: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Dead-letter queues before the queues that redrive to them."""

    def depends_on(logical_id: str) -> set[str]:
        text = json.dumps(queues[logical_id].get("Properties", {}).get("RedrivePolicy", {}))
        return {other for other in queues if f'"{other}"' in text}

    ordered: list[str] = []
    pending = list(queues)
    while pending:
        ready = [q for q in pending if depends_on(q) <= set(ordered)]
        if not ready:
            raise ValueError(f"queues redrive to each other: {pending}")
        ordered.extend(ready)
        pending = [q for q in pending if q not in ready]
    return ordered


def _queue_attributes(properties: Mapping[str, Any], scope: _Scope) -> dict[str, str]:
    attributes: dict[str, str] = {}
    for key in _QUEUE_ATTRIBUTES:
        if key not in properties:
            continue
        value = resolve(properties[key], scope)
        attributes[key] = json.dumps(value) if isinstance(value, dict) else _as_env_value(value)
    return attributes


def create_resources(
    session_or_clients: Any,
    names: Mapping[str, str] | None = None,
    *,
    endpoint_url: str | None = None,
    stack_name: str = DEFAULT_STACK_NAME,
    parameters: Mapping[str, Any] | None = None,
    template_path: str | os.PathLike[str] | None = None,
) -> DeployedNames:
    """Create the template's DynamoDB tables, SQS queues, event buses and rules (with targets).

    `session_or_clients` is a boto3 Session (clients made with `endpoint_url`, e.g. a moto
    server) or a mapping with "dynamodb", "sqs" and "events" clients. `names` maps logical ids to
    physical names; otherwise the template's own name is used, or "<stack_name>-<LogicalId>".
    Queue policies are not applied: they name SAM-generated rules, and moto does not enforce them.
    """
    names = dict(names or {})
    template = load_template(template_path)
    clients = _clients(session_or_clients, endpoint_url)
    region = clients["sqs"].meta.region_name or DEFAULT_REGION
    parameters = dict(parameters or {})
    refs: dict[str, Any] = {
        **_pseudo_parameters(region, DEFAULT_ACCOUNT_ID, stack_name),
        **_parameter_scope(template, parameters),
    }
    attributes: dict[tuple[str, str], str] = {}

    def scope() -> _Scope:
        return _Scope(refs=refs, attributes=attributes)

    for logical_id, resource in _resources_of_type(template, "AWS::DynamoDB::Table").items():
        properties = resource["Properties"]
        table = _physical_name(logical_id, properties, "TableName", names, scope())
        _create_table(clients["dynamodb"], table, properties)
        refs[logical_id] = table

    queues = _resources_of_type(template, "AWS::SQS::Queue")
    for logical_id in _queue_order(queues):
        properties = queues[logical_id].get("Properties", {})
        queue_name = _physical_name(logical_id, properties, "QueueName", names, scope())
        url = clients["sqs"].create_queue(
            QueueName=queue_name, Attributes=_queue_attributes(properties, scope())
        )["QueueUrl"]
        arn = clients["sqs"].get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        refs[logical_id] = url
        attributes[(logical_id, "Arn")] = arn
        attributes[(logical_id, "QueueName")] = queue_name
        attributes[(logical_id, "QueueUrl")] = url
        refs["AWS::AccountId"] = arn.split(":")[4]

    for logical_id, resource in _resources_of_type(template, "AWS::Events::EventBus").items():
        bus = _physical_name(logical_id, resource["Properties"], "Name", names, scope())
        bus_arn = clients["events"].create_event_bus(Name=bus)["EventBusArn"]
        refs[logical_id] = bus
        attributes[(logical_id, "Arn")] = bus_arn
        attributes[(logical_id, "Name")] = bus

    for logical_id, resource in _resources_of_type(template, "AWS::Events::Rule").items():
        properties = resolve(resource["Properties"], scope())
        rule = names.get(logical_id, properties.get("Name", f"{stack_name}-{logical_id}"))
        bus = properties.get("EventBusName", "default")
        rule_request = {
            "Name": rule,
            "EventBusName": bus,
            "State": properties.get("State", "ENABLED"),
        }
        if "Description" in properties:
            rule_request["Description"] = properties["Description"]
        if "EventPattern" in properties:
            rule_request["EventPattern"] = json.dumps(properties["EventPattern"])
        if "ScheduleExpression" in properties:
            rule_request["ScheduleExpression"] = properties["ScheduleExpression"]
        attributes[(logical_id, "Arn")] = clients["events"].put_rule(**rule_request)["RuleArn"]
        refs[logical_id] = rule
        if properties.get("Targets"):
            clients["events"].put_targets(
                Rule=rule, EventBusName=bus, Targets=properties["Targets"]
            )

    resources = template["Resources"]
    physical_ids = {logical_id: ref for logical_id, ref in refs.items() if logical_id in resources}
    return DeployedNames(
        state_table=refs["StateTable"],
        unavailable_offerings_table=refs["UnavailableOfferingsTable"],
        idempotency_table=refs["IdempotencyTable"],
        event_bus=refs["LaunchBus"],
        launch_queue_url=refs["LaunchQueue"],
        launch_queue_arn=attributes[("LaunchQueue", "Arn")],
        dlq_url=refs["LaunchDeadLetterQueue"],
        dlq_arn=attributes[("LaunchDeadLetterQueue", "Arn")],
        region=region,
        account_id=refs["AWS::AccountId"],
        stack_name=stack_name,
        physical_ids=physical_ids,
        parameters=parameters,
        template_path=str(template_path) if template_path is not None else None,
    )
