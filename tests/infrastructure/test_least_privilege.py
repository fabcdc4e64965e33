"""Least privilege and failure handling, checked on the template as CloudFormation will see it.

Every check must pass on template.yaml, and every check must catch the regression it exists for:
each mutation below breaks a copy of the template in one way and names the check that must fail.
"""

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.infrastructure import policy_checks
from tests.infrastructure.policy_checks import ALL_CHECKS, statements, transform
from tests.support.template import load_template

Template = dict[str, Any]
Check = Callable[[Template], list[str]]


@pytest.fixture(scope="module")
def sam() -> Template:
    return load_template()


@pytest.fixture(scope="module")
def cfn(sam: Template) -> Template:
    return transform(sam)


@pytest.mark.parametrize("check", ALL_CHECKS, ids=lambda check: check.__name__)
def test_template_passes(check: Check, cfn: Template) -> None:
    assert check(cfn) == []


# ------------------------------------------- what each function needs is there (non-vacuous)
def _allowed(cfn: Template, role: str) -> set[str]:
    return {
        action
        for statement in statements(cfn)
        if statement.owner.startswith(f"{role}/") and statement.effect == "Allow"
        for action in statement.actions
    }


LAUNCHER_NEEDS = {
    "ec2:CreateFleet",
    "ec2:RunInstances",
    "ec2:CreateLaunchTemplate",
    "ec2:CreateTags",
    "ec2:TerminateInstances",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeInstanceTypeOfferings",
    "ec2:DescribeSubnets",
    "ec2:DescribeSecurityGroups",
    "ec2:DescribeCapacityReservations",
    "ec2:DescribeLaunchTemplates",
    "ec2:DescribeLaunchTemplateVersions",  # a NodeClass's launchTemplateName
    "ec2:DescribeInstances",
    "ec2:DescribeImages",
    "ssm:GetParameter",
    "resource-groups:ListGroupResources",
    "tag:GetResources",
    "iam:PassRole",
    "events:PutEvents",
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:Query",
    "sqs:ReceiveMessage",
    "sqs:DeleteMessage",
    "sqs:ChangeMessageVisibility",
    "sqs:GetQueueAttributes",
    "logs:PutLogEvents",
    "xray:PutTraceSegments",
}
SYNC_NEEDS = {
    "ec2:DescribeCapacityReservations",
    "ec2:DescribeCapacityBlockExtensionOfferings",  # capacityBlockEnd: Extend
    "ec2:PurchaseCapacityBlockExtension",
    "ec2:DescribeInstanceStatus",  # limits.unready: which members are ready
    "ec2:DescribeInstances",
    "ec2:DescribeLaunchTemplates",
    "ec2:DeleteLaunchTemplate",
    "ec2:CreateTags",
    "resource-groups:ListGroupResources",
    "tag:GetResources",
    "dynamodb:Query",
    "dynamodb:PutItem",
    "events:PutEvents",
    "sqs:SendMessage",
    "logs:PutLogEvents",
}
INSTANCE_EVENTS_NEEDS = {
    "dynamodb:GetItem",
    "dynamodb:UpdateItem",
    "events:PutEvents",
    "sqs:SendMessage",
    "logs:PutLogEvents",
}


@pytest.mark.parametrize(
    ("role", "needs"),
    [
        ("LauncherFunctionRole", LAUNCHER_NEEDS),
        ("ReservationSyncFunctionRole", SYNC_NEEDS),
        ("InstanceEventsFunctionRole", INSTANCE_EVENTS_NEEDS),
    ],
)
def test_each_function_is_granted_what_it_needs(cfn: Template, role: str, needs: set[str]) -> None:
    assert needs - _allowed(cfn, role) == set()


def test_only_the_launcher_mutates_ec2_or_passes_roles(cfn: Template) -> None:
    # The sync's mutations: an enforced quota reclaim terminates borrowed instances, and
    # reconciliation tags instances from their records (managed ones only:
    # untagged_ec2_mutations holds that condition like the launcher's), and the template
    # lifecycle deletes the launch templates the launcher created (managed ones only, too),
    # and a static pool's capacityBlockEnd buys a Capacity Block's extension.
    mutations = {
        "ReservationSyncFunctionRole": {
            "ec2:CreateTags",
            "ec2:TerminateInstances",
            "ec2:DeleteLaunchTemplate",
            "ec2:PurchaseCapacityBlockExtension",
        }
    }
    for role in ("ReservationSyncFunctionRole", "InstanceEventsFunctionRole"):
        granted = _allowed(cfn, role)
        found = {a for a in granted if a.startswith("ec2:") and "Describe" not in a}
        assert found == mutations.get(role, set())
        assert "iam:PassRole" not in granted


def test_every_function_has_its_own_role(cfn: Template) -> None:
    roles = policy_checks.function_roles(cfn)
    assert roles == {
        "LauncherFunction": "LauncherFunctionRole",
        "ReservationSyncFunction": "ReservationSyncFunctionRole",
        "InstanceEventsFunction": "InstanceEventsFunctionRole",
    }


# ------------------------------------------------------------------------ regressions are caught
def _statement(template: Template, role: str, sid: str) -> dict[str, Any]:
    policy = template["Resources"][role]["Properties"]["Policies"][0]
    (found,) = (s for s in policy["PolicyDocument"]["Statement"] if s.get("Sid") == sid)
    return found  # type: ignore[no-any-return]


def _sub(arn: str) -> dict[str, str]:
    return {"Fn::Sub": arn}


def _set(role: str, sid: str, key: str, value: Any) -> Callable[[Template], None]:
    def mutate(template: Template) -> None:
        _statement(template, role, sid)[key] = value

    return mutate


def _drop(path: tuple[str, ...]) -> Callable[[Template], None]:
    def mutate(template: Template) -> None:
        node = template
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]

    return mutate


def _drop_statement_key(role: str, sid: str, key: str) -> Callable[[Template], None]:
    def mutate(template: Template) -> None:
        del _statement(template, role, sid)[key]

    return mutate


def _add_statement(role: str, statement: dict[str, Any]) -> Callable[[Template], None]:
    def mutate(template: Template) -> None:
        policy = template["Resources"][role]["Properties"]["Policies"][0]
        policy["PolicyDocument"]["Statement"].append(statement)

    return mutate


def _producer_statement(
    sid: str, key: str, value: Any, policy: str = "ProducerPolicy"
) -> Callable[[Template], None]:
    def mutate(template: Template) -> None:
        document = template["Resources"][policy]["Properties"]["PolicyDocument"]
        (found,) = (s for s in document["Statement"] if s.get("Sid") == sid)
        found[key] = value

    return mutate


def _team_source_unpinned(template: Template) -> None:
    document = template["Resources"]["TeamProducerPolicy"]["Properties"]["PolicyDocument"]
    (found,) = (s for s in document["Statement"] if s.get("Sid") == "PutTheTeamsLaunchRequests")
    del found["Condition"]["StringEquals"]["events:source"]


def _team_source_pinned_to_any_team(template: Template) -> None:
    condition = template["Resources"]["LaunchBusTeamSourcesAreTheirTeams"]["Properties"]
    condition["Statement"]["Condition"]["StringNotEquals"]["events:source"] = (
        "capacity-launcher.team.*"
    )


def _add_managed_policy(template: Template) -> None:
    role = template["Resources"]["LauncherFunctionRole"]["Properties"]
    role["ManagedPolicyArns"] = [
        _sub("arn:${AWS::Partition}:iam::aws:policy/service-role/AWSLambdaSQSQueueExecutionRole")
    ]


def _condition_on_other_tag(template: Template) -> None:
    statement = _statement(template, "LauncherFunctionRole", "TerminateOnlyManagedInstances")
    statement["Condition"] = {"StringEquals": {"aws:ResourceTag/team": "true"}}


def _instances_as_unowned(template: Template) -> None:
    statement = _statement(template, "LauncherFunctionRole", "LaunchUsesUnownedResources")
    statement["Resource"].append(
        _sub("arn:${AWS::Partition}:ec2:${AWS::Region}:${AWS::AccountId}:instance/*")
    )


def _tag_anything(template: Template) -> None:
    statement = _statement(template, "LauncherFunctionRole", "TagOnlyWhileCreating")
    del statement["Condition"]["StringEquals"]["ec2:CreateAction"]


def _instance_events_reads_idempotency(template: Template) -> None:
    statement = _statement(template, "InstanceEventsFunctionRole", "StateAndCache")
    statement["Resource"].append({"Fn::GetAtt": ["IdempotencyTable", "Arn"]})


def _exempt_the_account(template: Template) -> None:
    condition = template["Resources"]["LaunchBusPolicy"]["Properties"]["Statement"]["Condition"]
    condition["ArnNotEquals"]["aws:PrincipalArn"].append(
        _sub("arn:${AWS::Partition}:iam::${AWS::AccountId}:root")
    )


def _rule_target(template: Template) -> dict[str, Any]:
    return template["Resources"]["LaunchRequestedRule"]["Properties"]["Targets"][0]  # type: ignore[no-any-return]


def _no_rule_dead_letters(template: Template) -> None:
    del _rule_target(template)["DeadLetterConfig"]


def _no_rule_retry(template: Template) -> None:
    del _rule_target(template)["RetryPolicy"]


def _unbounded_redrive(template: Template) -> None:
    template["Resources"]["LaunchQueue"]["Properties"]["RedrivePolicy"]["maxReceiveCount"] = 1000


LAUNCHER = "LauncherFunctionRole"
SYNC = "ReservationSyncFunctionRole"
EVENTS = "InstanceEventsFunctionRole"
INSTANCE_EVENTS_FN = ("Resources", "InstanceEventsFunction", "Properties")
MUTATIONS: list[tuple[str, Callable[[Template], None], Check]] = [
    (
        "service wildcard action",
        _set(LAUNCHER, "Idempotency", "Action", "dynamodb:*"),
        policy_checks.wildcard_actions,
    ),
    (
        "star action",
        _add_statement(EVENTS, {"Effect": "Allow", "Action": "*", "Resource": "*"}),
        policy_checks.wildcard_actions,
    ),
    (
        "partial wildcard action",
        _set(SYNC, "ReservationGroups", "Action", ["resource-groups:GetGroup*"]),
        policy_checks.wildcard_actions,
    ),
    (
        "NotAction",
        _add_statement(
            EVENTS, {"Effect": "Allow", "NotAction": "iam:CreateUser", "Resource": "arn:x"}
        ),
        policy_checks.wildcard_actions,
    ),
    (
        "resource star on a scopable action",
        _set(SYNC, "StateAndCache", "Resource", "*"),
        policy_checks.resource_star_beyond_unscopable_actions,
    ),
    (
        "create without the managed tag",
        _drop_statement_key(LAUNCHER, "CreateOnlyManagedResources", "Condition"),
        policy_checks.untagged_ec2_mutations,
    ),
    (
        "terminate on another tag",
        _condition_on_other_tag,
        policy_checks.untagged_ec2_mutations,
    ),
    (
        "launch template use without the managed tag",
        _drop_statement_key(LAUNCHER, "LaunchFromManagedLaunchTemplates", "Condition"),
        policy_checks.untagged_ec2_mutations,
    ),
    (
        "instances passed off as unowned",
        _instances_as_unowned,
        policy_checks.untagged_ec2_mutations,
    ),
    (
        "tagging outside creation",
        _tag_anything,
        policy_checks.untagged_ec2_mutations,
    ),
    (
        "retagging any instance",
        _drop_statement_key(LAUNCHER, "RetagManagedInstances", "Condition"),
        policy_checks.untagged_ec2_mutations,
    ),
    (
        "the sync buying extensions of anything but reservations",
        _set(SYNC, "ExtendCapacityBlocks", "Resource", "*"),
        policy_checks.untagged_ec2_mutations,
    ),
    (
        "the sync deleting any launch template",
        _drop_statement_key(SYNC, "DeleteOnlyManagedLaunchTemplates", "Condition"),
        policy_checks.untagged_ec2_mutations,
    ),
    (
        "the sync retagging any instance",
        _drop_statement_key(SYNC, "RetagManagedInstances", "Condition"),
        policy_checks.untagged_ec2_mutations,
    ),
    (
        "retagging instances by the tags in the request",
        _set(
            LAUNCHER,
            "RetagManagedInstances",
            "Condition",
            {"StringEquals": {"aws:RequestTag/capacity-launcher:managed": "true"}},
        ),
        policy_checks.untagged_ec2_mutations,
    ),
    (
        "pass any role",
        _set(LAUNCHER, "PassOnlyTheInstanceRole", "Resource", _sub("arn:aws:iam::1:role/*")),
        policy_checks.pass_role_violations,
    ),
    (
        "pass role to any service",
        _drop_statement_key(LAUNCHER, "PassOnlyTheInstanceRole", "Condition"),
        policy_checks.pass_role_violations,
    ),
    (
        "pass any role as a node role",
        _set(LAUNCHER, "PassOnlyNodeRoles", "Resource", _sub("arn:aws:iam::1:role/*")),
        policy_checks.pass_role_violations,
    ),
    (
        "pass a node role to any service",
        _drop_statement_key(LAUNCHER, "PassOnlyNodeRoles", "Condition"),
        policy_checks.pass_role_violations,
    ),
    (
        "create instance profiles anywhere",
        _set(
            LAUNCHER, "OwnInstanceProfiles", "Resource", _sub("arn:aws:iam::1:instance-profile/*")
        ),
        policy_checks.pass_role_violations,
    ),
    (
        "the sync deleting any instance profile",
        _set(
            SYNC, "DeleteOwnInstanceProfiles", "Resource", _sub("arn:aws:iam::1:instance-profile/*")
        ),
        policy_checks.pass_role_violations,
    ),
    (
        "other IAM action",
        _add_statement(EVENTS, {"Effect": "Allow", "Action": "iam:CreateRole", "Resource": "x"}),
        policy_checks.pass_role_violations,
    ),
    (
        "put events on the default bus",
        _set(
            SYNC,
            "PublishStatus",
            "Resource",
            _sub("arn:${AWS::Partition}:events:${AWS::Region}:${AWS::AccountId}:event-bus/default"),
        ),
        policy_checks.put_events_violations,
    ),
    (
        "put events with any source",
        _drop_statement_key(EVENTS, "PublishStatus", "Condition"),
        policy_checks.put_events_violations,
    ),
    (
        "producers may put status events",
        _producer_statement("PutLaunchRequests", "Condition", {}),
        policy_checks.put_events_violations,
    ),
    (
        "producers may put launch requests on the default bus",
        _producer_statement(
            "PutLaunchRequests",
            "Resource",
            _sub("arn:${AWS::Partition}:events:${AWS::Region}:${AWS::AccountId}:event-bus/default"),
        ),
        policy_checks.put_events_violations,
    ),
    (
        "producers may read every table",
        _producer_statement("ReadRequestRecords", "Resource", "*"),
        policy_checks.dynamodb_violations,
    ),
    (
        "a team's producers may put any source",
        _team_source_unpinned,
        policy_checks.put_events_violations,
    ),
    (
        "a team's producers may put status events",
        _producer_statement("PutTheTeamsLaunchRequests", "Condition", {}, "TeamProducerPolicy"),
        policy_checks.put_events_violations,
    ),
    (
        "untagged principals may put team sources",
        _drop(("Resources", "LaunchBusTeamSourcesNeedATeam")),
        policy_checks.team_sources_claimable_by_others,
    ),
    (
        "a team's principals may put another team's source",
        _team_source_pinned_to_any_team,
        policy_checks.team_sources_claimable_by_others,
    ),
    (
        "no bus policy",
        _drop(("Resources", "LaunchBusPolicy")),
        policy_checks.bus_source_claimable_by_others,
    ),
    (
        "bus policy exempting everyone in the account",
        _exempt_the_account,
        policy_checks.bus_source_claimable_by_others,
    ),
    (
        "dynamodb on every table",
        _set(
            LAUNCHER,
            "StateAndCache",
            "Resource",
            _sub("arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/*"),
        ),
        policy_checks.dynamodb_violations,
    ),
    (
        "dynamodb on a table the function does not use",
        _instance_events_reads_idempotency,
        policy_checks.dynamodb_violations,
    ),
    (
        "queue without encryption",
        _drop(("Resources", "LaunchQueue", "Properties", "SqsManagedSseEnabled")),
        policy_checks.unencrypted_stores,
    ),
    (
        "table without encryption",
        _drop(("Resources", "StateTable", "Properties", "SSESpecification")),
        policy_checks.unencrypted_stores,
    ),
    (
        "table without point-in-time recovery",
        _drop(("Resources", "IdempotencyTable", "Properties", "PointInTimeRecoverySpecification")),
        policy_checks.unencrypted_stores,
    ),
    (
        "function without log group",
        _drop(("Resources", "LauncherLogGroup")),
        policy_checks.functions_without_log_retention,
    ),
    (
        "log group without retention",
        _drop(("Resources", "InstanceEventsLogGroup", "Properties", "RetentionInDays")),
        policy_checks.functions_without_log_retention,
    ),
    (
        "launch queue without redrive",
        _drop(("Resources", "LaunchQueue", "Properties", "RedrivePolicy")),
        policy_checks.event_paths_without_failure_destination,
    ),
    (
        "launch queue redrive unbounded",
        _unbounded_redrive,
        policy_checks.event_paths_without_failure_destination,
    ),
    (
        "bus rule without dead letters",
        _no_rule_dead_letters,
        policy_checks.event_paths_without_failure_destination,
    ),
    (
        "bus rule without retry policy",
        _no_rule_retry,
        policy_checks.event_paths_without_failure_destination,
    ),
    (
        "launch queue that the rule may not write",
        _drop(("Resources", "LaunchQueuePolicy")),
        policy_checks.event_paths_without_failure_destination,
    ),
    (
        "dead-letter queue that the rule may not write",
        _drop(("Resources", "InstanceEventsDeadLetterQueuePolicy")),
        policy_checks.event_paths_without_failure_destination,
    ),
    (
        "instance event rule without dead letters",
        _drop(
            (*INSTANCE_EVENTS_FN, "Events", "InstanceStateChange", "Properties", "DeadLetterConfig")
        ),
        policy_checks.event_paths_without_failure_destination,
    ),
    (
        "async function without on-failure destination",
        _drop(("Resources", "ReservationSyncFunction", "Properties", "EventInvokeConfig")),
        policy_checks.event_paths_without_failure_destination,
    ),
    (
        "dead-letter queue without alarm",
        _drop(("Resources", "InstanceEventsDeadLetterQueueNotEmptyAlarm")),
        policy_checks.dead_letter_queues_without_alarm,
    ),
    (
        "managed policy",
        _add_managed_policy,
        policy_checks.managed_policies,
    ),
]


@pytest.mark.parametrize(
    ("mutate", "check"),
    [pytest.param(mutate, check, id=name) for name, mutate, check in MUTATIONS],
)
def test_regression_is_caught(
    sam: Template, mutate: Callable[[Template], None], check: Check
) -> None:
    # Given a copy of the template broken in one way
    broken = copy.deepcopy(sam)
    mutate(broken)
    # When it is checked
    violations = check(transform(broken))
    # Then the check names the regression
    assert violations


def test_every_check_has_a_regression_that_it_catches() -> None:
    assert {check for _, _, check in MUTATIONS} == set(ALL_CHECKS)


# ------------------------------------------------- nothing granted that no code can call
LAYER = Path(__file__).resolve().parents[2] / "layers" / "core" / "capacity_launcher"
# Actions a role grants that no line of the layer calls, each with who calls it.
CALLED_FOR_THE_CODE = {
    "sqs:ReceiveMessage": "the launch queue's event source mapping, with the launcher's role",
    "sqs:DeleteMessage": "the event source mapping, for what the batch reports done",
    "sqs:ChangeMessageVisibility": "the event source mapping, for hand-backs",
    "sqs:GetQueueAttributes": "the event source mapping",
    "logs:CreateLogStream": "the Lambda runtime, for the function's logs",
    "logs:PutLogEvents": "the Lambda runtime, for the function's logs",
    "xray:PutTraceSegments": "the Lambda runtime, with tracing active",
    "xray:PutTelemetryRecords": "the Lambda runtime, with tracing active",
    "ec2:RunInstances": "EC2 authorizes CreateFleet's instances (type instant) as RunInstances",
    "ssm:GetParameter": "Powertools' SSMProvider, for images named by a parameter",
    "iam:TagInstanceProfile": "IAM authorizes CreateInstanceProfile's Tags as TagInstanceProfile",
    "iam:PassRole": "EC2 checks it on CreateFleet / RunInstances for a template's instance profile",
    "tag:GetResources": "documented among ListGroupResources' minimum permissions",
    # Powertools idempotency (the launcher's request claims) reads and writes its own table.
    "dynamodb:GetItem": "Powertools idempotency and the stores",
    "dynamodb:PutItem": "Powertools idempotency and the stores",
    "dynamodb:UpdateItem": "Powertools idempotency and the stores",
    "dynamodb:DeleteItem": "Powertools idempotency and the stores",
}
# TransactWriteItems is authorized item by item, as the single-item action of each.
_TRANSACTION_ITEMS = {
    "ConditionCheck": "dynamodb:ConditionCheckItem",
    "Put": "dynamodb:PutItem",
    "Update": "dynamodb:UpdateItem",
    "Delete": "dynamodb:DeleteItem",
}


def _called_by_the_layer() -> set[str]:
    """`service:Operation` for every botocore operation whose snake_case name the layer's source
    holds (a client method, or a name handed to a paginator; names read from botocore's
    models)."""
    import re

    import botocore.session
    from botocore import xform_name

    source = "\n".join(p.read_text() for p in LAYER.rglob("*.py"))
    # Every identifier: client methods, and operation names handed to paginators and helpers.
    words = set(re.findall(r"[a-z][a-z0-9_]+", source))
    session = botocore.session.get_session()
    prefixes = {"resource-groups": "resource-groups", "resourcegroupstaggingapi": "tag"}
    called: set[str] = set()
    for service in ("ec2", "dynamodb", "events", "sqs", "ssm", "iam", "resource-groups",
                    "resourcegroupstaggingapi"):  # fmt: skip
        model = session.get_service_model(service)
        prefix = prefixes.get(service, service)
        called |= {f"{prefix}:{op}" for op in model.operation_names if xform_name(op) in words}
    if "dynamodb:TransactWriteItems" in called:
        called |= {a for item, a in _TRANSACTION_ITEMS.items() if f'"{item}"' in source}
    return called


def test_every_granted_action_is_one_the_code_calls(cfn: Template) -> None:
    # Given every action the functions' roles allow
    granted = {
        action
        for statement in statements(cfn)
        if statement.effect == "Allow" and not statement.not_action
        and statement.owner.split("/")[0] in set(policy_checks.function_roles(cfn).values())
        for action in statement.actions
    }  # fmt: skip
    # Then each is an operation the layer calls, or one AWS calls on its behalf: no grant is
    # left over from code that is gone
    assert granted - _called_by_the_layer() - set(CALLED_FOR_THE_CODE) == set()
