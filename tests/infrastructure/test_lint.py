"""cfn-lint, configured by .cfnlintrc.yaml (serverless rules + cfn_rules/), passes and can fail."""

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.template import load_template

REPO = Path(__file__).resolve().parents[2]
CFN_LINT = Path(sys.executable).parent / "cfn-lint"


def _lint(template: Path) -> subprocess.CompletedProcess[str]:
    # From the repository root, so .cfnlintrc.yaml and its append_rules apply.
    return subprocess.run(
        [str(CFN_LINT), "--format", "parseable", str(template)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def broken_lint(tmp_path_factory: pytest.TempPathFactory) -> subprocess.CompletedProcess[str]:
    template: dict[str, Any] = load_template()
    resources = template["Resources"]
    del template["Globals"]["Function"]["Tracing"]  # serverless rule WS1000
    del resources["LaunchQueue"]["Properties"]["RedrivePolicy"]  # ES6000 and E9101
    del resources["StateTable"]["Properties"]["SSESpecification"]  # E9102
    role = resources["ReservationSyncFunctionRole"]["Properties"]["Policies"][0]
    role["PolicyDocument"]["Statement"].append(
        {"Effect": "Allow", "Action": "resource-groups:Get*", "Resource": "*"}  # E9103
    )
    path = tmp_path_factory.mktemp("lint") / "template.json"
    path.write_text(json.dumps(template), encoding="utf-8")
    return _lint(path)


@pytest.mark.skipif(not CFN_LINT.exists(), reason="cfn-lint is not installed beside this Python")
def test_template_is_lint_clean() -> None:
    result = _lint(REPO / "template.yaml")
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


@pytest.mark.skipif(not CFN_LINT.exists(), reason="cfn-lint is not installed beside this Python")
@pytest.mark.parametrize("rule", ["WS1000", "ES6000", "E9101", "E9102", "E9103"])
def test_configured_rules_catch_regressions(
    broken_lint: subprocess.CompletedProcess[str], rule: str
) -> None:
    assert broken_lint.returncode != 0
    assert f":{rule}:" in broken_lint.stdout
