"""The local cloud: a moto server with the capacity extension, the template's resources, and its
functions wired to their triggers, all in this process.

Resources come from template.yaml itself (local_cloud.template); triggers are read from
each function's `Events`: SQS (the event source mapping), Schedule (a timer) and EventBridgeRule
(moto delivers matching events to a private queue, and each one invokes the function). A
function whose code folder has no handler yet is left unwired.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

import boto3
from moto.moto_api._internal.models import moto_api_backend
from moto.moto_server.threaded_moto_server import ThreadedMotoServer

import moto_capacity
from capacity_launcher.service import wiring
from capacity_launcher_cli.deployment import LOCAL_CREDENTIALS, Deployment
from local_cloud import function_output
from local_cloud.address import PortInUse
from local_cloud.event_sources import (
    Listener,
    QueueEventSource,
    QueueMapping,
    ScheduleEventSource,
    schedule_seconds,
)
from local_cloud.instance_state_events import EC2_SOURCE, InstanceStateEvents
from local_cloud.lambda_runtime import Invocation, LocalFunction
from local_cloud.network import prepare_network
from local_cloud.template import (
    DeployedNames,
    create_resources,
    default_template_path,
    load_template,
    parameter_defaults,
)
from moto_capacity.core.clock import CLOCK

DEFAULT_REGION = "us-east-1"
DEFAULT_PORT = 4566
# The template requires it; locally nothing assumes it.
LOCAL_INSTANCE_ROLE = "arn:aws:iam::123456789012:role/capacity-launcher-node"
# moto has no X-Ray; the handlers must not try to send traces.
LOCAL_FUNCTION_ENVIRONMENT = {"POWERTOOLS_TRACE_DISABLED": "true"}


class _Server(ThreadedMotoServer):
    """moto's threaded server, except that an address it cannot bind fails start() at once:
    moto's own start() waits forever for a server its thread never made."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(host, port, verbose=False)
        self._failure: BaseException | None = None

    def _server_entry(self) -> None:
        try:
            super()._server_entry()
        except (OSError, SystemExit) as failure:  # werkzeug exits when the port is taken
            self._failure = failure
            self._server_ready_event.set()

    def start(self) -> None:
        super().start()
        if self._failure is not None:
            reason = getattr(self._failure, "strerror", None) or "address already in use"
            raise PortInUse(self._ip_address, self._port, reason)


@dataclass
class LocalCloudOptions:
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT  # 0 picks a free port
    region: str = DEFAULT_REGION
    template_path: str | None = None
    parameters: Mapping[str, Any] = field(default_factory=dict)
    # Shorter than the template's so failed messages come back quickly (tests, demos).
    visibility_timeout_seconds: int | None = None
    schedules: bool = True
    # Synthesize EC2 state-change events for functions with an aws.ec2 rule (moto emits none).
    instance_events: bool = True
    function_logs: TextIO | None = None  # None: the functions' output is dropped


class LocalCloud:
    """Start with `start()` (or `with LocalCloud(...) as cloud:`), stop with `stop()`."""

    def __init__(self, options: LocalCloudOptions | None = None) -> None:
        self.options = options or LocalCloudOptions()
        self.functions: dict[str, LocalFunction] = {}
        self.queue_sources: list[QueueEventSource] = []
        self.schedules: list[ScheduleEventSource] = []
        self.instance_state_events: InstanceStateEvents | None = None
        self._server: ThreadedMotoServer | None = None
        self._ec2: Any = None
        self._saved_environment: dict[str, str] | None = None
        self._saved_clock: Callable[[], datetime] | None = None
        self.names: DeployedNames | None = None
        self.deployment: Deployment | None = None

    # -- lifecycle --

    def start(self) -> Deployment:
        # The functions' environment is process-wide while the cloud runs; stop() puts it back.
        self._saved_environment = dict(os.environ)
        moto_capacity.install()
        # The functions read the emulator's time, as they would read AWS's: advancing its clock
        # (POST /moto-capacity/clock) moves the launcher's deadlines and the sync's horizons too.
        self._saved_clock = wiring.utcnow
        wiring.utcnow = CLOCK.now
        self._server = _Server(self.options.host, self.options.port)
        try:
            self._server.start()
        except PortInUse:
            self._server = None  # nothing was served: moto's state is not ours to reset
            self.stop()
            raise
        host, port = self._server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        self._set_environment(
            {
                **LOCAL_CREDENTIALS,
                "AWS_ENDPOINT_URL": endpoint,
                "AWS_DEFAULT_REGION": self.options.region,
                "AWS_REGION": self.options.region,
            }
        )
        session = boto3.Session(region_name=self.options.region)
        parameters = {"InstanceRoleArn": LOCAL_INSTANCE_ROLE, **self.options.parameters}
        self.names = create_resources(
            session,
            endpoint_url=endpoint,
            parameters=parameters,
            template_path=self.options.template_path,
        )
        self._override_visibility(session.client("sqs", endpoint_url=endpoint))
        prepare_network(session.client("ec2", endpoint_url=endpoint))
        environments = self._wire(session, endpoint)
        self.deployment = Deployment(
            region=self.options.region,
            event_bus=self.names.event_bus,
            launch_queue_url=self.names.launch_queue_url,
            dead_letter_queue_url=self.names.dlq_url,
            state_table=self.names.state_table,
            unavailable_offerings_table=self.names.unavailable_offerings_table,
            idempotency_table=self.names.idempotency_table,
            ice_ttl_seconds=int(self.names.environment().get("ICE_TTL_SECONDS", 180)),
            limit_lease_seconds=int(self.names.environment().get("LIMIT_LEASE_SECONDS", 900)),
            endpoint_url=endpoint,
            environments=environments,
        )
        for queue_source in self.queue_sources:
            queue_source.start()
        for schedule in self.schedules:
            schedule.start()
        if self.instance_state_events is not None:
            self.instance_state_events.start()
        return self.deployment

    def stop(self) -> None:
        if self.instance_state_events is not None:
            self.instance_state_events.stop()
        for queue_source in self.queue_sources:
            queue_source.stop()
        for schedule in self.schedules:
            schedule.stop()
        if self._server is not None:
            self._server.stop()
            self._server = None
            # moto keeps its state per process: leave nothing for the next cloud or test.
            moto_api_backend.reset()
            moto_capacity.reset()
        function_output.release()
        if self._saved_clock is not None:
            wiring.utcnow = self._saved_clock
            self._saved_clock = None
        if self._saved_environment is not None:
            os.environ.clear()
            os.environ.update(self._saved_environment)
            self._saved_environment = None

    def __enter__(self) -> LocalCloud:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def endpoint_url(self) -> str:
        assert self.deployment is not None, "start() first"
        return str(self.deployment.endpoint_url)

    # -- wiring --

    def _set_environment(self, values: Mapping[str, str]) -> None:
        os.environ.update(values)

    def _override_visibility(self, sqs: Any) -> None:
        seconds = self.options.visibility_timeout_seconds
        if seconds is not None and self.names is not None:
            sqs.set_queue_attributes(
                QueueUrl=self.names.launch_queue_url,
                Attributes={"VisibilityTimeout": str(seconds)},
            )

    def _wire(self, session: boto3.Session, endpoint: str) -> dict[str, dict[str, str]]:
        assert self.names is not None
        template = load_template(self.options.template_path)
        root = Path(self.options.template_path or default_template_path()).resolve().parent
        parameters = {**parameter_defaults(template), **self.names.parameters}
        sqs = session.client("sqs", endpoint_url=endpoint)
        events = session.client("events", endpoint_url=endpoint)
        self._ec2 = session.client("ec2", endpoint_url=endpoint)
        environments: dict[str, dict[str, str]] = {}
        for logical_id, resource in template["Resources"].items():
            if resource.get("Type") != "AWS::Serverless::Function":
                continue
            environment = {
                **self.names.environment(logical_id),
                **LOCAL_FUNCTION_ENVIRONMENT,
                **{
                    k: os.environ[k]
                    for k in ("AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION")
                },
            }
            environments[logical_id] = environment
            properties = resource.get("Properties", {})
            handler_module = str(properties.get("Handler", "app.handler")).rpartition(".")[0]
            code = root / str(properties.get("CodeUri", "")) / f"{handler_module}.py"
            if not code.is_file():
                continue
            function = LocalFunction(
                logical_id,
                environment,
                template_path=self.options.template_path,
                region=self.options.region,
                account_id=self.names.account_id,
            )
            self.functions[logical_id] = function
            for event_name, event in properties.get("Events", {}).items():
                self._trigger(function, event_name, event, parameters, sqs, events)
        return environments

    def _trigger(
        self,
        function: LocalFunction,
        event_name: str,
        event: Mapping[str, Any],
        parameters: Mapping[str, Any],
        sqs: Any,
        events: Any,
    ) -> None:
        properties = event.get("Properties", {})
        listeners: list[Listener] = [self._notify]
        if event.get("Type") == "SQS":
            queue = _get_att_id(properties["Queue"])
            url = self._physical(queue)
            mapping = QueueMapping(
                queue_url=url,
                queue_arn=_queue_arn(sqs, url),
                batch_size=int(_value(properties.get("BatchSize", 10), parameters)),
                batching_window_seconds=float(
                    _value(properties.get("MaximumBatchingWindowInSeconds", 0), parameters)
                ),
                report_batch_item_failures="ReportBatchItemFailures"
                in properties.get("FunctionResponseTypes", []),
            )
            self.queue_sources.append(QueueEventSource(function, mapping, sqs, listeners))
        elif event.get("Type") == "Schedule" and self.options.schedules:
            seconds = schedule_seconds(str(properties["Schedule"]))
            rule_arn = (
                f"arn:aws:events:{self.options.region}:{function.account_id}:rule/"
                f"{function.logical_id}{event_name}"
            )
            self.schedules.append(ScheduleEventSource(function, seconds, rule_arn, listeners))
        elif event.get("Type") in ("EventBridgeRule", "CloudWatchEvent"):
            self.queue_sources.append(
                _rule_to_function(function, event_name, properties, sqs, events, listeners)
            )
            sources = properties.get("Pattern", {}).get("source", [])
            if EC2_SOURCE in sources and self.options.instance_events:
                self.instance_state_events = self.instance_state_events or InstanceStateEvents(
                    self._ec2, events, self.options.region, function.account_id
                )

    def _physical(self, logical_id: str) -> str:
        assert self.names is not None
        return str(self.names.physical_ids[logical_id])

    def _notify(self, invocation: Invocation) -> None:
        sink = self.options.function_logs
        if sink is not None and invocation.logs:
            sink.write(invocation.logs)
            sink.flush()
        if sink is not None and invocation.error:
            sink.write(
                f"[{invocation.function}] {invocation.error['errorType']}: "
                f"{invocation.error['errorMessage']}\n"
            )


def _rule_to_function(
    function: LocalFunction,
    event_name: str,
    properties: Mapping[str, Any],
    sqs: Any,
    events: Any,
    listeners: list[Listener],
) -> QueueEventSource:
    """An EventBridge rule whose target is a private queue; each event invokes the function."""
    name = f"{function.logical_id}{event_name}"
    url = sqs.create_queue(QueueName=f"local-{name}")["QueueUrl"]
    arn = _queue_arn(sqs, url)
    bus = str(properties.get("EventBusName", "default"))
    events.put_rule(Name=name, EventBusName=bus, EventPattern=json.dumps(properties["Pattern"]))
    events.put_targets(Rule=name, EventBusName=bus, Targets=[{"Id": "local", "Arn": arn}])
    mapping = QueueMapping(queue_url=url, queue_arn=arn, batch_size=1, deliver_body=True)
    return QueueEventSource(function, mapping, sqs, listeners)


def _get_att_id(value: Any) -> str:
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        return str(value["Fn::GetAtt"][0])
    raise ValueError(f"expected !GetAtt Queue.Arn, got {value!r}")


def _value(value: Any, parameters: Mapping[str, Any]) -> Any:
    if isinstance(value, dict) and "Ref" in value:
        return parameters[value["Ref"]]
    return value


def _queue_arn(sqs: Any, url: str) -> str:
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
    return str(attributes["Attributes"]["QueueArn"])
