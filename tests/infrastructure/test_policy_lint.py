"""The IAM policy linter (parliament) finds nothing we have not accepted, with a reason; and it
catches each kind of mistake it is here for."""

import copy
from typing import Any

import pytest

from tests.infrastructure import policy_lint
from tests.infrastructure.policy_checks import transform
from tests.support.template import load_template

Template = dict[str, Any]


@pytest.fixture(scope="module")
def sam() -> Template:
    return load_template()


@pytest.fixture(scope="module")
def cfn(sam: Template) -> Template:
    return transform(sam)


def test_the_template_has_no_finding_but_the_accepted_ones(cfn: Template) -> None:
    assert [str(f) for f in policy_lint.unaccepted(cfn)] == []


def test_every_accepted_finding_still_occurs(cfn: Template) -> None:
    # An accepted finding that no longer happens is an ignore to delete, not to keep.
    found = policy_lint.findings(cfn)
    for accepted in policy_lint.ACCEPTED:
        assert any(accepted.covers(f) for f in found), accepted.reason


def test_launch_statements_together_cover_every_resource_type_a_launch_requires(
    cfn: Template,
) -> None:
    assert policy_lint.launch_resources_not_covered(cfn) == []


def _launcher_statements(template: Template) -> list[dict[str, Any]]:
    policy = template["Resources"]["LauncherFunctionRole"]["Properties"]["Policies"][0]
    return policy["PolicyDocument"]["Statement"]  # type: ignore[no-any-return]


def _add(statement: dict[str, Any]) -> Any:
    def mutate(template: Template) -> None:
        _launcher_statements(template).append(statement)

    return mutate


def _drop_sid(sid: str) -> Any:
    def mutate(template: Template) -> None:
        statements = _launcher_statements(template)
        statements[:] = [s for s in statements if s.get("Sid") != sid]

    return mutate


@pytest.mark.parametrize(
    ("mutate", "issue"),
    [
        pytest.param(
            _add({"Effect": "Allow", "Action": "ec2:LaunchEverything", "Resource": "*"}),
            "UNKNOWN_ACTION",
            id="unknown action",
        ),
        pytest.param(
            _add(
                {
                    "Effect": "Allow",
                    "Action": "dynamodb:GetItem",
                    "Resource": {"Fn::GetAtt": ["StateTable", "Arn"]},
                    "Condition": {"StringEquals": {"events:source": "capacity-launcher"}},
                }
            ),
            "UNKNOWN_CONDITION_FOR_ACTION",
            id="condition key of another service",
        ),
        pytest.param(
            _add(
                {
                    "Effect": "Allow",
                    "Action": "dynamodb:GetItem",
                    "Resource": {"Fn::GetAtt": ["LaunchQueue", "Arn"]},
                }
            ),
            "RESOURCE_MISMATCH",
            id="resource of the wrong type",
        ),
    ],
)
def test_the_linter_catches(sam: Template, mutate: Any, issue: str) -> None:
    broken = copy.deepcopy(sam)
    mutate(broken)
    assert issue in {f.issue for f in policy_lint.unaccepted(transform(broken))}


def test_a_launch_statement_dropped_leaves_resource_types_uncovered(sam: Template) -> None:
    broken = copy.deepcopy(sam)
    _drop_sid("LaunchUsesUnownedResources")(broken)
    assert "ec2:RunInstances on subnet" in policy_lint.launch_resources_not_covered(
        transform(broken)
    )
