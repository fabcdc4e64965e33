"""cfn-lint rules that keep template.yaml's habits from quietly regressing.

Loaded through `append_rules` in .cfnlintrc.yaml. The fuller least-privilege checks run on the
transformed template in tests/infrastructure/test_least_privilege.py; these give the same
feedback at lint time, in the editor, on the template as written.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from cfnlint.rules import CloudFormationLintRule, RuleMatch

# Keys under which a template names where failures go.
_FAILURE_DESTINATION_KEYS = {
    "deadLetterTargetArn",
    "DeadLetterConfig",
    "OnFailure",
    "DeadLetterQueue",
}
_POLICY_RESOURCE_TYPES = ["AWS::IAM::Role", "AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"]


def _referenced_ids(value: Any) -> Iterator[str]:
    """Logical ids a value refers to through Ref, Fn::GetAtt or Fn::Sub."""
    if isinstance(value, list):
        for item in value:
            yield from _referenced_ids(item)
    elif isinstance(value, dict):
        for key, argument in value.items():
            if key == "Ref" and isinstance(argument, str):
                yield argument
            elif key == "Fn::GetAtt":
                yield (argument.split(".")[0] if isinstance(argument, str) else argument[0])
            elif key == "Fn::Sub":
                pattern = argument if isinstance(argument, str) else argument[0]
                yield from (part.split("}")[0].split(".")[0] for part in pattern.split("${")[1:])
            else:
                yield from _referenced_ids(argument)


def _failure_destinations(value: Any) -> Iterator[str]:
    if isinstance(value, list):
        for item in value:
            yield from _failure_destinations(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            if key in _FAILURE_DESTINATION_KEYS:
                yield from _referenced_ids(item)
            else:
                yield from _failure_destinations(item)


class QueueRedrivesOrIsDeadLetterQueue(CloudFormationLintRule):  # type: ignore[misc]
    """Serverless rule ES6000 only sees redrives written as intrinsics; this one sees them all."""

    id = "E9101"
    shortdesc = "Queue neither redrives nor is a dead-letter queue"
    description = (
        "Every SQS queue has a RedrivePolicy, or is where failures go: a redrive target, a rule "
        "target's DeadLetterConfig, or an on-failure destination"
    )
    source_url = "https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-dead-letter-queues.html"
    tags = ["sqs", "capacity-launcher"]

    def match(self, cfn: Any) -> list[RuleMatch]:
        dead_letter_queues = set(_failure_destinations(cfn.template.get("Resources", {})))
        return [
            RuleMatch(
                ["Resources", logical_id],
                f"Queue {logical_id} has no RedrivePolicy and is no dead-letter queue",
            )
            for logical_id, resource in cfn.get_resources(["AWS::SQS::Queue"]).items()
            if "RedrivePolicy" not in resource.get("Properties", {})
            and logical_id not in dead_letter_queues
        ]


class EncryptedAtRest(CloudFormationLintRule):  # type: ignore[misc]
    id = "E9102"
    shortdesc = "Queue or table not encrypted at rest, or table without point-in-time recovery"
    description = (
        "SQS queues set SqsManagedSseEnabled or KmsMasterKeyId; DynamoDB tables enable SSE and "
        "point-in-time recovery"
    )
    source_url = (
        "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/EncryptionAtRest.html"
    )
    tags = ["sqs", "dynamodb", "capacity-launcher"]

    def match(self, cfn: Any) -> list[RuleMatch]:
        matches = []
        for logical_id, resource in cfn.get_resources(["AWS::SQS::Queue"]).items():
            properties = resource.get("Properties", {})
            if properties.get("SqsManagedSseEnabled") is not True and not properties.get(
                "KmsMasterKeyId"
            ):
                matches.append(
                    RuleMatch(["Resources", logical_id], f"Queue {logical_id} unencrypted")
                )
        for logical_id, resource in cfn.get_resources(["AWS::DynamoDB::Table"]).items():
            properties = resource.get("Properties", {})
            if properties.get("SSESpecification", {}).get("SSEEnabled") is not True:
                matches.append(
                    RuleMatch(["Resources", logical_id], f"Table {logical_id} unencrypted")
                )
            pitr = properties.get("PointInTimeRecoverySpecification", {})
            if pitr.get("PointInTimeRecoveryEnabled") is not True:
                matches.append(
                    RuleMatch(
                        ["Resources", logical_id],
                        f"Table {logical_id} has no point-in-time recovery",
                    )
                )
        return matches


def _policy_statements(resource_type: str, properties: dict[str, Any]) -> Iterator[Any]:
    if resource_type == "AWS::IAM::Role":
        documents = [policy.get("PolicyDocument", {}) for policy in properties.get("Policies", [])]
    elif resource_type == "AWS::Serverless::Function":
        policies = properties.get("Policies", [])
        documents = policies if isinstance(policies, list) else [policies]
    else:
        documents = [properties.get("PolicyDocument", {})]
    for document in documents:
        if isinstance(document, dict):
            statements = document.get("Statement", [])
            yield from statements if isinstance(statements, list) else [statements]


class NoWildcardActions(CloudFormationLintRule):  # type: ignore[misc]
    """Serverless rule WS1003 catches '*' and 'service:*' on Lambda roles; this one catches any
    wildcard, and NotAction, in every identity policy."""

    id = "E9103"
    shortdesc = "Wildcard or NotAction in an IAM policy"
    description = (
        "IAM statements list their actions: no '*', 'service:*', 'service:Get*', NotAction"
    )
    source_url = (
        "https://docs.aws.amazon.com/IAM/latest/UserGuide/best-practices.html#grant-least-privilege"
    )
    tags = ["iam", "capacity-launcher"]

    def match(self, cfn: Any) -> list[RuleMatch]:
        matches = []
        types = [*_POLICY_RESOURCE_TYPES, "AWS::Serverless::Function"]
        for logical_id, resource in cfn.get_resources(types).items():
            for statement in _policy_statements(resource["Type"], resource.get("Properties", {})):
                if not isinstance(statement, dict) or statement.get("Effect") != "Allow":
                    continue
                actions = statement.get("Action", [])
                actions = actions if isinstance(actions, list) else [actions]
                wildcards = [a for a in actions if isinstance(a, str) and "*" in a]
                if wildcards or "NotAction" in statement:
                    matches.append(
                        RuleMatch(
                            ["Resources", logical_id],
                            f"{logical_id} allows {wildcards or 'NotAction'}",
                        )
                    )
        return matches
