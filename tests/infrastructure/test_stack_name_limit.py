"""The longest stack name the template deploys under, computed from the names it builds on
${AWS::StackName}, is the one README documents, and `make deploy`'s check refuses a longer one
before anything is deployed (issue 35)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cfn_rules.stack_name import deployed_name, load, main, max_stack_name_length, problem

ROOT = Path(__file__).resolve().parents[2]


def test_readme_documents_the_limit_the_template_gives() -> None:
    longest, binding = max_stack_name_length(load())
    assert binding is not None and binding.where == "ReservationSyncFunction.FunctionName"
    documented = re.search(
        r"stack name is at most (\d+) characters", (ROOT / "README.md").read_text()
    )
    assert documented is not None and int(documented.group(1)) == longest == 47


def test_a_longer_name_is_refused_naming_the_resource_and_its_limit() -> None:
    template = load()
    assert problem("a" * 47, template) is None
    refused = problem("a" * 48, template)
    assert refused is not None
    assert "48 characters" in refused and "at most 47" in refused
    assert "ReservationSyncFunction.FunctionName" in refused and "64" in refused
    assert problem("9lives", template) is not None  # CloudFormation's own rule: a letter first


def test_a_new_name_built_on_the_stack_name_moves_the_limit() -> None:
    template = dict(load())
    resources = dict(template["Resources"])
    resources["Longer"] = {
        "Type": "AWS::Serverless::Function",
        "Properties": {"FunctionName": {"Fn::Sub": "${AWS::StackName}-a-much-longer-suffix"}},
    }
    template["Resources"] = resources
    longest, binding = max_stack_name_length(template)
    assert binding is not None and binding.where == "Longer.FunctionName"
    assert longest == 64 - len("-a-much-longer-suffix")


def test_deploy_checks_the_name_of_its_flags_else_samconfigs(tmp_path: Path) -> None:
    samconfig = tmp_path / "samconfig.toml"
    samconfig.write_text('[default.global.parameters]\nstack_name = "saved"\n')
    assert deployed_name("--stack-name given --no-confirm-changeset", samconfig) == "given"
    assert deployed_name("--stack-name=given", samconfig) == "given"
    assert deployed_name("--guided", samconfig) == "saved"
    assert deployed_name("", tmp_path / "none.toml") is None
    assert deployed_name("--guided") == "capacity-launcher"  # the repository's samconfig.toml


@pytest.mark.parametrize(("name", "code"), [("capacity-launcher", 0), ("a" * 48, 1)])
def test_the_check_exits_non_zero_on_a_name_too_long(name: str, code: int) -> None:
    assert main([name]) == code
    assert main(["--deploy-flags", f"--stack-name {name}"]) == code
