"""tests/support/template.py builds, in moto, exactly what template.yaml declares."""

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml
from moto import mock_aws

from local_cloud import template as template_module
from local_cloud.template import (
    DeployedNames,
    UnresolvedReferenceError,
    _Scope,
    create_resources,
    function_spec,
    launcher_event_source,
    load_template,
    resolve,
)

REPO = Path(__file__).resolve().parents[2]
REGION = "us-east-1"


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[boto3.Session]:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        yield boto3.Session(region_name=REGION)


@pytest.fixture
def deployed(aws: boto3.Session) -> DeployedNames:
    return create_resources(aws)


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_template()


def _documented_environment() -> set[str]:
    """The variables docs/architecture.md promises to the functions."""
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## Environment", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([A-Z0-9_]+)` \|", section, flags=re.MULTILINE))


# ---------------------------------------------------------------------------------- load_template
def test_short_form_intrinsics_are_read_as_their_long_form(tmp_path: Path) -> None:
    # Given a template using every short form
    path = tmp_path / "t.yaml"
    path.write_text(
        "Resources:\n"
        "  A:\n"
        "    Type: X\n"
        "    Properties:\n"
        "      Ref: !Ref B\n"
        "      Att: !GetAtt B.Arn\n"
        "      Sub: !Sub '${B}-x'\n"
        "      SubList: !Sub ['${V}', {V: !Ref B}]\n"
        "      If: !If [Cond, 1, !Ref AWS::NoValue]\n"
        "      Cond: !Condition Cond\n"
        "      Join: !Join ['', [a, b]]\n",
        encoding="utf-8",
    )
    # When it is loaded
    properties = load_template(path)["Resources"]["A"]["Properties"]
    # Then each is the long form CloudFormation itself uses
    assert properties["Ref"] == {"Ref": "B"}
    assert properties["Att"] == {"Fn::GetAtt": ["B", "Arn"]}
    assert properties["Sub"] == {"Fn::Sub": "${B}-x"}
    assert properties["SubList"] == {"Fn::Sub": ["${V}", {"V": {"Ref": "B"}}]}
    assert properties["If"] == {"Fn::If": ["Cond", 1, {"Ref": "AWS::NoValue"}]}
    assert properties["Cond"] == {"Condition": "Cond"}
    assert properties["Join"] == {"Fn::Join": ["", ["a", "b"]]}


def test_libyaml_reads_the_template_as_pure_python_yaml_does() -> None:
    # Given the template read by the loader load_template uses (libyaml's, when PyYAML has it)
    fast = load_template()

    # When it is read by PyYAML's pure-Python SafeLoader with the same intrinsic constructors
    class Slow(yaml.SafeLoader):
        pass

    Slow.add_multi_constructor("!", template_module._construct_intrinsic)
    slow = yaml.load((REPO / "template.yaml").read_text(encoding="utf-8"), Loader=Slow)
    # Then both read the same template
    assert fast == slow


def test_the_template_is_parsed_once_yet_each_caller_gets_its_own_copy(tmp_path: Path) -> None:
    # Given a template loaded once, and the copy it gave changed by its caller
    path = tmp_path / "t.yaml"
    path.write_text("Resources:\n  A:\n    Type: X\n", encoding="utf-8")
    first = load_template(path)
    first["Resources"]["A"]["Type"] = "changed"
    # When it is loaded again
    second = load_template(path)
    # Then the caller's change is not in it
    assert second["Resources"]["A"]["Type"] == "X"
    # And once the file changes, the change is read
    path.write_text("Resources:\n  B:\n    Type: YZ\n", encoding="utf-8")
    assert load_template(path)["Resources"] == {"B": {"Type": "YZ"}}


def test_a_document_without_resources_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text("just: text\n", encoding="utf-8")
    with pytest.raises(ValueError, match="not a CloudFormation template"):
        load_template(path)


def test_loading_never_runs_arbitrary_python_tags(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text("Resources: !!python/object/apply:os.system ['true']\n", encoding="utf-8")
    with pytest.raises(Exception, match="python/object"):
        load_template(path)


def test_resolve_substitutes_refs_attributes_and_escapes() -> None:
    scope = _Scope(refs={"B": "bee", "AWS::Region": "r"}, attributes={("Q", "Arn"): "arn:q"})
    assert resolve({"Fn::Sub": "${B}/${Q.Arn}/${AWS::Region}/${!Literal}"}, scope) == (
        "bee/arn:q/r/${Literal}"
    )
    assert resolve({"Fn::Sub": ["${V}-1", {"V": {"Ref": "B"}}]}, scope) == "bee-1"
    assert resolve({"Fn::Join": [":", ["a", {"Ref": "B"}]]}, scope) == "a:bee"
    with pytest.raises(UnresolvedReferenceError, match="Ref Missing"):
        resolve({"Ref": "Missing"}, scope)
    with pytest.raises(UnresolvedReferenceError, match="Fn::If"):
        resolve({"Fn::If": ["C", 1, 2]}, scope)


# ------------------------------------------------------------------------------- create_resources
def test_every_table_is_created_as_the_template_declares_it(
    aws: boto3.Session, deployed: DeployedNames, template: dict[str, Any]
) -> None:
    dynamodb = aws.client("dynamodb")
    tables = {
        logical_id: resource["Properties"]
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] == "AWS::DynamoDB::Table"
    }
    assert set(tables) == {"StateTable", "UnavailableOfferingsTable", "IdempotencyTable"}
    for logical_id, properties in tables.items():
        name = deployed.physical_ids[logical_id]
        described = dynamodb.describe_table(TableName=name)["Table"]
        assert described["KeySchema"] == properties["KeySchema"]
        assert sorted(described["AttributeDefinitions"], key=str) == sorted(
            properties["AttributeDefinitions"], key=str
        )
        assert described["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
        assert described["SSEDescription"]["Status"] == "ENABLED"
        ttl = dynamodb.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
        assert ttl["TimeToLiveStatus"] == "ENABLED"
        assert ttl["AttributeName"] == properties["TimeToLiveSpecification"]["AttributeName"]
        backups = dynamodb.describe_continuous_backups(TableName=name)
        pitr = backups["ContinuousBackupsDescription"]["PointInTimeRecoveryDescription"]
        assert pitr["PointInTimeRecoveryStatus"] == "ENABLED"


def test_table_keys_are_those_the_domain_and_powertools_use(
    aws: boto3.Session, deployed: DeployedNames
) -> None:
    dynamodb = aws.client("dynamodb")

    def keys(name: str) -> dict[str, str]:
        schema = dynamodb.describe_table(TableName=name)["Table"]["KeySchema"]
        return {key["AttributeName"]: key["KeyType"] for key in schema}

    def ttl(name: str) -> str:
        return str(
            dynamodb.describe_time_to_live(TableName=name)["TimeToLiveDescription"]["AttributeName"]
        )

    assert keys(deployed.state_table) == {"pk": "HASH", "sk": "RANGE"}
    assert ttl(deployed.state_table) == "ttl"
    assert keys(deployed.unavailable_offerings_table) == {"offering": "HASH"}
    assert ttl(deployed.unavailable_offerings_table) == "expiresAt"
    assert keys(deployed.idempotency_table) == {"id": "HASH"}
    assert ttl(deployed.idempotency_table) == "expiration"


def test_launch_queue_redrives_to_the_created_dead_letter_queue(
    aws: boto3.Session, deployed: DeployedNames, template: dict[str, Any]
) -> None:
    sqs = aws.client("sqs")
    declared = template["Resources"]["LaunchQueue"]["Properties"]
    queue = sqs.get_queue_attributes(QueueUrl=deployed.launch_queue_url, AttributeNames=["All"])[
        "Attributes"
    ]
    assert queue["QueueArn"] == deployed.launch_queue_arn
    assert int(queue["VisibilityTimeout"]) == declared["VisibilityTimeout"]
    assert queue["SqsManagedSseEnabled"] == "true"
    redrive = json.loads(queue["RedrivePolicy"])
    assert redrive == {"deadLetterTargetArn": deployed.dlq_arn, "maxReceiveCount": 5}
    dlq = sqs.get_queue_attributes(QueueUrl=deployed.dlq_url, AttributeNames=["All"])["Attributes"]
    assert dlq["QueueArn"] == deployed.dlq_arn
    assert dlq["MessageRetentionPeriod"] == "1209600"
    assert dlq["SqsManagedSseEnabled"] == "true"


def test_launch_requested_events_on_the_bus_reach_the_launch_queue_and_others_do_not(
    aws: boto3.Session, deployed: DeployedNames
) -> None:
    events, sqs = aws.client("events"), aws.client("sqs")
    # Given a launch request and a status event on the bus
    events.put_events(
        Entries=[
            {
                "EventBusName": deployed.event_bus,
                "Source": "team-a",
                "DetailType": detail_type,
                "Detail": json.dumps({"requestId": detail_type.replace(" ", "-")}),
            }
            for detail_type in ("Launch Requested", "Launch Fulfilled")
        ]
    )
    # When the launch queue is read
    messages = sqs.receive_message(
        QueueUrl=deployed.launch_queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0
    ).get("Messages", [])
    # Then only the request arrived, as a whole EventBridge event
    assert [json.loads(m["Body"])["detail"] for m in messages] == [
        {"requestId": "Launch-Requested"}
    ]


def test_rule_target_keeps_its_dead_letter_queue_and_retry_policy(
    aws: boto3.Session, deployed: DeployedNames
) -> None:
    events = aws.client("events")
    (target,) = events.list_targets_by_rule(
        Rule=deployed.physical_ids["LaunchRequestedRule"], EventBusName=deployed.event_bus
    )["Targets"]
    assert target["Arn"] == deployed.launch_queue_arn
    assert target["DeadLetterConfig"] == {"Arn": deployed.dlq_arn}
    assert target["RetryPolicy"]["MaximumRetryAttempts"] > 0


def test_clients_and_physical_names_can_be_given(aws: boto3.Session) -> None:
    clients = {name: aws.client(name) for name in ("dynamodb", "sqs", "events")}
    deployed = create_resources(
        clients, names={"StateTable": "my-state", "LaunchQueue": "my-queue"}, stack_name="e2e-1"
    )
    assert deployed.state_table == "my-state"
    assert deployed.launch_queue_url.endswith("/my-queue")
    assert deployed.idempotency_table == "e2e-1-IdempotencyTable"
    assert deployed.event_bus == "e2e-1-launch"


# ------------------------------------------------------------------------------------ environment
def test_environment_has_every_documented_variable_resolved(deployed: DeployedNames) -> None:
    environment = deployed.environment()
    documented = _documented_environment()
    assert documented, "docs/architecture.md lists no environment variables"
    assert documented <= set(environment)
    assert environment["STATE_TABLE_NAME"] == deployed.state_table
    assert environment["UNAVAILABLE_OFFERINGS_TABLE_NAME"] == deployed.unavailable_offerings_table
    assert environment["IDEMPOTENCY_TABLE_NAME"] == deployed.idempotency_table
    assert environment["EVENT_BUS_NAME"] == deployed.event_bus
    assert environment["ICE_TTL_SECONDS"] == "180"
    assert environment["POWERTOOLS_SERVICE_NAME"] == "capacity-launcher"
    assert environment["POWERTOOLS_METRICS_NAMESPACE"] == "CapacityLauncher"
    assert environment["POWERTOOLS_LOG_LEVEL"] == "INFO"
    assert all(isinstance(value, str) for value in environment.values())


def test_environment_follows_parameter_overrides(aws: boto3.Session) -> None:
    deployed = create_resources(aws, parameters={"IceTtlSeconds": 5, "LogLevel": "DEBUG"})
    environment = deployed.environment("launcher")
    assert environment["ICE_TTL_SECONDS"] == "5"
    assert environment["POWERTOOLS_LOG_LEVEL"] == "DEBUG"


# ------------------------------------------------------------------------------- function helpers
def test_launcher_event_source_reads_the_sqs_event(template: dict[str, Any]) -> None:
    assert launcher_event_source(template) == {
        "BatchSize": 10,
        "MaximumBatchingWindowInSeconds": template["Resources"]["LauncherFunction"]["Properties"][
            "Events"
        ]["LaunchRequests"]["Properties"]["MaximumBatchingWindowInSeconds"],
        "FunctionResponseTypes": ["ReportBatchItemFailures"],
        "MaximumConcurrency": 10,
    }


@pytest.mark.parametrize(
    ("name", "code_uri"),
    [
        ("LauncherFunction", "functions/launcher/"),
        ("launcher", "functions/launcher/"),
        ("reservation_sync", "functions/reservation_sync/"),
        ("InstanceEventsFunction", "functions/instance_events/"),
    ],
)
def test_function_spec_merges_globals(name: str, code_uri: str, template: dict[str, Any]) -> None:
    spec = function_spec(name, template)
    assert spec["CodeUri"] == code_uri
    assert spec["Handler"] == "app.handler"
    assert spec["Runtime"] == "python3.13"
    assert spec["Layers"] == [{"Ref": "CoreLayer"}]
    assert spec["Environment"]["STATE_TABLE_NAME"] == {"Ref": "StateTable"}
    assert isinstance(spec["Timeout"], int)


def test_function_spec_names_the_known_functions_when_asked_for_another() -> None:
    with pytest.raises(KeyError, match="LauncherFunction"):
        function_spec("nope")
