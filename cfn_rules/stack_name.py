"""How long a stack name template.yaml can be deployed under, computed from the template.

Several resources are named `${AWS::StackName}-...` (the functions, the layer, the bus, the log
groups the roles name, the dashboard, the schema registry, the exports). Each name has its
service's limit, so a stack name too long for one of them fails in the middle of a deploy, after
CloudFormation has created the others. CloudFormation Rules assert only on parameters, never on
the stack name, so the template cannot refuse it itself: `make deploy` runs this module on the
name it is about to deploy (`python -m cfn_rules.stack_name --deploy-flags "$DEPLOY_FLAGS"`:
their --stack-name, else samconfig.toml's) before building, and
tests/infrastructure/test_stack_name_limit.py holds README's documented limit to what it computes.

A name whose limit `LIMITS` does not know (the schema registry's, the exports') is listed with
no limit, never guessed. cfn-lint loads this folder as rules: this module has none, and is not a
dataclass module (cfn-lint's loader leaves it out of sys.modules).
"""

from __future__ import annotations

import re
import shlex
import sys
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

TEMPLATE = Path(__file__).resolve().parents[1] / "template.yaml"
SAMCONFIG = TEMPLATE.with_name("samconfig.toml")
STACK_NAME = "${AWS::StackName}"
# CloudFormation: a stack name is 1-128 characters, a letter first, then letters, digits, hyphens.
STACK_NAME_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9-]{0,127}")
MAX_STACK_NAME = 128
# (resource type, property): the longest name its service takes.
LIMITS: Mapping[tuple[str, str], int] = {
    # Lambda CreateFunction: a function name alone is at most 64 characters.
    ("AWS::Serverless::Function", "FunctionName"): 64,
    ("AWS::Lambda::Function", "FunctionName"): 64,
    # Lambda PublishLayerVersion (botocore's model): LayerName at most 140.
    ("AWS::Serverless::LayerVersion", "LayerName"): 140,
    ("AWS::Lambda::LayerVersion", "LayerName"): 140,
    # EventBridge CreateEventBus (botocore's model): Name at most 256.
    ("AWS::Events::EventBus", "Name"): 256,
    # CloudWatch PutDashboard: DashboardName at most 255.
    ("AWS::CloudWatch::Dashboard", "DashboardName"): 255,
    # CloudWatch Logs CreateLogGroup (botocore's model): logGroupName at most 512.
    ("AWS::Logs::LogGroup", "LogGroupName"): 512,
}
# Properties that name what they are on (looked for in every resource and every export).
NAME_PROPERTIES = frozenset(prop for _, prop in LIMITS) | {"RegistryName", "Name"}
_VARIABLE = re.compile(r"\$\{([^}!]+)\}")


class NamedByStack(NamedTuple):
    """One name built on the stack name: where, its form, and how long the stack name may be."""

    where: str
    form: str
    limit: int | None  # None: the service's limit is not known here

    def longest_stack_name(self, parameters: Mapping[str, Any]) -> int | None:
        if self.limit is None:
            return None
        rest = self.form.replace(STACK_NAME, "")
        fixed = _VARIABLE.sub(lambda m: "x" * _longest(m.group(1), parameters), rest)
        return self.limit - len(fixed)


def _longest(variable: str, parameters: Mapping[str, Any]) -> int:
    """The longest value a ${...} can have: a parameter's AllowedValues or `{a,b}` pattern."""
    parameter = parameters.get(variable) or {}
    if parameter.get("AllowedValues"):
        return max(len(str(v)) for v in parameter["AllowedValues"])
    bound = re.search(r"\{(\d+),(\d+)\}\$?$", str(parameter.get("AllowedPattern", "")))
    if bound:
        return int(bound.group(2))
    # A pseudo parameter or a resource's attribute: add its bound here when a name first uses it.
    raise ValueError(f"${{{variable}}} in a name built on the stack name has no bound")


def named_by_stack(template: Mapping[str, Any]) -> Iterator[NamedByStack]:
    """Every resource name and export name the template builds on ${AWS::StackName}."""
    for logical_id, resource in (template.get("Resources") or {}).items():
        for prop, value in (resource.get("Properties") or {}).items():
            form = _sub(value)
            if prop in NAME_PROPERTIES and form and STACK_NAME in form:
                limit = LIMITS.get((resource["Type"], prop))
                yield NamedByStack(f"{logical_id}.{prop}", form, limit)
    for output_id, output in (template.get("Outputs") or {}).items():
        form = _sub((output.get("Export") or {}).get("Name"))
        if form and STACK_NAME in form:
            yield NamedByStack(f"Outputs.{output_id}.Export.Name", form, None)


def _sub(value: Any) -> str | None:
    if isinstance(value, Mapping) and "Fn::Sub" in value and isinstance(value["Fn::Sub"], str):
        return str(value["Fn::Sub"])
    return None


def load(path: Path = TEMPLATE) -> Mapping[str, Any]:
    from cfnlint.decode import decode  # cfn-lint reads CloudFormation's YAML tags

    template, errors = decode(str(path))
    if errors or template is None:
        raise ValueError(f"{path} does not parse: {errors}")
    parsed: Mapping[str, Any] = template
    return parsed


def max_stack_name_length(template: Mapping[str, Any]) -> tuple[int, NamedByStack | None]:
    """The longest stack name every known limit takes, and the name that binds it."""
    parameters = template.get("Parameters") or {}
    longest, binding = MAX_STACK_NAME, None
    for named in named_by_stack(template):
        allowed = named.longest_stack_name(parameters)
        if allowed is not None and allowed < longest:
            longest, binding = allowed, named
    return longest, binding


def problem(stack_name: str, template: Mapping[str, Any]) -> str | None:
    """Why `stack_name` cannot deploy this template, or None."""
    longest, binding = max_stack_name_length(template)
    if not STACK_NAME_PATTERN.fullmatch(stack_name):
        return (
            f"stack name {stack_name!r}: CloudFormation takes a letter, then letters, digits "
            f"and hyphens, {MAX_STACK_NAME} characters at most"
        )
    if len(stack_name) > longest:
        assert binding is not None
        return (
            f"stack name {stack_name!r} has {len(stack_name)} characters; this template takes "
            f"at most {longest}: {binding.where} is {binding.form!r}, at most {binding.limit} "
            "characters"
        )
    return None


def deployed_name(deploy_flags: str, samconfig: Path = SAMCONFIG) -> str | None:
    """The stack name `sam deploy DEPLOY_FLAGS` deploys: its --stack-name, else samconfig.toml's
    (the default environment's deploy, then global, parameters). `--guided` may still ask for
    another one; that answer is not seen here."""
    flags = shlex.split(deploy_flags)
    for index, flag in enumerate(flags):
        if flag == "--stack-name" and index + 1 < len(flags):
            return flags[index + 1]
        if flag.startswith("--stack-name="):
            return flag.partition("=")[2]
    if not samconfig.exists():
        return None
    default = tomllib.loads(samconfig.read_text()).get("default", {})
    for command in ("deploy", "global"):
        name = default.get(command, {}).get("parameters", {}).get("stack_name")
        if name:
            return str(name)
    return None


def main(argv: list[str]) -> int:
    """`STACK_NAME`, or `--deploy-flags FLAGS` (the name `sam deploy FLAGS` would deploy)."""
    if len(argv) == 2 and argv[0] == "--deploy-flags":
        name = deployed_name(argv[1])
        if name is None:
            return 0  # sam deploy --guided asks for it: nothing to check before
    elif len(argv) == 1:
        name = argv[0]
    else:
        print("usage: python -m cfn_rules.stack_name STACK_NAME | --deploy-flags FLAGS")
        return 2
    found = problem(name, load())
    if found:
        print(found, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
