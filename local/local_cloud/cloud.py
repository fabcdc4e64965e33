"""The local cloud: moto with the capacity extension, the template's resources, and its functions
wired to their triggers, all in this process. It is the one builder of that cloud: the CLI's
`local up` serves it over HTTP; the integration tests (tests/support/cloud.py) and the
whole-system simulation (tests/simulation/world.py) run it in process (`in_process`: moto's
in-memory mock, no server) and drive the functions themselves.

Resources come from template.yaml itself (local_cloud.template); triggers are read from
each function's `Events`: SQS (the event source mapping), Schedule (a timer) and EventBridgeRule
(moto delivers matching events to a private queue, and each one invokes the function). A
function whose code folder has no handler yet is left unwired. Every function runs on the
cloud's `function_host`: the emulator's clock, unless the caller passes its own.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, TextIO

import boto3
from moto import mock_aws
from moto.moto_api._internal.models import moto_api_backend
from moto.moto_server.threaded_moto_server import ThreadedMotoServer

import moto_capacity
from capacity_launcher.adapters import aws
from capacity_launcher.service.wiring import Adapters
from capacity_launcher.settings import Settings, get_settings
from capacity_launcher.startup import Host
from capacity_launcher_client.deployment import LOCAL_CREDENTIALS, Deployment
from local_cloud import function_output, snapshot
from local_cloud.address import PortInUse
from local_cloud.event_sources import (
    Listener,
    QueueEventSource,
    QueueMapping,
    ScheduleEventSource,
    schedule_seconds,
)
from local_cloud.instance_state_events import (
    EC2_SOURCE,
    InstanceStateEvents,
    managed_instance_states,
)
from local_cloud.karpenter import alias_parameters, node_role
from local_cloud.lambda_runtime import LOCAL_FUNCTION_ENVIRONMENT, Invocation, LocalFunction
from local_cloud.network import prepare_network
from local_cloud.snapshot import Made
from local_cloud.status_events import capture_status_events
from local_cloud.template import (
    DEFAULT_ACCOUNT_ID,
    DEFAULT_STACK_NAME,
    DeployedNames,
    create_resources,
    default_template_path,
    parameter_defaults,
    read_only_template,
)
from moto_capacity.core.clock import CLOCK

DEFAULT_REGION = "us-east-1"
DEFAULT_PORT = 4566
# The template requires it; locally nothing assumes it.
LOCAL_INSTANCE_ROLE = "arn:aws:iam::123456789012:role/capacity-launcher-node"
# A served cloud's queue pollers wait in a long poll this long (one second: a message back from
# its visibility timeout is seen within it); in process they poll briefly and sleep.
SERVED_LONG_POLL_SECONDS = 1
# The functions read the emulator's time, as they would read AWS's: advancing its clock
# (POST /moto-capacity/clock) moves the launcher's deadlines and the sync's horizons too.
FUNCTION_HOST = Host(clock=CLOCK.now)


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
    # Moto in this process: its mock, no server, no endpoint.
    in_process: bool = False
    # This process on the launcher's environment, composing the service itself (`adapters()`):
    # for tests that call the service and drive the triggers themselves.
    as_launcher: bool = False
    # Load the functions and wire their triggers (started with the cloud); off, `function()`
    # still loads one on demand.
    wire_functions: bool = True
    # Tag the default subnets and add the nodes' security group the examples name.
    example_network: bool = True
    # What the functions tell the time by and wait with.
    function_host: Host = FUNCTION_HOST
    # EC2's eventual consistency (fresh instance ids, pending reservations), in emulator seconds.
    consistency_seconds: tuple[float, float] | None = None
    # Set in the process (and every function's environment) before the resources are made.
    environment: Mapping[str, str] = field(default_factory=dict)
    # Run once moto is up, before the resources are made (the simulation seeds it here).
    prepare: Callable[[], None] | None = None
    # False: the process ends with the cloud (a simulation run), so stop() leaves moto's state
    # as it is: resetting it makes EC2's backend and its image catalogue again (0.24 s of CPU).
    reset_on_stop: bool = True
    # The deployment's stack name (AWS::StackName: its resources' names, STACK_NAME).
    stack_name: str = DEFAULT_STACK_NAME
    # A queue of this name gets every status event on the service's bus, made with the resources
    # (local_cloud.status_events): `LocalCloud.status_events_url`.
    status_events_queue: str | None = None
    # In process, without `prepare`: the resources are made once per process, and copied from
    # what moto then held for each later cloud of the same inputs (local_cloud.snapshot).
    reuse_resources: bool = False


class LocalCloud:
    """Start with `start()` (or `with LocalCloud(...) as cloud:`), stop with `stop()`."""

    def __init__(self, options: LocalCloudOptions | None = None) -> None:
        self.options = options or LocalCloudOptions()
        self.functions: dict[str, LocalFunction] = {}
        self.queue_sources: list[QueueEventSource] = []
        # What the cloud changed from the template to keep the options consistent (`local up`
        # prints them).
        self.adjustments: list[str] = []
        self.schedules: list[ScheduleEventSource] = []
        self.instance_state_events: InstanceStateEvents | None = None
        self._server: ThreadedMotoServer | None = None
        self._mock: Any = None
        self._function_environments: dict[str, dict[str, str]] = {}
        self._saved_environment: dict[str, str] | None = None
        self.names: DeployedNames | None = None
        self.status_events_url: str | None = None
        self.deployment: Deployment | None = None

    # -- lifecycle --

    def start(self) -> Deployment:
        # The functions' environment is process-wide while the cloud runs; stop() puts it back.
        self._saved_environment = dict(os.environ)
        options = self.options
        os.environ.update(options.environment)
        moto_capacity.install()
        endpoint = self._start_moto()
        self._set_client_environment(endpoint)
        if options.consistency_seconds is not None:
            moto_capacity.set_consistency(*options.consistency_seconds)
        if options.prepare is not None:
            options.prepare()
        self._forget_process_caches()
        client = _clients(options.region, endpoint)
        made = self._make_resources(client)
        self.names, self.status_events_url = made.names, made.status_events_url
        if options.as_launcher:  # this process is the launcher's container
            self._set_environment(self.names.environment("LauncherFunction"))
            self._forget_process_caches()
        self._override_visibility(client)
        if options.example_network:
            ec2 = client("ec2")
            prepare_network(ec2)
            alias_parameters(ec2, DEFAULT_ACCOUNT_ID, options.region)
            node_role(client("iam"))
        self.deployment = self._deployment(endpoint, self._wire(client))
        for queue_source in self.queue_sources:
            queue_source.start()
        for schedule in self.schedules:
            schedule.start()
        if self.instance_state_events is not None:
            self.instance_state_events.start()
        return self.deployment

    def _make_resources(self, client: Callable[[str], Any]) -> Made:
        """The template's resources (and the status events' queue), made, or copied from what
        making them left in moto for an earlier cloud (`reuse_resources`)."""
        options = self.options
        parameters = {"InstanceRoleArn": LOCAL_INSTANCE_ROLE, **options.parameters}

        def make() -> Made:
            names = create_resources(
                {name: client(name) for name in ("dynamodb", "sqs", "events")},
                stack_name=options.stack_name,
                parameters=parameters,
                template_path=options.template_path,
            )
            queue = options.status_events_queue
            if queue is None:
                return Made(names, None)
            url = capture_status_events(client("sqs"), client("events"), names.event_bus, queue)
            return Made(names, url)

        if not (options.reuse_resources and options.in_process and options.prepare is None):
            return make()
        inputs = snapshot.key(
            options.region,
            options.stack_name,
            parameters,
            options.template_path,
            options.status_events_queue,
            options.environment,
        )
        return snapshot.made_once(inputs, make)

    def _deployment(
        self, endpoint: str | None, environments: dict[str, dict[str, str]]
    ) -> Deployment:
        assert self.names is not None
        return Deployment(
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

    def _set_client_environment(self, endpoint: str | None) -> None:
        """Clients made in this process reach this cloud: its server, or moto's mock."""
        self._set_environment(
            {
                **LOCAL_CREDENTIALS,
                "AWS_DEFAULT_REGION": self.options.region,
                "AWS_REGION": self.options.region,
            }
        )
        if endpoint is not None:
            self._set_environment({"AWS_ENDPOINT_URL": endpoint})
        else:
            os.environ.pop("AWS_ENDPOINT_URL", None)

    def _start_moto(self) -> str | None:
        """A moto server's endpoint, or None: moto's mock in this process."""
        if self.options.in_process:
            self._mock = mock_aws()
            self._mock.start()
            moto_capacity.reset()
            return None
        server = _Server(self.options.host, self.options.port)
        try:
            server.start()
        except PortInUse:
            self.stop()  # nothing was served: moto's state is not ours to reset
            raise
        self._server = server
        host, port = server.get_host_and_port()
        return f"http://{host}:{port}"

    def _forget_process_caches(self) -> None:
        """The service's clients and Settings in this process are this cloud's from now on."""
        if self.options.in_process or self.options.as_launcher:
            aws.client.cache_clear()
            get_settings.cache_clear()

    def stop(self) -> None:
        if self.instance_state_events is not None:
            self.instance_state_events.stop()
        for queue_source in self.queue_sources:  # their long polls end together, not in turn
            queue_source.halt()
        for queue_source in self.queue_sources:
            queue_source.stop()
        for schedule in self.schedules:
            schedule.stop()
        if self._server is not None or self._mock is not None:
            if self._server is not None:
                self._server.stop()
            self._server = None
            # moto keeps its state per process: leave nothing for the next cloud or test.
            if self.options.reset_on_stop:
                if self._mock is not None and self.options.reuse_resources:
                    snapshot.drop_backends()  # nothing to rebuild: the next cloud restores its own
                moto_api_backend.reset()
                moto_capacity.reset()
            if self._mock is not None:
                self._mock.stop(remove_data=self.options.reset_on_stop)
            self._mock = None
        self._forget_process_caches()
        function_output.release()
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

    def function(self, logical_id: str) -> LocalFunction:
        """A new container of a template function: a cold start, on the cloud's host."""
        assert self.names is not None, "start() first"
        return LocalFunction(
            logical_id,
            self._function_environments[logical_id],
            template_path=self.options.template_path,
            region=self.options.region,
            account_id=self.names.account_id,
            host=self.options.function_host,
        )

    def add_deployment(self, stack_name: str) -> DeployedNames:
        """Another stack of the template on this cloud, as a second deployment (dev beside prod)
        in the same account and Region: its own tables, queues and bus, the same EC2. Its
        functions are not wired: `deployment_adapters` composes its service in this process."""
        assert self.names is not None, "start() first"
        if stack_name == self.names.stack_name:
            raise ValueError(f"stack {stack_name} is deployed here already")
        session = boto3.Session(region_name=self.options.region)
        return create_resources(
            session,
            endpoint_url=self.deployment.endpoint_url if self.deployment else None,
            stack_name=stack_name,
            parameters={"InstanceRoleArn": LOCAL_INSTANCE_ROLE, **self.options.parameters},
            template_path=self.options.template_path,
        )

    def deployment_adapters(
        self, names: DeployedNames, pause: Callable[[float], None] | None = None
    ) -> Adapters:
        """What a container of another deployment's launcher composes (`add_deployment`), on
        the cloud's host: its settings are its own environment's, whatever this process's."""
        host = self.options.function_host
        environment = {k.lower(): v for k, v in names.environment("LauncherFunction").items()}
        settings = Settings.model_validate(environment)
        return Adapters(settings, aws.client, clock=host.clock, pause=pause or host.pause)

    def adapters(self, pause: Callable[[float], None] | None = None) -> Adapters:
        """What a container of the launcher composes, in this process, on the cloud's host
        (`pause` replaces its waits): only where this process is that container (`as_launcher`)."""
        assert self.options.as_launcher, "as_launcher clouds only"
        host = self.options.function_host
        return Adapters(get_settings(), aws.client, clock=host.clock, pause=pause or host.pause)

    # -- wiring --

    def _set_environment(self, values: Mapping[str, str]) -> None:
        os.environ.update(values)

    def _override_visibility(self, client: Callable[[str], Any]) -> None:
        seconds = self.options.visibility_timeout_seconds
        if seconds is not None and self.names is not None:
            client("sqs").set_queue_attributes(
                QueueUrl=self.names.launch_queue_url,
                Attributes={"VisibilityTimeout": str(seconds)},
            )

    def _wire(self, client: Callable[[str], Any]) -> dict[str, dict[str, str]]:
        assert self.names is not None
        template = read_only_template(self.options.template_path)
        root = Path(self.options.template_path or default_template_path()).resolve().parent
        parameters = {**parameter_defaults(template), **self.names.parameters}
        environments: dict[str, dict[str, str]] = {}
        for logical_id, resource in template["Resources"].items():
            if resource.get("Type") != "AWS::Serverless::Function":
                continue
            environment = {
                **self.options.environment,
                **self.names.environment(logical_id),
                **LOCAL_FUNCTION_ENVIRONMENT,
                **{
                    k: os.environ[k]
                    for k in ("AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION")
                    if k in os.environ
                },
            }
            environments[logical_id] = environment
            self._function_environments[logical_id] = environment
            properties = resource.get("Properties", {})
            handler_module = str(properties.get("Handler", "app.handler")).rpartition(".")[0]
            code = root / str(properties.get("CodeUri", "")) / f"{handler_module}.py"
            if not code.is_file() or not self.options.wire_functions:
                continue
            function = self.function(logical_id)
            self.functions[logical_id] = function
            for event_name, event in properties.get("Events", {}).items():
                self._trigger(
                    function, event_name, event, parameters, client("sqs"), client("events")
                )
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
            self._within_visibility(function, url)
            self.queue_sources.append(
                QueueEventSource(function, mapping, sqs, listeners, self._long_poll_seconds)
            )
        elif event.get("Type") == "Schedule" and self.options.schedules:
            seconds = schedule_seconds(str(properties["Schedule"]))
            rule_arn = (
                f"arn:aws:events:{self.options.region}:{function.account_id}:rule/"
                f"{function.logical_id}{event_name}"
            )
            self.schedules.append(ScheduleEventSource(function, seconds, rule_arn, listeners))
        elif event.get("Type") in ("EventBridgeRule", "CloudWatchEvent"):
            self.queue_sources.append(
                _rule_to_function(
                    function, event_name, properties, sqs, events, listeners,
                    self._long_poll_seconds,
                )
            )  # fmt: skip
            sources = properties.get("Pattern", {}).get("source", [])
            if EC2_SOURCE in sources and self.options.instance_events:
                self.instance_state_events = self.instance_state_events or InstanceStateEvents(
                    managed_instance_states(self.options.region, function.account_id),
                    events,
                    self.options.region,
                    function.account_id,
                )

    def _within_visibility(self, function: LocalFunction, queue_url: str) -> None:
        """A function the launch queue triggers runs within its visibility timeout, when that is
        overridden shorter than the function's timeout. Lambda refuses such an event source
        ("Queue visibility timeout ... is less than Function timeout", CreateEventSourceMapping:
        https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-configure.html); here the
        function's timeout follows the queue, so the idempotency claim a killed delivery leaves
        (held for the invocation's remaining time) lapses by the time its message returns, and
        the redelivery serves the request instead of spending its receives on the claim."""
        seconds = self.options.visibility_timeout_seconds
        if self.names is None or queue_url != self.names.launch_queue_url:
            return
        if seconds is None or seconds >= function.timeout_seconds:
            return
        self.adjustments.append(
            f"{function.logical_id}'s timeout lowered from {function.timeout_seconds} s to the "
            f"launch queue's visibility timeout, {seconds} s (AWS requires a function's timeout "
            "within its queue's visibility timeout): a killed delivery's claim lapses before "
            "its message returns"
        )
        function.timeout_seconds = seconds

    @property
    def _long_poll_seconds(self) -> int:
        return 0 if self.options.in_process else SERVED_LONG_POLL_SECONDS

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


def _clients(region: str, endpoint: str | None) -> Callable[[str], Any]:
    """The cloud's own clients (making its resources, wiring its triggers): one per service, of
    one session made with the first."""
    session = cache(lambda: boto3.Session(region_name=region))
    return cache(lambda name: session().client(name, endpoint_url=endpoint))


def _rule_to_function(
    function: LocalFunction,
    event_name: str,
    properties: Mapping[str, Any],
    sqs: Any,
    events: Any,
    listeners: list[Listener],
    long_poll_seconds: int,
) -> QueueEventSource:
    """An EventBridge rule whose target is a private queue; each event invokes the function."""
    name = f"{function.logical_id}{event_name}"
    url = sqs.create_queue(QueueName=f"local-{name}")["QueueUrl"]
    arn = _queue_arn(sqs, url)
    bus = str(properties.get("EventBusName", "default"))
    events.put_rule(Name=name, EventBusName=bus, EventPattern=json.dumps(properties["Pattern"]))
    events.put_targets(Rule=name, EventBusName=bus, Targets=[{"Id": "local", "Arn": arn}])
    mapping = QueueMapping(queue_url=url, queue_arn=arn, batch_size=1, deliver_body=True)
    return QueueEventSource(function, mapping, sqs, listeners, long_poll_seconds)


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
