"""parliament (an IAM policy linter built on AWS's Service Authorization Reference) over every
policy document of the transformed template: unknown actions, condition keys that do not apply
to their action, resources of the wrong type. Findings we accept are listed, narrowly, with why."""

from __future__ import annotations

import json
import re
import warnings
from dataclasses import dataclass
from typing import Any

from tests.infrastructure.policy_checks import _documents

with warnings.catch_warnings():  # parliament 1.6.4 imports pkg_resources and leaves a file open
    warnings.simplefilter("ignore")
    from parliament import analyze_policy_string, is_arn_strictly_valid
    from parliament.statement import get_arn_format, get_privilege_info

ACCOUNT = "123456789012"
REGION = "us-east-1"
PSEUDO = {"AWS::Partition": "aws", "AWS::Region": REGION, "AWS::AccountId": ACCOUNT}
_ARN_BY_TYPE = {
    "AWS::DynamoDB::Table": "arn:aws:dynamodb:{region}:{account}:table/{name}",
    "AWS::SQS::Queue": "arn:aws:sqs:{region}:{account}:{name}",
    "AWS::Events::EventBus": "arn:aws:events:{region}:{account}:event-bus/{name}",
    "AWS::Events::Rule": "arn:aws:events:{region}:{account}:rule/{name}",
    "AWS::IAM::Role": "arn:aws:iam::{account}:role/{name}",
}


@dataclass(frozen=True)
class Finding:
    policy: str
    issue: str
    actions: frozenset[str]
    detail: str

    def __str__(self) -> str:
        return f"{self.policy}: {self.issue} {sorted(self.actions)} {self.detail}"


@dataclass(frozen=True)
class Accepted:
    """A finding we accept: in this policy, of this issue, only for these actions, and why."""

    policy: str
    issue: str
    actions: frozenset[str]
    reason: str

    def covers(self, finding: Finding) -> bool:
        return (
            finding.policy == self.policy
            and finding.issue == self.issue
            and bool(finding.actions)
            and finding.actions <= self.actions
        )


LAUNCHER = "LauncherFunctionRole/launcher"
SYNC = "ReservationSyncFunctionRole/reservation-sync"
LAUNCH_ACTIONS = frozenset({"ec2:createfleet", "ec2:runinstances"})
ACCEPTED = (
    Accepted(
        SYNC,
        "PERMISSIONS_MANAGEMENT_ACTIONS",
        frozenset({"iam:deleteinstanceprofile", "iam:removerolefrominstanceprofile"}),
        "the sync deletes the instance profiles of deleted NodeClasses (their role removed "
        "first), only under the service's own path (policy_checks.pass_role_violations).",
    ),
    Accepted(
        SYNC,
        "RESOURCE_MISMATCH",
        frozenset({"iam:listinstanceprofiles", "iam:getinstanceprofile"}),
        "parliament's database wants '*'; IAM authorizes ListInstanceProfiles on the "
        "instance-profile resource type (the Service Authorization Reference), as Karpenter's "
        "policy grants it: instance-profile/*.",
    ),
    Accepted(
        LAUNCHER,
        "RESOURCE_MISMATCH",
        LAUNCH_ACTIONS,
        "parliament wants each statement to name every resource type a launch requires; ours "
        "split them by tag condition (created, launch template, unowned), as AWS's Karpenter "
        "policy does. launch_resources_not_covered() checks the union covers every type.",
    ),
    Accepted(
        LAUNCHER,
        "RESOURCE_MISMATCH",
        frozenset({"ssm:getparameter"}),
        "AWS public parameters (/aws/service/...) have no account in their ARN; parliament's "
        "format requires one.",
    ),
    Accepted(
        SYNC,
        "RESOURCE_MISMATCH",
        frozenset({"ssm:getparameter"}),
        "The sync resolves NodeClasses' image parameters for every launcher (their shared "
        "resolution): AWS public parameters (/aws/service/...) have no account in their ARN; "
        "parliament's format requires one.",
    ),
    Accepted(
        LAUNCHER,
        "PERMISSIONS_MANAGEMENT_ACTIONS",
        frozenset(
            {
                "iam:passrole",
                "iam:addroletoinstanceprofile",
                "iam:createinstanceprofile",
                "iam:removerolefrominstanceprofile",
            }
        ),
        "launching with the NodeClass instance profile needs iam:PassRole: on the one "
        "InstanceRoleArn or the roles under NodeRolePrefix, only to ec2.amazonaws.com; a "
        "NodeClass's role gets its instance profile made, only under the service's own path "
        "(policy_checks.pass_role_violations).",
    ),
    Accepted(
        LAUNCHER,
        "PRIVILEGE_ESCALATION",
        frozenset({"iam:passrole", "ec2:runinstances"}),
        "the launcher's job is launching instances with the configured role; the role it may "
        "pass is the operator's choice (InstanceRoleArn), and launches need the managed tag.",
    ),
)


def concrete(value: Any, cfn: dict[str, Any]) -> Any:
    """A policy document with intrinsics replaced by ARNs of the right shape (the linter reads
    ARNs, not CloudFormation)."""
    if isinstance(value, list):
        return [concrete(item, cfn) for item in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        ((key, argument),) = value.items()
        if key == "Fn::Sub":
            text = argument if isinstance(argument, str) else argument[0]
            return re.sub(r"\$\{([^}]+)\}", lambda m: PSEUDO.get(m.group(1), "stack"), text)
        if key == "Fn::GetAtt":
            logical = argument[0] if isinstance(argument, list) else argument.split(".")[0]
            kind = cfn["Resources"][logical]["Type"]
            return _ARN_BY_TYPE[kind].format(region=REGION, account=ACCOUNT, name=logical)
        if key == "Ref":
            if argument == "InstanceRoleArn":
                return f"arn:aws:iam::{ACCOUNT}:role/capacity-launcher-node"
            parameter = cfn.get("Parameters", {}).get(argument, {})
            if parameter.get("Type") == "CommaDelimitedList" and "Default" in parameter:
                return str(parameter["Default"]).split(",")  # e.g. LaunchQueueDirectSenders
            return PSEUDO.get(argument, argument)
    return {key: concrete(item, cfn) for key, item in value.items()}


def findings(cfn: dict[str, Any]) -> list[Finding]:
    found = []
    for policy, document in _documents(cfn):
        text = json.dumps({"Version": "2012-10-17", **concrete(document, cfn)})
        for raw in analyze_policy_string(text, include_community_auditors=True).findings:
            # Actions come in the detail (resource mismatches) or the location (auditors).
            detail, location = raw.detail, raw.location
            if isinstance(detail, list):
                actions = frozenset(str(d.get("action", "")).lower() for d in detail)
            else:
                listed = (detail if isinstance(detail, dict) else location or {}).get("actions", [])
                actions = frozenset(str(a).lower() for a in listed)
            found.append(Finding(policy, raw.issue, actions, json.dumps(detail, default=str)))
    return found


def unaccepted(cfn: dict[str, Any]) -> list[Finding]:
    return [f for f in findings(cfn) if not any(a.covers(f) for a in ACCEPTED)]


def launch_resources_not_covered(cfn: dict[str, Any]) -> list[str]:
    """What the first accepted RESOURCE_MISMATCH rests on: across the launcher's statements, every
    resource type EC2 requires for CreateFleet and RunInstances is granted."""
    documents = dict(_documents(cfn))
    statements = concrete(documents[LAUNCHER], cfn)["Statement"]
    missing = []
    for action in ("CreateFleet", "RunInstances"):
        info = get_privilege_info("ec2", action)
        resources = [
            r
            for s in statements
            if s["Effect"] == "Allow" and f"ec2:{action}" in _list(s["Action"])
            for r in _list(s["Resource"])
        ]
        for resource_type in (t["resource_type"] for t in info["resource_types"]):
            if not resource_type.endswith("*"):
                continue
            arn_format = get_arn_format(resource_type, info["service_resources"])
            if not any(is_arn_strictly_valid(resource_type, arn_format, r) for r in resources):
                missing.append(f"ec2:{action} on {resource_type.rstrip('*')}")
    return missing


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]
