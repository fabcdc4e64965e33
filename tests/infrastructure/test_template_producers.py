"""The producers' least-privilege access (docs/producers.md): a managed policy the stack outputs,
granting launch requests on the bus and the queue, request records in the state table and the
stack's outputs, and nothing else."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from capacity_launcher.adapters.launch_records import request_pk
from local_cloud.template import load_template

REPO = Path(__file__).resolve().parents[2]


def _template() -> dict[str, Any]:
    return load_template(REPO / "template.yaml")


def test_the_producer_policy_grants_exactly_submit_and_read() -> None:
    policy = _template()["Resources"]["ProducerPolicy"]
    statements = {s["Sid"]: s for s in policy["Properties"]["PolicyDocument"]["Statement"]}

    assert policy["Type"] == "AWS::IAM::ManagedPolicy"
    assert {sid: (s["Effect"], s["Action"]) for sid, s in statements.items()} == {
        "PutLaunchRequests": ("Allow", "events:PutEvents"),
        "SendLaunchRequests": ("Allow", "sqs:SendMessage"),
        "ReadRequestRecords": ("Allow", "dynamodb:GetItem"),
        "ReadTheStackOutputs": ("Allow", "cloudformation:DescribeStacks"),
    }
    put = statements["PutLaunchRequests"]
    assert put["Resource"] == {"Fn::GetAtt": ["LaunchBus", "Arn"]}
    assert put["Condition"] == {"StringEquals": {"events:detail-type": "Launch Requested"}}
    assert statements["SendLaunchRequests"]["Resource"] == {"Fn::GetAtt": ["LaunchQueue", "Arn"]}
    read = statements["ReadRequestRecords"]
    assert read["Resource"] == {"Fn::GetAtt": ["StateTable", "Arn"]}
    (prefix,) = read["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"]
    # The client reads a request's record and body hash under its partition key, nothing else.
    assert request_pk("train-42").startswith(prefix.removesuffix("*"))
    assert not "NodePool#general".startswith(prefix.removesuffix("*"))
    stack = statements["ReadTheStackOutputs"]["Resource"]["Fn::Sub"]
    assert stack.endswith(":stack/${AWS::StackName}/*")


TEAM_TAG = "${aws:PrincipalTag/capacity-launcher-team}"


def test_a_teams_producer_policy_puts_only_its_teams_source_and_reads_its_records() -> None:
    """TeamProducerPolicy (docs/producers.md "One team, one source"): events:source pinned to
    capacity-launcher.team.<the role's team tag>, records only under <team>., no queue."""
    policy = _template()["Resources"]["TeamProducerPolicy"]
    statements = {s["Sid"]: s for s in policy["Properties"]["PolicyDocument"]["Statement"]}

    assert policy["Type"] == "AWS::IAM::ManagedPolicy"
    assert {sid: (s["Effect"], s["Action"]) for sid, s in statements.items()} == {
        "PutTheTeamsLaunchRequests": ("Allow", "events:PutEvents"),
        "ReadTheTeamsRequestRecords": ("Allow", "dynamodb:GetItem"),
        "ReadTheStackOutputs": ("Allow", "cloudformation:DescribeStacks"),
    }
    put = statements["PutTheTeamsLaunchRequests"]
    assert put["Resource"] == {"Fn::GetAtt": ["LaunchBus", "Arn"]}
    assert put["Condition"] == {
        "StringEquals": {
            "events:detail-type": "Launch Requested",
            "events:source": f"capacity-launcher.team.{TEAM_TAG}",
        }
    }
    read = statements["ReadTheTeamsRequestRecords"]
    assert read["Resource"] == {"Fn::GetAtt": ["StateTable", "Arn"]}
    (pattern,) = read["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"]
    prefix = pattern.replace(TEAM_TAG, "team-a").removesuffix("*")
    assert request_pk("team-a.train-42").startswith(prefix)
    assert not request_pk("team-b.train-42").startswith(prefix)
    assert not request_pk("train-42").startswith(prefix)
    # An untagged role reads nothing (the variable would not resolve; Null says so outright).
    assert read["Condition"]["Null"] == {"aws:PrincipalTag/capacity-launcher-team": "false"}


def test_the_stack_outputs_the_policy_and_the_registry() -> None:
    outputs = _template()["Outputs"]

    assert outputs["ProducerPolicyArn"]["Value"] == {"Ref": "ProducerPolicy"}
    assert outputs["TeamProducerPolicyArn"]["Value"] == {"Ref": "TeamProducerPolicy"}
    assert outputs["EventSchemaRegistryName"]["Value"] == {
        "Fn::GetAtt": ["EventSchemaRegistry", "RegistryName"]
    }
