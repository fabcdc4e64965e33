"""schemas/ is generated from the models; a stale copy fails here (`capacity-launcher schemas
--write` regenerates it)."""

import json
from functools import cache
from pathlib import Path

import jsonschema
import pytest
import yaml

from capacity_launcher_cli.schemas import contract, contract_names, contracts, render

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", contract_names())
def test_checked_in_schema_matches_the_model(name: str) -> None:
    checked_in = (REPO / "schemas" / name).read_text(encoding="utf-8")

    assert checked_in == render(contract(name)), "run: capacity-launcher schemas --write"


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


@cache
def _validator(name: str) -> jsonschema.protocols.Validator:
    """schemas/NAME's validator, the schema checked against its metaschema once."""
    schema = json.loads((REPO / "schemas" / name).read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def _validate(document: object, name: str) -> None:
    """jsonschema.validate(document, schemas/NAME), without checking the schema again for each
    document (that check was nine tenths of the test's CPU)."""
    error = jsonschema.exceptions.best_match(_validator(name).iter_errors(document))
    if error is not None:
        raise error


def test_every_served_version_has_a_schema_its_examples_validate_against() -> None:
    from capacity_launcher.domain.apis.served_versions import REGISTRY
    from capacity_launcher_cli.schemas import version_file

    files = {version_file(v.api_version, v.kind) for v in REGISTRY.versions()}
    files.discard(version_file("capacity-launcher/v1", "CapacityQuota"))  # capacity-quota.json
    assert files <= set(contracts())
    paths = [
        REPO / "examples" / "node-classes.yaml",
        REPO / "examples" / "node-pools.yaml",
        *sorted((REPO / "examples" / "karpenter").rglob("*.yaml")),
        *sorted((REPO / "examples" / "ome").glob("*.yaml")),
        *sorted((REPO / "examples" / "provisioner").glob("*.yaml")),
        REPO / "examples" / "cohorts" / "0-cohorts.yaml",
    ]
    checked = set()
    for path in paths:
        for document in (d for d in yaml.safe_load_all(path.read_text()) if d):
            name = version_file(document["apiVersion"], document["kind"])
            if path.name == "windows-custom-userdata.yaml" and document["kind"] == "NodePool":
                # Karpenter refuses it (nodeClassRef.group must not contain '/'): so does this.
                with pytest.raises(jsonschema.ValidationError, match="does not match"):
                    _validate(document, name)
                continue
            _validate(document, name)
            checked.add(name)
    assert checked == files
    v1 = json.loads((REPO / "schemas" / "karpenter.sh-v1-nodepool.json").read_text())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"apiVersion": "karpenter.sh/v1beta1", "kind": "NodePool"}, v1)


def test_ome_capacity_reservation_schema_refuses_what_apply_refuses() -> None:
    schema = json.loads((REPO / "schemas" / "ome.io-v1beta1-capacityreservation.json").read_text())
    example = yaml.safe_load((REPO / "examples" / "ome" / "7-team-a-reservation.yaml").read_text())

    jsonschema.validate(example, schema)
    bad = {**example, "spec": {**example["spec"], "allowBorrowing": "yes"}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


def test_provisioner_schema_accepts_the_seed_example() -> None:
    schema = json.loads((REPO / "schemas" / "karpenter.sh-v1alpha4-provisioner.json").read_text())
    example = yaml.safe_load((REPO / "examples" / "provisioner" / "provisioner.yaml").read_text())

    jsonschema.validate(example, schema)
    bad = {**example, "spec": {**example["spec"], "zones": "us-east-1a"}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)
