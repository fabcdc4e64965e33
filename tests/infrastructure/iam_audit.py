"""IAM, proven on the calls the functions really make: record every AWS call made while a template
function runs, and evaluate it against that function's role in the transformed template.

How it works: `CallRecorder` wraps botocore's `BaseClient._make_api_call`, so every client (ours,
Powertools', paginators) is seen. A call is attributed to the function that
`local_cloud.lambda_runtime.RUNNING_FUNCTION` names (the local runtime and
tests/support/cloud.py set it); calls made outside any function (test setup, the CLI acting as an
operator) are not evaluated, but their creations still feed the tag registry below. Each call
becomes one or more `Authorization`s (action, resource ARN, condition context), as IAM would see
them, and each is evaluated: an explicit Deny (role policy or the bus policy) or no Allow is a
denial.

What is modelled, and its limits:
- Actions: `service:Operation`; TransactWriteItems as the per-item actions; CreateFleet as
  `ec2:CreateFleet` and `ec2:RunInstances` on every resource a launch touches, plus
  `ec2:CreateTags` (with `ec2:CreateAction`) on each resource it tags while creating.
- DeleteLaunchTemplate: on the template, with the tags it was created with.
- Resources: ARNs built from parameters with the call's region and the deployment's account;
  created resources as `type/*`; a launch's image, subnets, security groups, launch template and
  targeted reservation by id. Not modelled: the snapshots behind an image, key pairs, placement
  groups, a reservation group target's member reservations.
- Condition keys: `aws:RequestTag/*`, `aws:TagKeys` (tags in the call and in the launch template's
  TagSpecifications), `aws:ResourceTag/*` (tags known from creations and CreateTags seen in the
  session; anything else counts as untagged), `ec2:CreateAction`, `events:source`,
  `events:detail-type`, `iam:PassedToService`, `aws:RequestedRegion`, `aws:PrincipalArn`.
  Operators: String/Arn Equals, NotEquals, Like, NotLike, with ForAllValues:/ForAnyValue: and
  IfExists, as IAM evaluates them when a key is absent. Any other operator is a denial
  ("unmodelled"), so the audit cannot pass by not understanding a policy.
- iam:PassRole: a launch template with an instance profile passes the role the session saw
  added to it (AddRoleToInstanceProfile: a NodeClass's `role`), else the `InstanceRoleArn`
  parameter's role. AddRoleToInstanceProfile passes its role too.
- IAM instance profiles: on `instance-profile{path}{name}`, the path the session saw the profile
  created with (else `/`); CreateInstanceProfile with tags is also iam:TagInstanceProfile;
  ListInstanceProfiles on `instance-profile{PathPrefix}*`; GetRole on `role/{name}`.
- Parameters a policy names in a `!Sub` are their template defaults.
- Permissions boundaries, SCPs, session policies and service-side checks are out of scope.

The session's recorder (tests/conftest.py, `check_limits`) also holds every call, attributed or
not, against the maximums of botocore's service model (parameter_limits.py).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import copy_context
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any

from botocore.client import BaseClient

from local_cloud.lambda_runtime import RUNNING_FUNCTION, RunningFunction
from local_cloud.template import function_spec
from tests.infrastructure import parameter_limits
from tests.infrastructure.policy_checks import Statement, function_roles, render, statements

IAM_PREFIX = {"resourcegroupstaggingapi": "tag"}
PASSED_ROLE = "parameter:InstanceRoleArn"
_ID_TYPES = {
    "i-": "instance",
    "lt-": "launch-template",
    "vol-": "volume",
    "eni-": "network-interface",
    "fleet-": "fleet",
    "sir-": "spot-instances-request",
}


# ------------------------------------------------------------------------------------ recording
_RECORDING: list[CallRecorder] = []


@dataclass(frozen=True)
class Call:
    function: RunningFunction
    service: str
    operation: str
    params: Mapping[str, Any]
    region: str
    test: str
    # Derived when the call is made: resource tags are those the resources had at that moment.
    authorizations: tuple[Authorization, ...] = ()


@dataclass
class CallRecorder:
    """Records attributed calls and keeps the tags of what was created (by anyone)."""

    calls: list[Call] = field(default_factory=list)
    resource_tags: dict[str, dict[str, str]] = field(default_factory=dict)
    launch_templates: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Instance profiles seen created (name -> path) and given a role (name -> role name).
    profile_paths: dict[str, str] = field(default_factory=dict)
    profile_roles: dict[str, str] = field(default_factory=dict)
    test: str = ""
    enabled: bool = True
    # Every call (attributed or not) held against AWS's maximums (parameter_limits.py), by the
    # outermost recorder only: (test, what is over which limit).
    check_limits: bool = False
    over_limits: list[tuple[str, str]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @contextmanager
    def recording(self) -> Iterator[CallRecorder]:
        """Record until exit; a recorder started inside another takes the calls for itself."""
        _RECORDING.append(self)
        original_call = BaseClient._make_api_call
        original_submit = ThreadPoolExecutor.submit
        recorder = self

        def make_api_call(client: Any, operation: str, params: dict[str, Any]) -> Any:
            running = RUNNING_FUNCTION.get()
            service = client.meta.service_model.service_name
            if recorder.check_limits and _RECORDING[0] is recorder:
                model = client.meta.service_model.operation_model(operation)
                found = parameter_limits.check(model, params)
                with recorder._lock:
                    recorder.over_limits += [(recorder.test, f"{service} {f}") for f in found]
            if running is not None and recorder.enabled and _RECORDING[-1] is recorder:
                call = Call(running, service, operation, params, client.meta.region_name, self.test)
                with recorder._lock:
                    try:
                        derived = tuple(authorizations(call, recorder))
                    except Exception as error:  # never break the test: report it as a denial
                        derived = (
                            Authorization(f"audit:cannot-derive:{operation}", repr(error), {}),
                        )
                    recorder.calls.append(replace(call, authorizations=derived))
            try:
                response = original_call(client, operation, params)
            except BaseException:
                # The call may have taken effect before its caller failed (the simulation's
                # crash after a call, a BaseException). A launch template is named by its
                # content, so its name and data are known from the request alone: launches from
                # it are judged by its tags, not denied as an unknown template's.
                if operation == "CreateLaunchTemplate":
                    recorder._learn(service, operation, params, {})
                raise
            recorder._learn(service, operation, params, response)
            return response

        def submit(pool: Any, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
            # Work handed to a thread pool runs for the function that handed it over.
            return original_submit(pool, copy_context().run, fn, *args, **kwargs)

        BaseClient._make_api_call = make_api_call  # type: ignore[method-assign]
        ThreadPoolExecutor.submit = submit  # type: ignore[method-assign]
        try:
            yield self
        finally:
            BaseClient._make_api_call = original_call  # type: ignore[method-assign]
            ThreadPoolExecutor.submit = original_submit  # type: ignore[method-assign]
            _RECORDING.remove(self)

    def _learn(
        self, service: str, operation: str, params: Mapping[str, Any], response: Any
    ) -> None:
        if service == "iam":
            name = str(params.get("InstanceProfileName", ""))
            with self._lock:
                if operation == "CreateInstanceProfile":
                    self.profile_paths[name] = str(params.get("Path") or "/")
                elif operation == "AddRoleToInstanceProfile":
                    self.profile_roles[name] = str(params["RoleName"])
            return
        if service != "ec2":
            return
        with self._lock:
            if operation == "CreateLaunchTemplate":
                template = response.get("LaunchTemplate", {})
                data = dict(params.get("LaunchTemplateData", {}))
                tags = _tags_for(params.get("TagSpecifications", []), "launch-template")
                for key in (params["LaunchTemplateName"], template.get("LaunchTemplateId")):
                    if key:
                        self.launch_templates[key] = data
                        self.resource_tags[key] = tags
            elif operation in ("CreateFleet", "RunInstances"):
                tags = self.launch_request_tags(params).get("instance", {})
                for instance_id in _instance_ids(operation, response):
                    self.resource_tags[instance_id] = dict(tags)
            elif operation == "CreateTags":
                for resource in params.get("Resources", []):
                    current = self.resource_tags.setdefault(resource, {})
                    current.update({t["Key"]: t.get("Value", "") for t in params.get("Tags", [])})

    def launch_template_of(self, params: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        if "LaunchTemplateConfigs" in params:
            configs = params["LaunchTemplateConfigs"] or [{}]  # a stubbed test's bare input
            spec = configs[0].get("LaunchTemplateSpecification", {})
        else:
            spec = params.get("LaunchTemplate", {})
        name = str(spec.get("LaunchTemplateName") or spec.get("LaunchTemplateId") or "")
        return name, self.launch_templates.get(name, {})

    def launch_request_tags(self, params: Mapping[str, Any]) -> dict[str, dict[str, str]]:
        """Resource type -> tags a launch requests: the launch template's, then the call's."""
        _, data = self.launch_template_of(params)
        found: dict[str, dict[str, str]] = {}
        for spec in [*data.get("TagSpecifications", []), *params.get("TagSpecifications", [])]:
            found.setdefault(spec["ResourceType"], {}).update(
                {t["Key"]: t.get("Value", "") for t in spec.get("Tags", [])}
            )
        return found


def _tags_for(specs: Iterable[Mapping[str, Any]], resource_type: str) -> dict[str, str]:
    return {
        t["Key"]: t.get("Value", "")
        for spec in specs
        if spec.get("ResourceType") == resource_type
        for t in spec.get("Tags", [])
    }


def _instance_ids(operation: str, response: Mapping[str, Any]) -> list[str]:
    if operation == "RunInstances":
        return [i["InstanceId"] for i in response.get("Instances", [])]
    return [i for group in response.get("Instances", []) for i in group.get("InstanceIds", [])]


# ------------------------------------------------------------------------------- authorizations
@dataclass(frozen=True)
class Authorization:
    """One thing IAM decides: may the caller do `action` on `resource`, in `context`."""

    action: str
    resource: str
    context: Mapping[str, tuple[str, ...]]


def _arn(service: str, region: str, account: str, resource: str) -> str:
    return f"arn:aws:{service}:{region}:{account}:{resource}"


def _with_tags(
    base: Mapping[str, tuple[str, ...]], kind: str, tags: Mapping[str, str]
) -> dict[str, tuple[str, ...]]:
    context = dict(base)
    context.update({f"aws:{kind}/{k}": (v,) for k, v in tags.items()})
    if kind == "RequestTag":
        context["aws:TagKeys"] = tuple(tags)
    return context


def authorizations(call: Call, recorder: CallRecorder) -> list[Authorization]:
    """What IAM evaluates for one call."""
    region, account, p = call.region, call.function.account_id, call.params
    prefix = IAM_PREFIX.get(call.service, call.service)
    action = f"{prefix}:{call.operation}"
    base = {"aws:RequestedRegion": (region,)}

    def ec2(resource: str) -> str:
        return _arn("ec2", region, account, resource)

    if call.service == "ec2" and call.operation in ("CreateFleet", "RunInstances"):
        return _launch(call, recorder, base, ec2)
    if call.service == "ec2" and call.operation == "CreateLaunchTemplate":
        tags = _tags_for(p.get("TagSpecifications", []), "launch-template")
        context = _with_tags(base, "RequestTag", tags)
        resource = ec2("launch-template/*")
        return [
            Authorization(action, resource, context),
            Authorization(
                "ec2:CreateTags", resource, {**context, "ec2:CreateAction": (call.operation,)}
            ),
        ]
    if call.service == "ec2" and call.operation in ("CreateTags", "TerminateInstances"):
        ids = p.get("Resources") or p.get("InstanceIds", [])
        request = {t["Key"]: t.get("Value", "") for t in p.get("Tags", [])}
        found = []
        for resource_id in ids:
            kind = next((t for pre, t in _ID_TYPES.items() if resource_id.startswith(pre)), "?")
            context = _with_tags(base, "ResourceTag", recorder.resource_tags.get(resource_id, {}))
            if request:
                context = _with_tags(context, "RequestTag", request)
            found.append(Authorization(action, ec2(f"{kind}/{resource_id}"), context))
        return found
    if call.service == "ec2" and call.operation == "DeleteLaunchTemplate":
        # By name or id; its tags are those it was created with (learned from CreateLaunchTemplate).
        name = str(p.get("LaunchTemplateName") or p.get("LaunchTemplateId") or "")
        context = _with_tags(base, "ResourceTag", recorder.resource_tags.get(name, {}))
        return [Authorization(action, ec2(f"launch-template/{name}"), context)]
    if call.service == "dynamodb":
        return _dynamodb(call, base)
    if call.service == "iam":
        return _iam(call, recorder, base)
    if call.service == "events" and call.operation == "PutEvents":
        return [
            Authorization(
                action,
                _event_bus(entry.get("EventBusName", "default"), region, account),
                {
                    **base,
                    "events:source": (entry.get("Source", ""),),
                    "events:detail-type": (entry.get("DetailType", ""),),
                },
            )
            for entry in p.get("Entries", [])
        ]
    if call.service == "sqs" and "QueueUrl" in p:
        name = str(p["QueueUrl"]).rstrip("/").rsplit("/", 1)[-1]
        return [Authorization(action, _arn("sqs", region, account, name), base)]
    if call.service == "ssm" and "Name" in p:
        name = str(p["Name"])
        owner = "" if name.startswith("/aws/service/") else account
        return [Authorization(action, _arn("ssm", region, owner, f"parameter{name}"), base)]
    if call.service == "resource-groups":
        group = str(p.get("Group") or p.get("GroupName") or "")
        arn = (
            group
            if group.startswith("arn:")
            else _arn("resource-groups", region, account, f"group/{group}")
        )
        found = [Authorization(action, arn, base)]
        if call.operation == "ListGroupResources":
            # Its documented minimum permissions include tag:GetResources (on "*").
            found.append(Authorization("tag:GetResources", "*", base))
        return found
    if call.service == "ec2" and call.operation.startswith("Describe"):
        return [Authorization(action, "*", base)]
    # Unmodelled: required on "*", which only a policy granting it everywhere would allow.
    return [Authorization(action, "*", base)]


def _event_bus(name: str, region: str, account: str) -> str:
    return name if name.startswith("arn:") else _arn("events", region, account, f"event-bus/{name}")


_TRANSACT_ACTIONS = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
    "Get": "GetItem",
}


def _dynamodb(call: Call, base: Mapping[str, tuple[str, ...]]) -> list[Authorization]:
    def table(name: str) -> str:
        return _arn("dynamodb", call.region, call.function.account_id, f"table/{name}")

    p = call.params
    if call.operation in ("TransactWriteItems", "TransactGetItems"):
        return [
            Authorization(f"dynamodb:{_TRANSACT_ACTIONS[kind]}", table(item["TableName"]), base)
            for entry in p.get("TransactItems", [])
            for kind, item in entry.items()
        ]
    if "RequestItems" in p:
        return [
            Authorization(f"dynamodb:{call.operation}", table(name), base)
            for name in p["RequestItems"]
        ]
    resource = table(p.get("TableName", "?"))
    if p.get("IndexName"):
        resource += f"/index/{p['IndexName']}"
    return [Authorization(f"dynamodb:{call.operation}", resource, base)]


def _launch(
    call: Call,
    recorder: CallRecorder,
    base: Mapping[str, tuple[str, ...]],
    ec2: Callable[[str], str],
) -> list[Authorization]:
    p = call.params
    name, data = recorder.launch_template_of(p)
    requested = recorder.launch_request_tags(p)
    spot = (
        p.get("TargetCapacitySpecification", {}).get("DefaultTargetCapacityType") == "spot"
        or p.get("InstanceMarketOptions", {}).get("MarketType") == "spot"
    )
    created = ["instance", "volume", "network-interface"] + ["spot-instances-request"] * spot
    if call.operation == "CreateFleet":
        created.append("fleet")
    used = {f"launch-template/{name}": recorder.resource_tags.get(name, {})} if name else {}
    used[f"image/{data.get('ImageId', p.get('ImageId', '?'))}"] = {}
    # A launch placed in a placement group is authorized on it too (its ARN names the group).
    placements = [data.get("Placement", {}), p.get("Placement", {})]
    for config in p.get("LaunchTemplateConfigs", []):
        for override in config.get("Overrides", []):
            used[f"subnet/{override['SubnetId']}"] = {}
            placements.append(override.get("Placement", {}))
    for placement in placements:
        if placement.get("GroupName"):
            used[f"placement-group/{placement['GroupName']}"] = {}
    for group in [*data.get("SecurityGroupIds", []), *p.get("SecurityGroupIds", [])]:
        used[f"security-group/{group}"] = {}
    target = data.get("CapacityReservationSpecification", {}).get("CapacityReservationTarget", {})
    if target.get("CapacityReservationId"):
        used[f"capacity-reservation/{target['CapacityReservationId']}"] = {}
    found: list[Authorization] = []
    for action in (f"ec2:{call.operation}", "ec2:RunInstances"):
        for kind in created:
            context = _with_tags(base, "RequestTag", requested.get(kind, {}))
            found.append(Authorization(action, ec2(f"{kind}/*"), context))
        for resource, tags in used.items():
            # Images (public or shared) carry no account in their ARN.
            arn = (
                _arn("ec2", call.region, "", resource)
                if resource.startswith("image/")
                else ec2(resource)
            )
            found.append(Authorization(action, arn, _with_tags(base, "ResourceTag", tags)))
    for kind in created:
        if requested.get(kind):
            context = _with_tags(base, "RequestTag", requested[kind])
            context["ec2:CreateAction"] = (call.operation,)
            found.append(Authorization("ec2:CreateTags", ec2(f"{kind}/*"), context))
    profile = data.get("IamInstanceProfile") or {}
    if profile:
        role = recorder.profile_roles.get(str(profile.get("Name", "")))
        passed = f"arn:aws:iam::{call.function.account_id}:role/{role}" if role else PASSED_ROLE
        found.append(
            Authorization(
                "iam:PassRole", passed, {**base, "iam:PassedToService": ("ec2.amazonaws.com",)}
            )
        )
    return found


def _iam(
    call: Call, recorder: CallRecorder, base: Mapping[str, tuple[str, ...]]
) -> list[Authorization]:
    """IAM's resources carry no Region; an instance profile's ARN holds its path."""
    p, account = call.params, call.function.account_id
    action = f"iam:{call.operation}"
    if call.operation == "GetRole":
        return [Authorization(action, f"arn:aws:iam::{account}:role/{p['RoleName']}", base)]
    if call.operation == "ListInstanceProfiles":
        prefix = str(p.get("PathPrefix") or "/")
        return [Authorization(action, f"arn:aws:iam::{account}:instance-profile{prefix}*", base)]
    name = str(p.get("InstanceProfileName", ""))
    path = p.get("Path") or recorder.profile_paths.get(name, "/")
    profile = f"arn:aws:iam::{account}:instance-profile{path}{name}"
    found = [Authorization(action, profile, base)]
    if call.operation == "CreateInstanceProfile" and p.get("Tags"):
        tags = {t["Key"]: t.get("Value", "") for t in p["Tags"]}
        found.append(
            Authorization("iam:TagInstanceProfile", profile, _with_tags(base, "RequestTag", tags))
        )
    if call.operation == "AddRoleToInstanceProfile":
        role = f"arn:aws:iam::{account}:role/{p['RoleName']}"
        passed = {**base, "iam:PassedToService": ("ec2.amazonaws.com",)}
        found.append(Authorization("iam:PassRole", role, passed))
    return found


# ------------------------------------------------------------------------------------- policies
class Unmodelled(Exception):
    """A policy uses a condition operator the audit does not evaluate."""


@cache
def _pattern(text: str) -> re.Pattern[str]:
    return re.compile(
        "^" + ".*".join(".".join(map(re.escape, p.split("?"))) for p in text.split("*")) + "$", re.S
    )


def _matches(patterns: Iterable[str], value: str, *, case: bool = True) -> bool:
    flags = 0 if case else re.I
    return any(re.match(_pattern(p).pattern, value, flags) for p in patterns)


def _condition_holds(
    operator: str, key: str, wanted: list[str], context: Mapping[str, tuple[str, ...]]
) -> bool:
    qualifier, _, op = operator.rpartition(":")
    if_exists = op.endswith("IfExists")
    op = op.removesuffix("IfExists")
    negated = "Not" in op
    values = {k.lower(): v for k, v in context.items()}.get(key.lower())
    if op == "Null":
        # IAM: Null "true" holds when the key is absent from the request, "false" when present.
        return [w.lower() for w in wanted] == [str(values is None).lower()]
    if op.replace("Not", "") in ("StringEquals", "ArnEquals"):
        patterns = [re.escape(w) for w in wanted]
    elif op.replace("Not", "") in ("StringLike", "ArnLike"):
        patterns = [_pattern(w).pattern[1:-1] for w in wanted]
    else:
        raise Unmodelled(operator)
    if values is None:
        # IAM: an absent key fails a positive operator; negated, ForAllValues, IfExists pass.
        return if_exists or negated or qualifier == "ForAllValues"
    results = [any(re.fullmatch(p, v, re.S) for p in patterns) != negated for v in values]
    return all(results) if qualifier == "ForAllValues" else any(results)


def _applies(statement: Statement, auth: Authorization, resolve: Callable[[str], str]) -> bool:
    if not _matches(statement.actions, auth.action, case=False):
        return False
    if not _matches([resolve(r) for r in statement.resources], auth.resource):
        return False
    for operator, keys in statement.condition.items():
        for key, wanted in keys.items():
            listed = wanted if isinstance(wanted, list) else [wanted]
            values = [_with_variables(resolve(render(w)), auth.context) for w in listed]
            if None in values or not _condition_holds(
                operator, key, [v for v in values if v is not None], auth.context
            ):
                return False
    return True


_POLICY_VARIABLE = re.compile(r"\$\{(aws:[^}]+)\}")


def _with_variables(value: str, context: Mapping[str, tuple[str, ...]]) -> str | None:
    """A condition value with its policy variables (${aws:PrincipalTag/team}) replaced by the
    request's values; None when one has no single value: IAM then leaves the statement unapplied
    (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_variables.html)."""
    by_key = {k.lower(): v for k, v in context.items()}
    unresolved = False

    def value_of(match: re.Match[str]) -> str:
        nonlocal unresolved
        found = by_key.get(match.group(1).lower(), ())
        if len(found) != 1:
            unresolved = True
            return ""
        return found[0]

    replaced = _POLICY_VARIABLE.sub(value_of, value)
    return None if unresolved else replaced


@dataclass(frozen=True)
class Denial:
    call: Call
    authorization: Authorization
    why: str

    def __str__(self) -> str:
        a = self.authorization
        shown = {k: list(v) for k, v in a.context.items() if k not in _OBVIOUS_KEYS}
        return (
            f"{self.call.function.logical_id} {a.action} on {a.resource} ({self.why}); "
            f"context {shown}; in {self.call.test or 'unknown test'}"
        )


_OBVIOUS_KEYS = {"aws:RequestedRegion", "aws:PrincipalArn"}


class Policies:
    """The transformed template's role policies (and bus policy), resolved per call."""

    def __init__(self, cfn: Mapping[str, Any], sam: Mapping[str, Any]) -> None:
        self._sam = sam
        # A parameter a policy names in a !Sub: its default (what the local cloud deploys with).
        self._defaults = {
            name: str(spec["Default"])
            for name, spec in sam.get("Parameters", {}).items()
            if isinstance(spec.get("Default"), str | int)
        }
        self._roles = function_roles(dict(cfn))
        self._statements = statements(dict(cfn))
        self._bus_policy = [s for s in self._statements if s.owner in _bus_policies(cfn)]

    def _resolver(self, call: Call) -> Callable[[str], str]:
        region, account = call.region, call.function.account_id
        refs = _refs_from_environment(self._sam, call.function)
        subs = {"AWS::Partition": "aws", "AWS::Region": region, "AWS::AccountId": account}
        defaults = self._defaults

        def resolve(value: str) -> str:
            if value.startswith("Ref:"):
                name = value[4:]
                return subs.get(name) or refs.get(name, f"parameter:{name}")
            if value.startswith("GetAtt:"):
                logical = value[7:].partition(".")[0]
                return _attribute_arn(self._sam, logical, refs.get(logical, ""), region, account)
            # ${Logical} in a Sub is its Ref (a table's name), as CloudFormation resolves it.
            return re.sub(
                r"\$\{([^}]+)\}",
                lambda m: (
                    subs.get(m.group(1))
                    or refs.get(m.group(1))
                    or defaults.get(m.group(1))
                    or m.group(0)
                ),
                value,
            )

        return resolve

    def denials(self, call: Call) -> list[Denial]:
        role = self._roles.get(call.function.logical_id)
        if role is None:
            return [Denial(call, Authorization("?", "?", {}), "no such function in the template")]
        resolve = self._resolver(call)
        principal = _attribute_arn(self._sam, role, "", call.region, call.function.account_id)
        own = [s for s in self._statements if s.owner.startswith(f"{role}/")]
        found = []
        for auth in call.authorizations:
            auth = Authorization(
                auth.action, auth.resource, {**auth.context, "aws:PrincipalArn": (principal,)}
            )
            try:
                deny = [
                    s
                    for s in [*own, *self._bus_policy]
                    if s.effect == "Deny" and _applies(s, auth, resolve)
                ]
                allow = [s for s in own if s.effect == "Allow" and _applies(s, auth, resolve)]
            except Unmodelled as error:
                found.append(Denial(call, auth, f"unmodelled condition operator {error}"))
                continue
            if deny:
                found.append(Denial(call, auth, f"explicitly denied by {deny[0].owner}"))
            elif not allow:
                found.append(Denial(call, auth, "no statement allows it"))
        return found


def _bus_policies(cfn: Mapping[str, Any]) -> set[str]:
    return {
        logical
        for logical, r in cfn["Resources"].items()
        if r["Type"] == "AWS::Events::EventBusPolicy"
    }


def _refs_from_environment(sam: Mapping[str, Any], running: RunningFunction) -> dict[str, str]:
    """Logical id -> physical name, read back from the function's environment (`X: !Ref Table`)."""
    spec = function_spec(running.logical_id, dict(sam))["Environment"]
    return {
        value["Ref"]: running.environment[name]
        for name, value in spec.items()
        if isinstance(value, dict) and "Ref" in value and name in running.environment
    }


def _attribute_arn(
    sam: Mapping[str, Any], logical: str, physical: str, region: str, account: str
) -> str:
    kind = sam["Resources"].get(logical, {}).get("Type", "")
    if kind == "AWS::DynamoDB::Table":
        return _arn("dynamodb", region, account, f"table/{physical}")
    if kind == "AWS::Events::EventBus":
        return _arn("events", region, account, f"event-bus/{physical}")
    if kind == "AWS::IAM::Role":
        return f"arn:aws:iam::{account}:role/{logical}"
    if kind == "AWS::SQS::Queue" and not physical:
        # No environment names the queue a function consumes: CloudFormation (and the local
        # cloud) name an unnamed queue after the stack and its logical id.
        return _arn("sqs", region, account, f"*-{logical}*")
    # Others the functions' environment does not name: match no call's ARN.
    return f"unresolved:{logical}"


def audit(calls: Iterable[Call], policies: Policies) -> list[Denial]:
    return [denial for call in calls for denial in policies.denials(call)]
