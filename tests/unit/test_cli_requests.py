"""`submit` flags become the launch request's JSON; the service, not the CLI, judges it."""

import json
from pathlib import Path

import pytest

from capacity_launcher_cli.main import parser
from capacity_launcher_cli.request_commands import (
    UsageError,
    parse_requirement,
    parse_tag,
    request_from_args,
)


def test_a_requirement_flag_with_values() -> None:
    assert parse_requirement("topology.kubernetes.io/zone=In:us-east-1a,us-east-1b") == {
        "key": "topology.kubernetes.io/zone",
        "operator": "In",
        "values": ["us-east-1a", "us-east-1b"],
    }


def test_a_requirement_flag_without_values() -> None:
    assert parse_requirement("karpenter.k8s.aws/instance-gpu-count=Exists") == {
        "key": "karpenter.k8s.aws/instance-gpu-count",
        "operator": "Exists",
    }


@pytest.mark.parametrize("text", ["no-equals", "=In:a", "key="])
def test_a_malformed_requirement_flag_says_the_expected_form(text: str) -> None:
    with pytest.raises(UsageError, match="KEY=OPERATOR:V1,V2"):
        parse_requirement(text)


def test_a_tag_flag_keeps_equals_signs_in_the_value() -> None:
    assert parse_tag("note=a=b") == ("note", "a=b")
    with pytest.raises(UsageError):
        parse_tag("novalue")


def test_flags_override_the_file_and_unset_flags_are_left_out(tmp_path: Path) -> None:
    path = tmp_path / "request.json"
    path.write_text(json.dumps({"requestId": "from-file", "nodePool": "a", "count": 1}))
    args = parser().parse_args(
        ["submit", "-f", str(path), "--count", "3", "--single-zone", "--tag", "team=ml",
         "--requirement", "karpenter.sh/capacity-type=In:reserved"]
    )  # fmt: skip

    request = request_from_args(args)

    assert request == {
        "requestId": "from-file",
        "nodePool": "a",
        "count": 3,
        "singleZone": True,
        "tags": {"team": "ml"},
        "requirements": [
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved"]}
        ],
    }


def test_a_request_without_an_id_gets_one() -> None:
    args = parser().parse_args(["submit", "--node-pool", "general", "--count", "1"])

    assert request_from_args(args)["requestId"].startswith("cli-")
