"""schemas/ is generated from the models; a stale copy fails here (`capacity-launcher schemas
--write` regenerates it)."""

import json
from pathlib import Path

import pytest

from capacity_launcher_cli.schemas import contracts, render

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", sorted(contracts()))
def test_checked_in_schema_matches_the_model(name: str) -> None:
    checked_in = (REPO / "schemas" / name).read_text(encoding="utf-8")

    assert checked_in == render(contracts()[name]), "run: capacity-launcher schemas --write"


def test_launch_request_schema_states_the_contract_rules() -> None:
    schema = json.loads((REPO / "schemas" / "launch-request.json").read_text())

    assert schema["required"] == ["requestId", "count"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["requestId"]["pattern"].startswith("^[A-Za-z0-9]")
    assert schema["properties"]["count"]["maximum"] == 500


def test_request_record_schema_uses_the_wire_names() -> None:
    schema = json.loads((REPO / "schemas" / "request-record.json").read_text())

    assert {"requestId", "nodePool", "unavailableOfferings", "receivedAt", "finishedAt"} <= set(
        schema["properties"]
    )
    assert set(schema["$defs"]["RequestStatus"]["enum"]) == {
        "Fulfilled", "PartiallyFulfilled", "Failed", "Rejected"
    }  # fmt: skip
