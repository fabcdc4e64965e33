"""Checks over the transformed (plain CloudFormation) template. Each returns its violations.

The template is transformed offline with aws-sam-translator, as `sam validate` does, so the checks
see what CloudFormation will deploy, SAM-generated resources included.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
from samtranslator.parser.parser import Parser
from samtranslator.translator.translator import Translator

MANAGED_TAG = "capacity-launcher:managed"
EVENT_SOURCE = "capacity-launcher"
INSTANCE_ROLE_PARAMETER = "InstanceRoleArn"
BUS = "LaunchBus"
# The managed policies producers' roles get (template.yaml): launch requests only.
PRODUCER_POLICY = "ProducerPolicy"
TEAM_PRODUCER_POLICY = "TeamProducerPolicy"
PRODUCER_POLICIES = (PRODUCER_POLICY, TEAM_PRODUCER_POLICY)
# A team's producers put events with this source and their role's team tag, nothing else.
TEAM_TAG = "capacity-launcher-team"
TEAM_SOURCE = f"{EVENT_SOURCE}.team.${{aws:PrincipalTag/{TEAM_TAG}}}"
TEAM_SOURCES = f"{EVENT_SOURCE}.team.*"
LAUNCH_REQUESTED = "Launch Requested"
TABLES_BY_FUNCTION = {
    "LauncherFunction": {"StateTable", "UnavailableOfferingsTable", "IdempotencyTable"},
    "ReservationSyncFunction": {"StateTable", "UnavailableOfferingsTable"},
    "InstanceEventsFunction": {"StateTable", "UnavailableOfferingsTable"},
}
# A launch uses these but never creates or owns them, so they carry no tag of ours; AWS's own
# Karpenter controller policy grants RunInstances/CreateFleet on them unconditioned, as we do.
UNOWNED_LAUNCH_RESOURCE_TYPES = {
    "image",
    "snapshot",
    "subnet",
    "security-group",
    "capacity-reservation",
    # The cluster placement group a reservation was created in: the user's, never ours.
    "placement-group",
}
UNOWNED_LAUNCH_ACTIONS = {"ec2:RunInstances", "ec2:CreateFleet"}
# Mutations of the operator's reservations (never ours, so never tagged managed): the sync buys
# a Capacity Block's extension when a static pool's capacityBlockEnd says so; only on
# capacity-reservation ARNs.
RESERVATION_MUTATIONS = {"ec2:PurchaseCapacityBlockExtension"}
TAGGING_CREATE_ACTIONS = {"RunInstances", "CreateFleet", "CreateLaunchTemplate"}
# Actions AWS cannot scope to a resource; the only ones allowed on Resource "*".
RESOURCE_STAR_ACTIONS = re.compile(
    r"^(ec2:Describe[A-Za-z]+|xray:Put(TraceSegments|TelemetryRecords)|tag:GetResources)$"
)
ASYNC_PRINCIPALS = {"events.amazonaws.com", "sns.amazonaws.com", "s3.amazonaws.com"}
READ_ONLY_EC2 = re.compile(r"^ec2:(Describe|Get|List)")


def transform(sam_template: dict[str, Any], region: str = "us-east-1") -> dict[str, Any]:
    """SAM -> CloudFormation, offline: local code paths become placeholder S3 URIs and managed
    policy names resolve to nothing (the template names none)."""
    template = copy.deepcopy(sam_template)
    for resource in template["Resources"].values():
        properties = resource.get("Properties", {})
        if resource["Type"] == "AWS::Serverless::Function":
            properties["CodeUri"] = "s3://placeholder/function.zip"
        if resource["Type"] == "AWS::Serverless::LayerVersion":
            properties["ContentUri"] = "s3://placeholder/layer.zip"
    translator = Translator(None, Parser(), boto_session=boto3.Session(region_name=region))
    translated: dict[str, Any] = translator.translate(
        template, parameter_values={}, get_managed_policy_map=dict
    )
    translator.metrics.publish()  # to its dummy publisher; unpublished metrics warn on exit
    return translated


# ----------------------------------------------------------------------------------- statements
@dataclass(frozen=True)
class Statement:
    owner: str  # "<logical id>/<policy name>"
    effect: str
    actions: tuple[str, ...]
    resources: tuple[str, ...]  # rendered: "*", "Ref:X", "GetAtt:X.Arn", or a Sub pattern
    condition: dict[str, Any]
    not_action: bool

    def allows(self, action: str) -> bool:
        return self.effect == "Allow" and action in self.actions

    def condition_equals(self, key: str) -> set[str]:
        values = self.condition.get("StringEquals", {}).get(key, [])
        return {render(value) for value in (values if isinstance(values, list) else [values])}


def render(value: Any) -> str:
    """An ARN or intrinsic as comparable text."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and len(value) == 1:
        ((key, argument),) = value.items()
        if key == "Ref":
            return f"Ref:{argument}"
        if key == "Fn::GetAtt":
            return "GetAtt:" + ".".join(argument if isinstance(argument, list) else [argument])
        if key == "Fn::Sub":
            return str(argument if isinstance(argument, str) else argument[0])
    return json.dumps(value, sort_keys=True)


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def _documents(cfn: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for logical_id, resource in cfn["Resources"].items():
        properties = resource.get("Properties", {})
        if resource["Type"] == "AWS::IAM::Role":
            for policy in properties.get("Policies", []):
                yield f"{logical_id}/{policy.get('PolicyName')}", policy["PolicyDocument"]
        elif resource["Type"] in {
            "AWS::IAM::Policy",
            "AWS::IAM::ManagedPolicy",
            "AWS::SQS::QueuePolicy",
            "AWS::SNS::TopicPolicy",
            "AWS::Events::EventBusPolicy",
        } and isinstance(properties.get("PolicyDocument"), dict):
            yield logical_id, properties["PolicyDocument"]
        elif resource["Type"] == "AWS::Events::EventBusPolicy" and "Statement" in properties:
            yield logical_id, {"Statement": properties["Statement"]}


def statements(cfn: dict[str, Any]) -> list[Statement]:
    found = []
    for owner, document in _documents(cfn):
        for raw in _as_list(document.get("Statement")):
            found.append(
                Statement(
                    owner=owner,
                    effect=raw.get("Effect", ""),
                    actions=tuple(_as_list(raw.get("Action") or raw.get("NotAction"))),
                    resources=tuple(render(r) for r in _as_list(raw.get("Resource"))),
                    condition=raw.get("Condition", {}),
                    not_action="NotAction" in raw,
                )
            )
    return found


def function_roles(cfn: dict[str, Any]) -> dict[str, str]:
    """Function logical id -> logical id of its role."""
    roles = {}
    for logical_id, resource in cfn["Resources"].items():
        if resource["Type"] == "AWS::Lambda::Function":
            role = resource["Properties"].get("Role")
            roles[logical_id] = render(role).removeprefix("GetAtt:").removesuffix(".Arn")
    return roles


def _resources_of_type(cfn: dict[str, Any], type_: str) -> dict[str, dict[str, Any]]:
    return {
        logical_id: resource.get("Properties", {})
        for logical_id, resource in cfn["Resources"].items()
        if resource["Type"] == type_
    }


def _arn_resource_type(arn: str) -> str:
    """'arn:${AWS::Partition}:ec2:${AWS::Region}:*:subnet/*' -> 'subnet'."""
    return arn.rsplit(":", 1)[-1].split("/", 1)[0]


# ---------------------------------------------------------------------------------------- checks
def wildcard_actions(cfn: dict[str, Any]) -> list[str]:
    """No '*' or 'service:*' (nor any partial wildcard, nor NotAction) in any policy."""
    return [
        f"{s.owner}: {'NotAction' if s.not_action else 'wildcard action'} {list(s.actions)}"
        for s in statements(cfn)
        if s.effect == "Allow" and (s.not_action or any("*" in action for action in s.actions))
    ]


def resource_star_beyond_unscopable_actions(cfn: dict[str, Any]) -> list[str]:
    """Resource '*' only for actions AWS cannot scope to a resource (ec2:Describe*, X-Ray)."""
    return [
        f"{s.owner}: {action} on Resource '*'"
        for s in statements(cfn)
        if s.effect == "Allow" and "*" in s.resources
        for action in s.actions
        if not RESOURCE_STAR_ACTIONS.match(action)
    ]


def _managed_tag_conditioned(statement: Statement) -> bool:
    return any(
        statement.condition_equals(f"aws:{kind}/{MANAGED_TAG}") == {"true"}
        for kind in ("RequestTag", "ResourceTag")
    )


def _tags_only_creations_or_managed(statement: Statement) -> bool:
    """CreateTags while creating (ec2:CreateAction), or on resources already tagged as ours:
    never a way to mark someone else's instance as managed and then terminate it."""
    create_actions = statement.condition_equals("ec2:CreateAction")
    while_creating = bool(create_actions) and create_actions <= TAGGING_CREATE_ACTIONS
    already_ours = statement.condition_equals(f"aws:ResourceTag/{MANAGED_TAG}") == {"true"}
    return while_creating or already_ours


def untagged_ec2_mutations(cfn: dict[str, Any]) -> list[str]:
    """Every EC2 mutation is conditioned on our managed tag, or is RunInstances/CreateFleet on
    resources a launch uses but does not own (UNOWNED_LAUNCH_RESOURCE_TYPES); CreateTags only
    while creating or on resources already ours."""
    violations = []
    for s in statements(cfn):
        mutations = [a for a in s.actions if a.startswith("ec2:") and not READ_ONLY_EC2.match(a)]
        if s.effect != "Allow" or not mutations:
            continue
        unowned_only = (
            set(mutations) <= UNOWNED_LAUNCH_ACTIONS
            and "*" not in s.resources
            and all(_arn_resource_type(r) in UNOWNED_LAUNCH_RESOURCE_TYPES for r in s.resources)
        )
        of_reservations = (
            set(mutations) <= RESERVATION_MUTATIONS
            and "*" not in s.resources
            and all(_arn_resource_type(r) == "capacity-reservation" for r in s.resources)
        )
        if not (_managed_tag_conditioned(s) or unowned_only or of_reservations):
            violations.append(
                f"{s.owner}: {mutations} on {list(s.resources)} without tag condition"
            )
        if "ec2:CreateTags" in mutations and not _tags_only_creations_or_managed(s):
            violations.append(f"{s.owner}: ec2:CreateTags on resources that may not be ours")
    return violations


def _only_grant(
    cfn: dict[str, Any], action: str, resource: str, condition_key: str, condition_value: str
) -> list[str]:
    """`action` is the one action of its service granted, only on `resource`, only with
    StringEquals `condition_key` = `condition_value`."""
    service = action.split(":", 1)[0] + ":"
    violations: list[str] = []
    for s in statements(cfn):
        if s.effect != "Allow":
            continue
        violations.extend(
            f"{s.owner}: {other} granted"
            for other in s.actions
            if other.startswith(service) and other != action
        )
        if action in s.actions:
            if s.resources != (resource,):
                violations.append(f"{s.owner}: {action} on {list(s.resources)}")
            if s.condition_equals(condition_key) != {condition_value}:
                violations.append(f"{s.owner}: {action} without {condition_key} condition")
    return violations


# The roles a NodeClass's `role` may name (the NodeRolePrefix parameter), and the service's own
# instance profiles (the NodeClasses' roles' profiles live under this path only).
NODE_ROLES = "arn:${AWS::Partition}:iam::${AWS::AccountId}:role/${NodeRolePrefix}*"
OWN_PROFILES = "arn:${AWS::Partition}:iam::${AWS::AccountId}:instance-profile/capacity-launcher/*"
ANY_PROFILE = "arn:${AWS::Partition}:iam::${AWS::AccountId}:instance-profile/*"
# IAM actions besides iam:PassRole, and the one resource each may be granted on.
_PROFILE_ACTIONS = {
    "iam:AddRoleToInstanceProfile": OWN_PROFILES,
    "iam:CreateInstanceProfile": OWN_PROFILES,
    "iam:DeleteInstanceProfile": OWN_PROFILES,
    "iam:GetInstanceProfile": ANY_PROFILE,
    "iam:RemoveRoleFromInstanceProfile": OWN_PROFILES,
    "iam:TagInstanceProfile": OWN_PROFILES,
    "iam:ListInstanceProfiles": ANY_PROFILE,
    "iam:GetRole": NODE_ROLES,
}


def pass_role_violations(cfn: dict[str, Any]) -> list[str]:
    """iam:PassRole only on the InstanceRoleArn parameter or the roles under NodeRolePrefix,
    only to EC2; the instance-profile actions only on the service's own path (listing on every
    profile), GetRole only on the node roles; no other IAM action."""
    violations: list[str] = []
    allowed = {(f"Ref:{INSTANCE_ROLE_PARAMETER}",), (NODE_ROLES,)}
    for s in statements(cfn):
        if s.effect != "Allow":
            continue
        for action in (a for a in s.actions if a.startswith("iam:")):
            if action == "iam:PassRole":
                if s.resources not in allowed:
                    violations.append(f"{s.owner}: {action} on {list(s.resources)}")
                if s.condition_equals("iam:PassedToService") != {"ec2.amazonaws.com"}:
                    violations.append(f"{s.owner}: {action} without iam:PassedToService")
            elif action not in _PROFILE_ACTIONS:
                violations.append(f"{s.owner}: {action} granted")
            elif s.resources != (_PROFILE_ACTIONS[action],):
                violations.append(f"{s.owner}: {action} on {list(s.resources)}")
    return violations


def put_events_violations(cfn: dict[str, Any]) -> list[str]:
    """events:PutEvents only on our bus: the functions' with events:source = capacity-launcher,
    the producers' policies with events:detail-type = Launch Requested (never a status event);
    the team producers' also with events:source pinned to their team's tag; no other events
    action."""
    resources = cfn["Resources"]
    functions = {**cfn, "Resources": _without(resources, *PRODUCER_POLICIES)}
    violations = _only_grant(
        functions, "events:PutEvents", f"GetAtt:{BUS}.Arn", "events:source", EVENT_SOURCE
    )
    for name in PRODUCER_POLICIES:
        if name in resources:
            producers = {**cfn, "Resources": {name: resources[name]}}
            violations += _only_grant(
                producers,
                "events:PutEvents",
                f"GetAtt:{BUS}.Arn",
                "events:detail-type",
                LAUNCH_REQUESTED,
            )
    if TEAM_PRODUCER_POLICY in resources:
        team = {**cfn, "Resources": {TEAM_PRODUCER_POLICY: resources[TEAM_PRODUCER_POLICY]}}
        violations += _only_grant(
            team, "events:PutEvents", f"GetAtt:{BUS}.Arn", "events:source", TEAM_SOURCE
        )
    return violations


def _without(resources: dict[str, Any], *logical_ids: str) -> dict[str, Any]:
    return {k: v for k, v in resources.items() if k not in logical_ids}


def bus_source_claimable_by_others(cfn: dict[str, Any]) -> list[str]:
    """The bus denies PutEvents with events:source = capacity-launcher to every principal but the
    functions' roles, so nobody else in the account can forge status events."""
    roles = {f"GetAtt:{role}.Arn" for role in function_roles(cfn).values()}
    for s in statements(cfn):
        bus_policy = cfn["Resources"].get(s.owner, {}).get("Type") == "AWS::Events::EventBusPolicy"
        exempt = s.condition.get("ArnNotEquals", {}).get("aws:PrincipalArn", [])
        if (
            bus_policy
            and s.effect == "Deny"
            and s.actions == ("events:PutEvents",)
            and s.resources == (f"GetAtt:{BUS}.Arn",)
            and s.condition_equals("events:source") == {EVENT_SOURCE}
            and {render(arn) for arn in _as_list(exempt)} == roles
        ):
            return []
    return [f"{BUS}: no policy denies other principals events with source {EVENT_SOURCE}"]


def team_sources_claimable_by_others(cfn: dict[str, Any]) -> list[str]:
    """The bus denies PutEvents with a source in capacity-launcher.team.* to every principal
    without the team tag, and to every principal whose tag names another team, whatever its own
    policies allow: a team's source then says which team sent the event."""
    untagged = tagged_otherwise = False
    for s in statements(cfn):
        if (
            cfn["Resources"].get(s.owner, {}).get("Type") != "AWS::Events::EventBusPolicy"
            or s.effect != "Deny"
            or s.actions != ("events:PutEvents",)
            or s.resources != (f"GetAtt:{BUS}.Arn",)
            or s.condition.get("StringLike") != {"events:source": TEAM_SOURCES}
        ):
            continue
        rest = {k: v for k, v in s.condition.items() if k != "StringLike"}
        untagged |= rest == {"Null": {f"aws:PrincipalTag/{TEAM_TAG}": "true"}}
        tagged_otherwise |= rest == {"StringNotEquals": {"events:source": TEAM_SOURCE}}
    return [
        f"{BUS}: no policy denies {TEAM_SOURCES} to principals {who}"
        for who, denied in (
            (f"without the {TEAM_TAG} tag", untagged),
            ("tagged for another team", tagged_otherwise),
        )
        if not denied
    ]


# A table's index by ARN (…:table/${Table}/index/Name), as a Sub names it.
_INDEX_ARN = (
    r"arn:\$\{AWS::Partition\}:dynamodb:\$\{AWS::Region\}:\$\{AWS::AccountId\}"
    r":table/\$\{(\w+)\}/index/[\w.-]+"
)


def dynamodb_violations(cfn: dict[str, Any]) -> list[str]:
    """DynamoDB actions only on the project's tables, each function only on the tables it uses."""
    tables = set(_resources_of_type(cfn, "AWS::DynamoDB::Table"))
    roles = {role: function for function, role in function_roles(cfn).items()}
    violations = []
    for s in statements(cfn):
        if s.effect != "Allow" or not any(a.startswith("dynamodb:") for a in s.actions):
            continue
        function = roles.get(s.owner.split("/")[0], "")
        allowed = TABLES_BY_FUNCTION.get(function, tables)
        for resource in s.resources:
            table = resource.removeprefix("GetAtt:").removesuffix(".Arn")
            index = re.fullmatch(_INDEX_ARN, resource)
            if index:  # an index of one of our tables, named by its ARN
                table = index.group(1)
            if not (resource.startswith("GetAtt:") or index) or table not in tables:
                violations.append(f"{s.owner}: dynamodb on {resource}, not a table of ours")
            elif table not in allowed:
                violations.append(f"{s.owner}: dynamodb on {table}, which {function} does not use")
    return violations


def unencrypted_stores(cfn: dict[str, Any]) -> list[str]:
    """Every queue and table encrypted at rest; every table with point-in-time recovery."""
    violations = [
        f"{queue}: not encrypted"
        for queue, properties in _resources_of_type(cfn, "AWS::SQS::Queue").items()
        if properties.get("SqsManagedSseEnabled") is not True and "KmsMasterKeyId" not in properties
    ]
    for table, properties in _resources_of_type(cfn, "AWS::DynamoDB::Table").items():
        if properties.get("SSESpecification", {}).get("SSEEnabled") is not True:
            violations.append(f"{table}: not encrypted")
        pitr = properties.get("PointInTimeRecoverySpecification", {})
        if pitr.get("PointInTimeRecoveryEnabled") is not True:
            violations.append(f"{table}: no point-in-time recovery")
    return violations


def functions_without_log_retention(cfn: dict[str, Any]) -> list[str]:
    """Every function has its log group (/aws/lambda/<function>) declared, with a retention."""
    retained = {
        render(properties.get("LogGroupName"))
        for properties in _resources_of_type(cfn, "AWS::Logs::LogGroup").values()
        if properties.get("RetentionInDays")
    }
    return [
        f"{function}: no log group with retention"
        for function in _resources_of_type(cfn, "AWS::Lambda::Function")
        if f"/aws/lambda/${{{function}}}" not in retained
    ]


def _queue_policy_allows_rule(cfn: dict[str, Any], queue: str, rule: str) -> bool:
    for properties in _resources_of_type(cfn, "AWS::SQS::QueuePolicy").values():
        if f"Ref:{queue}" not in {render(q) for q in properties.get("Queues", [])}:
            continue
        for raw in _as_list(properties["PolicyDocument"].get("Statement")):
            sources = raw.get("Condition", {}).get("ArnEquals", {}).get("aws:SourceArn", [])
            if (
                raw.get("Effect") == "Allow"
                and raw.get("Principal", {}).get("Service") == "events.amazonaws.com"
                and "sqs:SendMessage" in _as_list(raw.get("Action"))
                and f"GetAtt:{rule}.Arn" in {render(arn) for arn in _as_list(sources)}
            ):
                return True
    return False


def event_paths_without_failure_destination(cfn: dict[str, Any]) -> list[str]:
    """Every way an event reaches us ends somewhere when it fails: queues redrive to a DLQ (with
    a bounded receive count), rule targets have a retry policy and a DLQ that lets the rule
    write to it, and functions invoked asynchronously have an on-failure destination."""
    violations = []
    queues = _resources_of_type(cfn, "AWS::SQS::Queue")
    for mapping, properties in _resources_of_type(cfn, "AWS::Lambda::EventSourceMapping").items():
        source = render(properties.get("EventSourceArn")).removeprefix("GetAtt:")
        queue = source.removesuffix(".Arn")
        redrive = queues.get(queue, {}).get("RedrivePolicy", {})
        has_destination = properties.get("DestinationConfig", {}).get("OnFailure")
        if not has_destination and not (
            redrive.get("deadLetterTargetArn") and 0 < int(redrive.get("maxReceiveCount", 0)) <= 10
        ):
            violations.append(f"{mapping}: {queue} has no bounded redrive to a dead-letter queue")
    for rule, properties in _resources_of_type(cfn, "AWS::Events::Rule").items():
        for target in properties.get("Targets", []):
            dlq = render(target.get("DeadLetterConfig", {}).get("Arn"))
            if not dlq.startswith("GetAtt:"):
                violations.append(f"{rule}/{target['Id']}: no dead-letter queue")
            elif not _queue_policy_allows_rule(cfn, dlq[7:].removesuffix(".Arn"), rule):
                violations.append(f"{rule}/{target['Id']}: {dlq} does not let the rule write")
            if not target.get("RetryPolicy"):
                violations.append(f"{rule}/{target['Id']}: no retry policy")
            arn = render(target.get("Arn"))
            queue = arn.removeprefix("GetAtt:").removesuffix(".Arn")
            if queue in queues and not _queue_policy_allows_rule(cfn, queue, rule):
                violations.append(f"{rule}/{target['Id']}: target {queue} does not let it write")
    # An invoke configuration holds for one qualifier: an alias (AutoPublishAlias puts the event
    # sources on it) or $LATEST.
    invoke_configs = {
        (render(properties.get("FunctionName")).removeprefix("Ref:"), properties.get("Qualifier"))
        for properties in _resources_of_type(cfn, "AWS::Lambda::EventInvokeConfig").values()
        if properties.get("DestinationConfig", {}).get("OnFailure", {}).get("Destination")
    }
    aliases = {
        alias: (render(properties.get("FunctionName")).removeprefix("Ref:"), properties.get("Name"))
        for alias, properties in _resources_of_type(cfn, "AWS::Lambda::Alias").items()
    }
    for permission, properties in _resources_of_type(cfn, "AWS::Lambda::Permission").items():
        function = render(properties.get("FunctionName")).removeprefix("Ref:")
        invoked = aliases.get(function, (function, "$LATEST"))
        if properties.get("Principal") in ASYNC_PRINCIPALS and invoked not in invoke_configs:
            violations.append(f"{permission}: {function} is invoked asynchronously, no OnFailure")
    return violations


def dead_letter_queues(cfn: dict[str, Any]) -> set[str]:
    """Queues that receive failures: redrive targets, rule DLQs, on-failure destinations."""
    text = json.dumps(
        [
            *(
                p.get("RedrivePolicy", {})
                for p in _resources_of_type(cfn, "AWS::SQS::Queue").values()
            ),
            *(
                t.get("DeadLetterConfig", {})
                for p in _resources_of_type(cfn, "AWS::Events::Rule").values()
                for t in p.get("Targets", [])
            ),
            *(
                p.get("DestinationConfig", {})
                for p in _resources_of_type(cfn, "AWS::Lambda::EventInvokeConfig").values()
            ),
        ]
    )
    return {queue for queue in _resources_of_type(cfn, "AWS::SQS::Queue") if f'"{queue}"' in text}


def dead_letter_queues_without_alarm(cfn: dict[str, Any]) -> list[str]:
    """Every dead-letter queue has an alarm on its visible messages."""
    watched = {
        render(dimension.get("Value")).removeprefix("GetAtt:").removesuffix(".QueueName")
        for properties in _resources_of_type(cfn, "AWS::CloudWatch::Alarm").values()
        if properties.get("MetricName") == "ApproximateNumberOfMessagesVisible"
        for dimension in properties.get("Dimensions", [])
        if dimension.get("Name") == "QueueName"
    }
    return [f"{queue}: no alarm" for queue in sorted(dead_letter_queues(cfn) - watched)]


def managed_policies(cfn: dict[str, Any]) -> list[str]:
    """No AWS managed policies: they grant on Resource '*' (logs, SQS) what we scope by hand."""
    return [
        f"{role}: {render(arn)}"
        for role, properties in _resources_of_type(cfn, "AWS::IAM::Role").items()
        for arn in properties.get("ManagedPolicyArns", [])
    ]


ALL_CHECKS = (
    wildcard_actions,
    resource_star_beyond_unscopable_actions,
    untagged_ec2_mutations,
    pass_role_violations,
    put_events_violations,
    bus_source_claimable_by_others,
    team_sources_claimable_by_others,
    dynamodb_violations,
    unencrypted_stores,
    functions_without_log_retention,
    event_paths_without_failure_destination,
    dead_letter_queues_without_alarm,
    managed_policies,
)
