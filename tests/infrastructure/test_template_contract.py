"""What other code and other teams rely on in template.yaml: names, settings and their relations."""

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from capacity_launcher.adapters.launch_records import WAITING, WAITING_INDEX
from capacity_launcher.domain.capacity.capacity_wait import (
    BACKSTOP_MARGIN_SECONDS,
    MAX_CHECK_SECONDS,
    QUEUE_RETRY_SECONDS,
)
from local_cloud.template import _Scope, function_spec, load_template, resolve

REPO = Path(__file__).resolve().parents[2]
FUNCTIONS = ("LauncherFunction", "ReservationSyncFunction", "InstanceEventsFunction")


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_template()


@pytest.fixture(scope="module")
def resources(template: dict[str, Any]) -> dict[str, Any]:
    return template["Resources"]  # type: ignore[no-any-return]


def _properties(resources: dict[str, Any], logical_id: str) -> dict[str, Any]:
    return resources[logical_id]["Properties"]  # type: ignore[no-any-return]


def test_parameters_and_their_defaults(template: dict[str, Any]) -> None:
    parameters = template["Parameters"]
    defaults = {name: spec.get("Default") for name, spec in parameters.items()}
    assert defaults | {"AlarmTopicArn": None} == {
        "Stage": "dev",
        "InstanceRoleArn": None,
        "NodeRolePrefix": "KarpenterNodeRole-",
        "IceTtlSeconds": 180,
        "RecordRetentionDays": 30,
        "LogLevel": "INFO",
        "LogRetentionDays": 30,
        "UtilizationHighThreshold": 0.9,
        "ExpiringHorizonHours": 72,
        "BlockExpiringMinutes": 60,
        # Capacity Reservation Underutilized: below half used at every look for 3 hours.
        "IdleUtilizationThreshold": 0.5,
        "IdlePeriodHours": 3,
        "LauncherMaxConcurrency": 10,
        "AlarmTopicArn": None,
        "OldestMessageAlarmSeconds": 900,
        "RunbookUrl": "docs/operations.md",
        # Every principal IAM allows may send straight to the launch queue, as before bindings.
        "LaunchQueueDirectSenders": "arn:*:iam::*:*",
        # Each published version initialises once; new environments resume from its snapshot.
        "SnapStart": "Enabled",
        # A stack owns the service's untagged (pre-stack) resources only when the operator says.
        "ClaimUntaggedResources": "false",
    }
    assert parameters["LauncherMaxConcurrency"]["MinValue"] == 2


def test_globals_carry_runtime_architecture_tracing_layer_and_powertools(
    template: dict[str, Any],
) -> None:
    function = template["Globals"]["Function"]
    assert function["Runtime"] == "python3.13"
    assert function["Architectures"] == ["arm64"]
    assert function["Tracing"] == "Active"
    assert function["Timeout"] == 120
    assert function["Layers"] == [{"Ref": "CoreLayer"}]
    variables = function["Environment"]["Variables"]
    assert variables["POWERTOOLS_SERVICE_NAME"] == "capacity-launcher"
    assert variables["POWERTOOLS_METRICS_NAMESPACE"] == "CapacityLauncher"
    assert variables["POWERTOOLS_LOG_LEVEL"] == {"Ref": "LogLevel"}
    assert variables["ICE_TTL_SECONDS"] == {"Ref": "IceTtlSeconds"}
    assert variables["RECORD_RETENTION_DAYS"] == {"Ref": "RecordRetentionDays"}


def test_snapstart_applies_to_each_functions_published_versions_unless_disabled(
    template: dict[str, Any],
) -> None:
    # Issue 35. https://docs.aws.amazon.com/lambda/latest/dg/snapstart.html ("Supported features
    # and limitations"): Python 3.12+ managed runtimes, published versions only; no provisioned
    # concurrency, EFS, or ephemeral storage over 512 MB (arm64 is not excluded any more).
    function = template["Globals"]["Function"]
    assert function["AutoPublishAlias"] == "live"
    assert function["SnapStart"] == {
        "ApplyOn": {"Fn::If": ["SnapStartEnabled", "PublishedVersions", "None"]}
    }
    assert template["Conditions"]["SnapStartEnabled"] == {
        "Fn::Equals": [{"Ref": "SnapStart"}, "Enabled"]
    }
    assert template["Parameters"]["SnapStart"]["AllowedValues"] == ["Enabled", "Disabled"]
    for name in FUNCTIONS:
        properties = _properties(template["Resources"], name)
        for unsupported in ("ProvisionedConcurrencyConfig", "FileSystemConfigs"):
            assert unsupported not in properties, (name, unsupported)
        assert properties.get("EphemeralStorage", {}).get("Size", 512) <= 512
        assert properties.get("Runtime", function["Runtime"]) >= "python3.12"


def test_layer_is_built_for_python_311_on_arm64(resources: dict[str, Any]) -> None:
    layer = resources["CoreLayer"]
    assert layer["Type"] == "AWS::Serverless::LayerVersion"
    # layers/core/Makefile: the arm64 wheels for CPython 3.13, then bytecode (test_layer_build)
    assert layer["Metadata"] == {"BuildMethod": "makefile", "BuildArchitecture": "arm64"}
    assert layer["Properties"]["ContentUri"] == "layers/core/"
    assert layer["Properties"]["CompatibleRuntimes"] == ["python3.13"]
    assert layer["Properties"]["CompatibleArchitectures"] == ["arm64"]


def test_launch_queue_outlasts_the_launcher_and_redrives_after_five_receives(
    resources: dict[str, Any],
) -> None:
    queue = _properties(resources, "LaunchQueue")
    assert queue["VisibilityTimeout"] >= 6 * function_spec("LauncherFunction")["Timeout"]
    assert queue["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": ["LaunchDeadLetterQueue", "Arn"]},
        "maxReceiveCount": 5,
    }
    assert _properties(resources, "LaunchDeadLetterQueue")["MessageRetentionPeriod"] == 1209600


def test_idempotency_window_is_longer_than_the_whole_retry_window(
    template: dict[str, Any], resources: dict[str, Any]
) -> None:
    queue = _properties(resources, "LaunchQueue")
    (target,) = _properties(resources, "LaunchRequestedRule")["Targets"]
    retry_window = (
        queue["VisibilityTimeout"] * queue["RedrivePolicy"]["maxReceiveCount"]
        + target["RetryPolicy"]["MaximumEventAgeInSeconds"]
    )
    window = template["Globals"]["Function"]["Environment"]["Variables"]["IDEMPOTENCY_TTL_SECONDS"]
    assert int(window) > retry_window


def test_the_wait_backstop_outlasts_a_held_delay_and_the_launch_queues_retries(
    resources: dict[str, Any],
) -> None:
    queue = _properties(resources, "LaunchQueue")
    retries = queue["VisibilityTimeout"] * queue["RedrivePolicy"]["maxReceiveCount"]
    assert retries <= QUEUE_RETRY_SECONDS
    assert MAX_CHECK_SECONDS + retries <= BACKSTOP_MARGIN_SECONDS


def test_the_sync_reads_waiting_records_through_a_sparse_index(resources: dict[str, Any]) -> None:
    table = _properties(resources, "StateTable")
    [index] = [i for i in table["GlobalSecondaryIndexes"] if i["IndexName"] == WAITING_INDEX]
    assert [k["AttributeName"] for k in index["KeySchema"]] == [WAITING, "waitingUntil"]
    types = {a["AttributeName"]: a["AttributeType"] for a in table["AttributeDefinitions"]}
    assert (types[WAITING], types["waitingUntil"]) == ("S", "N")


def test_launch_requests_rule_routes_only_launch_requested(resources: dict[str, Any]) -> None:
    rule = _properties(resources, "LaunchRequestedRule")
    assert rule["EventBusName"] == {"Ref": "LaunchBus"}
    assert rule["EventPattern"] == {"detail-type": ["Launch Requested"]}
    (target,) = rule["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": ["LaunchQueue", "Arn"]}


def test_only_listed_principals_the_rule_and_the_launcher_send_to_the_launch_queue(
    resources: dict[str, Any],
) -> None:
    # docs/quotas.md "Who is the requester?": a whole-event body from a sender no requester
    # binding lists is read as a bus delivery, so the queue must refuse other direct senders.
    statements = resources["LaunchQueuePolicy"]["Properties"]["PolicyDocument"]["Statement"]
    (deny,) = [s for s in statements if s["Effect"] == "Deny"]

    assert (deny["Principal"], deny["Action"]) == ("*", "sqs:SendMessage")
    assert deny["Resource"] == {"Fn::GetAtt": ["LaunchQueue", "Arn"]}
    assert deny["Condition"] == {
        "ArnNotLike": {"aws:PrincipalArn": {"Ref": "LaunchQueueDirectSenders"}},
        "ArnNotEquals": {
            # The launcher holds waiting requests; the sync and the instance events wake the
            # head of an admission queue (issue 37): none of them sends on a team's behalf.
            "aws:PrincipalArn": [
                {"Fn::GetAtt": ["LauncherFunctionRole", "Arn"]},
                {"Fn::GetAtt": ["ReservationSyncFunctionRole", "Arn"]},
                {"Fn::GetAtt": ["InstanceEventsFunctionRole", "Arn"]},
            ],
            "aws:SourceArn": {"Fn::GetAtt": ["LaunchRequestedRule", "Arn"]},
        },
    }


def test_launcher_consumes_the_queue_in_partial_batches(resources: dict[str, Any]) -> None:
    launcher = _properties(resources, "LauncherFunction")
    assert (launcher["CodeUri"], launcher["Handler"]) == ("functions/launcher/", "app.handler")
    (event,) = launcher["Events"].values()
    assert event["Type"] == "SQS"
    assert event["Properties"]["Queue"] == {"Fn::GetAtt": ["LaunchQueue", "Arn"]}
    assert event["Properties"]["BatchSize"] == 10
    assert event["Properties"]["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert event["Properties"]["ScalingConfig"] == {
        "MaximumConcurrency": {"Ref": "LauncherMaxConcurrency"}
    }


def test_reservation_sync_runs_every_minute_and_finishes_within_it(
    resources: dict[str, Any],
) -> None:
    sync = _properties(resources, "ReservationSyncFunction")
    assert sync["CodeUri"] == "functions/reservation_sync/"
    event = sync["Events"]["EveryMinute"]
    assert (event["Type"], event["Properties"]["Schedule"]) == ("Schedule", "rate(1 minute)")
    assert sync["Timeout"] < 60


def test_reservation_sync_refreshes_a_future_dated_reservation_on_its_state_events(
    resources: dict[str, Any],
) -> None:
    """EC2 User Guide, "Monitor state changes for future-dated Capacity Reservations"
    (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/monitor-fcr-state.html): the documented
    detail-types, and only those (the interruption warning goes to the instance events)."""
    sync = _properties(resources, "ReservationSyncFunction")
    assert set(sync["Events"]) == {"EveryMinute", "ReservationStateChange"}
    rule = sync["Events"]["ReservationStateChange"]
    assert rule["Type"] == "EventBridgeRule"
    pattern = rule["Properties"]["Pattern"]
    assert pattern["source"] == ["aws.ec2"]
    states = ("Scheduled", "Active", "Delayed", "Unsupported", "Failed", "Expired")
    assert pattern["detail-type"] == [f"EC2 Capacity Reservation {s}" for s in states]
    assert "DeadLetterConfig" in rule["Properties"]


def test_instance_events_listen_to_the_ec2_events_that_free_or_retake_capacity(
    resources: dict[str, Any],
) -> None:
    events = _properties(resources, "InstanceEventsFunction")
    assert events["CodeUri"] == "functions/instance_events/"
    patterns = [event["Properties"]["Pattern"] for event in events["Events"].values()]
    assert all(event["Type"] == "EventBridgeRule" for event in events["Events"].values())
    assert all(pattern["source"] == ["aws.ec2"] for pattern in patterns)
    by_type = {kind: pattern for pattern in patterns for kind in pattern["detail-type"]}
    assert set(by_type) == {
        "EC2 Instance State-change Notification",
        # Both spellings of EC2 User Guide, "Monitor interruptible Capacity Reservations with
        # EventBridge and CloudTrail".
        "EC2 Capacity Reservation Instance Interruption Warning",
        "EC2 Interruptible Capacity Reservation Instance Interruption Warning",
    }
    assert set(by_type["EC2 Instance State-change Notification"]["detail"]["state"]) == {
        "pending",
        "running",
        "stopping",
        "stopped",
        "shutting-down",
        "terminated",
    }


@pytest.mark.parametrize("function", FUNCTIONS)
def test_each_function_may_write_to_the_log_group_it_has(
    resources: dict[str, Any], function: str
) -> None:
    # Given the function's explicit name and its declared log group
    name = _properties(resources, function)["FunctionName"]["Fn::Sub"]
    log_group = _properties(resources, function.removesuffix("Function") + "LogGroup")
    assert log_group["LogGroupName"] == {"Fn::Sub": f"/aws/lambda/${{{function}}}"}
    assert log_group["RetentionInDays"] == {"Ref": "LogRetentionDays"}
    # Then its role writes to exactly that group
    policy = _properties(resources, f"{function}Role")["Policies"][0]["PolicyDocument"]
    (logs,) = (s for s in policy["Statement"] if s["Sid"] == "OwnLogGroup")
    assert logs["Resource"]["Fn::Sub"].endswith(f":log-group:/aws/lambda/{name}:*")


@pytest.mark.parametrize("table", ["StateTable", "UnavailableOfferingsTable", "IdempotencyTable"])
def test_tables_are_on_demand(resources: dict[str, Any], table: str) -> None:
    assert _properties(resources, table)["BillingMode"] == "PAY_PER_REQUEST"


OUTPUTS = (
    "LaunchBusName",
    "LaunchBusArn",
    "LaunchQueueUrl",
    "LaunchQueueArn",
    "LaunchDeadLetterQueueUrl",
    "StateTableName",
    "UnavailableOfferingsTableName",
    "IdempotencyTableName",
    "LauncherFunctionName",
    "ReservationSyncFunctionName",
    "InstanceEventsFunctionName",
    "DashboardName",
)


def test_every_client_name_is_an_exported_output(template: dict[str, Any]) -> None:
    outputs = template["Outputs"]
    assert set(OUTPUTS) <= set(outputs)
    for name, output in outputs.items():
        assert output["Export"]["Name"] == {"Fn::Sub": f"${{AWS::StackName}}-{name}"}


ALARM_METRICS = {
    "LaunchDeadLetterQueueNotEmptyAlarm": "ApproximateNumberOfMessagesVisible",
    "InstanceEventsDeadLetterQueueNotEmptyAlarm": "ApproximateNumberOfMessagesVisible",
    "ReservationSyncDeadLetterQueueNotEmptyAlarm": "ApproximateNumberOfMessagesVisible",
    "LaunchFailuresAlarm": "LaunchFailed",
    "ReservationUtilizationHighAlarm": "ReservationUtilization",
    "ReservationUnderutilizedAlarm": "ReservationsUnderutilized",
    "ReconciliationDriftAlarm": "ReconciliationDrift",
    "LauncherErrorsAlarm": "Errors",
    "ReservationSyncErrorsAlarm": "Errors",
    "InstanceEventsErrorsAlarm": "Errors",
    "LaunchDroppedAlarm": "LaunchDropped",
    "LaunchQueueOldestMessageAlarm": "ApproximateAgeOfOldestMessage",
}


def _runbook_anchors() -> set[str]:
    """GitHub's anchors of docs/operations.md's headings: lower case, spaces to hyphens, other
    punctuation dropped."""
    text = (REPO / "docs" / "operations.md").read_text(encoding="utf-8")
    headings = re.findall(r"^#+ (.+)$", text, flags=re.MULTILINE)
    return {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-") for h in headings}


def test_every_alarm_is_in_the_contract_and_links_its_runbook(resources: dict[str, Any]) -> None:
    alarms = {name for name, r in resources.items() if r["Type"] == "AWS::CloudWatch::Alarm"}
    assert alarms == set(ALARM_METRICS)
    anchors = _runbook_anchors()
    for alarm in sorted(alarms):
        description = _properties(resources, alarm)["AlarmDescription"]["Fn::Sub"]
        assert f"Runbook: ${{RunbookUrl}}#{alarm.lower()}" in description, alarm
        assert alarm.lower() in anchors, f"docs/operations.md has no section for {alarm}"
        assert len(description) <= 1024  # CloudWatch's limit on AlarmDescription
        assert _properties(resources, alarm)["AlarmActions"] == {
            "Fn::If": ["HasAlarmTopic", [{"Ref": "AlarmTopicArn"}], {"Ref": "AWS::NoValue"}]
        }


def test_an_empty_alarm_topic_is_said_loudly(template: dict[str, Any]) -> None:
    assert "NOBODY IS TOLD" in template["Parameters"]["AlarmTopicArn"]["Description"]
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "**With `AlarmTopicArn` empty (the default), no alarm notifies anyone.**" in readme


@pytest.mark.parametrize(("alarm", "metric"), ALARM_METRICS.items())
def test_alarms_watch_their_metric(resources: dict[str, Any], alarm: str, metric: str) -> None:
    properties = _properties(resources, alarm)
    assert resources[alarm]["Type"] == "AWS::CloudWatch::Alarm"
    watched = properties.get("MetricName") or properties["Metrics"][0]["Expression"]
    assert re.search(rf"\b{metric}\b", watched)
    assert properties["TreatMissingData"] == "notBreaching"


def test_launch_failures_alarm_uses_the_powertools_service_dimension(
    resources: dict[str, Any],
) -> None:
    alarm = _properties(resources, "LaunchFailuresAlarm")
    assert alarm["Namespace"] == "CapacityLauncher"
    assert alarm["Dimensions"] == [{"Name": "service", "Value": "capacity-launcher"}]


def test_dashboard_body_is_json_with_the_promised_widgets(resources: dict[str, Any]) -> None:
    variables = _properties(resources, "Dashboard")["DashboardBody"]["Fn::Sub"][1]
    body = _dashboard(resources)
    text = json.dumps(body)
    for metric in (
        "InstancesLaunched",
        "UnavailableOfferingHit",
        "UnavailableOfferingWrite",
        "ReservationUtilization",
        "ApproximateNumberOfMessagesVisible",
    ):
        assert metric in text
    (launches,) = (w for w in body["widgets"] if "InstancesLaunched" in json.dumps(w))
    capacity_types = [row[-1] for row in launches["properties"]["metrics"]]
    assert capacity_types == ["reserved", "on-demand", "spot"]
    assert {"LaunchQueueName", "LaunchDeadLetterQueueName"} <= set(variables)
    # What on-call needs: outcomes and latency by pool and by team, the oldest queued message,
    # dropped and dead-lettered requests, utilization, quota usage against nominal
    titles = {w["properties"]["title"]: json.dumps(w) for w in body["widgets"]}
    for title, metric, grouped_by in (
        ("Request outcomes by pool", "RequestOutcome", "GROUP BY nodePool, status"),
        ("Request outcomes by team (requester)", "RequestOutcome", "GROUP BY requester, status"),
        ("Request latency by pool", "RequestLatency", "GROUP BY nodePool"),
        ("Request latency by team", "RequestLatency", "GROUP BY requester"),
        ("Reservation utilization", "ReservationUtilization", "GROUP BY reservationId"),
        ("Quota usage against nominal", "QuotaUsageOfNominal", "GROUP BY quota, resource"),
        ("Idle reservation instance-hours", "ReservationIdleInstanceHours", "BY reservationId"),
        ("Reservations underutilized", "ReservationsUnderutilized", "SUM"),
    ):
        (widget,) = (w for t, w in titles.items() if t.startswith(title))
        assert metric in widget and grouped_by in widget, title
    assert "ApproximateAgeOfOldestMessage" in titles["Launch queue: oldest message (seconds)"]
    dropped = titles["Dropped and dead-lettered"]
    assert "LaunchDropped" in dropped
    for queue in ("LaunchDeadLetterQueueName", "InstanceEventsDeadLetterQueueName",
                  "ReservationSyncDeadLetterQueueName"):  # fmt: skip
        assert queue in variables
    assert dropped.count("ApproximateNumberOfMessagesVisible") == 3


def _dashboard(resources: dict[str, Any]) -> dict[str, Any]:
    pattern, variables = _properties(resources, "Dashboard")["DashboardBody"]["Fn::Sub"]
    scope = _Scope(
        refs={"AWS::Region": "us-east-1", "UtilizationHighThreshold": 0.9,
              "OldestMessageAlarmSeconds": 900, "IdleUtilizationThreshold": 0.5,
              "IdlePeriodHours": 3},
        attributes={},
    )  # fmt: skip
    body: dict[str, Any] = json.loads(
        resolve({"Fn::Sub": [pattern, dict.fromkeys(variables, "q")]}, scope)
    )
    return body


def test_the_dashboard_has_what_karpenter_s_has(resources: dict[str, Any]) -> None:
    """Issue 40: pool usage against its limit, latency percentiles (not only MAX), variables for
    pool and team, the ICE rate."""
    body = _dashboard(resources)
    widgets = {w["properties"]["title"]: w["properties"] for w in body["widgets"]}
    # Variables choose a pool and a team, offered from the metrics the service emits
    variables = {v["property"]: v for v in body["variables"]}
    assert set(variables) == {"nodePool", "requester"}
    for dimension, variable in variables.items():
        assert variable["type"] == "property" and variable["inputType"] == "select"
        assert variable["populateFrom"] == dimension
        assert variable["search"] == (
            f'{{CapacityLauncher,{dimension},service}} MetricName="RequestLatency"'
        )

    def rows(title: str) -> list[list[Any]]:
        (found,) = (w for t, w in widgets.items() if t.startswith(title))
        return list(found["metrics"])

    def stats(title: str) -> list[str]:
        return [row[-1]["stat"] for row in rows(title)]

    # Latency percentiles: over all requests, and of the chosen pool and team (each a dimension
    # set the launcher emits: telemetry.py), whose metric rows name the variable's dimension
    assert stats("Request latency, every request") == ["p50", "p90", "p99", "Maximum"]
    for title, dimension in (
        ("Request latency of the pool chosen", "nodePool"),
        ("Request latency of the team chosen", "requester"),
    ):
        assert stats(title) == ["p50", "p90", "p99"]
        first = rows(title)[0]
        assert first[:3] == ["CapacityLauncher", "RequestLatency", dimension]
    # Pool usage against its limits: every pool, and each resource of the chosen pool
    assert (
        "FROM SCHEMA(CapacityLauncher, nodePool, resource, service) GROUP BY nodePool"
        in (rows("Pool usage against its limits, every pool")[0][0]["expression"])
    )
    chosen = rows("Usage against its limits of the pool chosen")
    assert [row[5] for row in chosen] == ["cpu", "memory", "nvidia.com/gpu", "instances"]
    assert {row[1] for row in chosen} == {"PoolUsageOfLimit"}
    # The ICE rate: offerings EC2 found dry per CreateFleet call, of metrics the launcher emits
    ice = rows("ICE rate")
    shown = [r for r in ice if r[-1].get("visible", True)]
    assert [r[-1]["expression"] for r in shown] == ["IF(calls > 0, dry / calls, 0)"]
    assert "UnavailableOfferingWrite" in json.dumps(ice) and "CreateFleetCalls" in json.dumps(ice)


def test_samconfig_deploys_with_iam_capability_and_a_changeset_review() -> None:
    config = tomllib.loads((REPO / "samconfig.toml").read_text(encoding="utf-8"))["default"]
    assert config["global"]["parameters"]["stack_name"] == "capacity-launcher"
    deploy = config["deploy"]["parameters"]
    assert deploy["capabilities"] == "CAPABILITY_IAM"
    assert deploy["resolve_s3"] is True
    assert deploy["confirm_changeset"] is True
