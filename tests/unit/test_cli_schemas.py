"""schemas/ is generated from the models; a stale copy fails here (`capacity-launcher schemas
--write` regenerates it)."""

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

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
        "Fulfilled", "PartiallyFulfilled", "Failed", "Rejected", "Waiting"
    }  # fmt: skip
    assert {"waitForCapacityUntil", "waitingFor"} <= set(schema["properties"])
    instance = schema["$defs"]["LaunchedInstance"]["properties"]
    assert {"capacityReservationType", "capacityReservationStartDate"} <= set(instance)


def test_capacity_quota_schema_accepts_the_examples_and_states_units_and_names() -> None:
    schema = json.loads((REPO / "schemas" / "capacity-quota.json").read_text())
    example_file = REPO / "examples" / "quotas" / "capacity-quotas.yaml"
    examples = list(yaml.safe_load_all(example_file.read_text()))

    for example in examples:
        jsonschema.validate(example, schema)
    resource = schema["$defs"]["QuotaResource"]["properties"]
    assert resource["name"]["enum"] == ["cpu", "memory", "nvidia.com/gpu", "instances"]
    bad = {**examples[0], "spec": {**examples[0]["spec"], "priority": "high"}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)
    quantity = {"$ref": "#/$defs/Quantity", "$defs": schema["$defs"]}
    for good in ("8Ti", "500m", "32", 4):
        jsonschema.validate(good, quantity)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate("8 TB", quantity)


def test_ome_capacity_reservation_schema_accepts_the_seed_examples() -> None:
    schema = json.loads((REPO / "schemas" / "ome-capacity-reservation.json").read_text())
    examples = [
        document
        for path in sorted((REPO / "examples" / "ome").glob("*.yaml"))
        for document in yaml.safe_load_all(path.read_text())
    ]

    assert len(examples) == 7
    for example in examples:
        jsonschema.validate(example, schema)
    bad = {**examples[0], "spec": {**examples[0]["spec"], "allowBorrowing": "yes"}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


def test_provisioner_schema_accepts_the_seed_example() -> None:
    schema = json.loads((REPO / "schemas" / "provisioner-v1alpha4.json").read_text())
    example = yaml.safe_load((REPO / "examples" / "provisioner" / "provisioner.yaml").read_text())

    jsonschema.validate(example, schema)
    bad = {**example, "spec": {**example["spec"], "zones": "us-east-1a"}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)
