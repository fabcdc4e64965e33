"""The event schema registry in template.yaml: one AWS::EventSchemas::Schema per event family,
whose Content is the file in schemas/eventbridge/, generated from the models (`capacity-launcher
schemas --write`), covering every detail-type the service publishes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from capacity_launcher.domain.records.status import ALL_DETAIL_TYPES, EVENT_SOURCE, LAUNCH_REQUESTED
from capacity_launcher_cli.event_registry import (
    REGISTRY_TYPE,
    SCHEMAS,
    registry_schemas,
    template_section,
    unregistered,
)
from capacity_launcher_cli.schemas import contracts, render
from local_cloud.template import load_template
from tests.support.event_registry import check_registered

REPO = Path(__file__).resolve().parents[2]
REGISTRY_FILES = REPO / "schemas" / "eventbridge"


@pytest.fixture(scope="module")
def resources() -> dict[str, Any]:
    return load_template(REPO / "template.yaml")["Resources"]  # type: ignore[no-any-return]


def _schemas_in(resources: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        logical_id: resource["Properties"]
        for logical_id, resource in resources.items()
        if resource["Type"] == "AWS::EventSchemas::Schema"
    }


def test_the_stack_has_a_registry_and_each_schema_is_in_it(resources: dict[str, Any]) -> None:
    assert resources["EventSchemaRegistry"]["Type"] == "AWS::EventSchemas::Registry"
    schemas = _schemas_in(resources)

    assert set(schemas) == {s.logical_id for s in SCHEMAS}
    for properties in schemas.values():
        assert properties["RegistryName"] == {"Fn::GetAtt": ["EventSchemaRegistry", "RegistryName"]}
        assert properties["Type"] == REGISTRY_TYPE


@pytest.mark.parametrize("schema", SCHEMAS, ids=lambda s: s.name)
def test_the_templates_schema_is_the_file(resources: dict[str, Any], schema: Any) -> None:
    properties = _schemas_in(resources)[schema.logical_id]
    checked_in = json.loads((REGISTRY_FILES / schema.file_name).read_text(encoding="utf-8"))

    assert properties["SchemaName"] == schema.name
    assert json.loads(properties["Content"]) == checked_in


def test_the_files_and_the_templates_section_are_what_the_models_generate() -> None:
    generated = registry_schemas(contracts())
    template = (REPO / "template.yaml").read_text(encoding="utf-8")

    stale = "run: capacity-launcher schemas --write"
    assert sorted(p.name for p in REGISTRY_FILES.glob("*.json")) == sorted(generated)
    for name, schema in generated.items():
        assert (REGISTRY_FILES / name).read_text() == render(schema), stale
    assert template_section(contracts()) in template, stale


def test_every_published_detail_type_has_a_schema() -> None:
    assert unregistered() == set()
    registered = {t for s in SCHEMAS for t in s.detail_types}
    assert registered == {*ALL_DETAIL_TYPES, LAUNCH_REQUESTED}


@pytest.mark.parametrize("name", sorted(p.name for p in REGISTRY_FILES.glob("*.json")))
def test_each_is_a_draft_4_schema(name: str) -> None:
    schema = json.loads((REGISTRY_FILES / name).read_text(encoding="utf-8"))

    jsonschema.Draft4Validator.check_schema(schema)
    text = json.dumps(schema)
    assert "$defs" not in text
    assert '"const"' not in text


def _record(**overrides: Any) -> dict[str, Any]:
    detail = {
        "requestId": "r-1", "nodePool": "general", "requester": None, "status": "Fulfilled",
        "requested": 1, "launched": 1,
        "instances": [{"instanceId": "i-1", "instanceType": "m5.large", "zone": "us-east-1a",
                       "capacityType": "on-demand", "capacityReservationId": None,
                       "capacityReservationType": None, "capacityReservationStartDate": None,
                       "capacityReservationEndDate": None}],
        "unavailableOfferings": [], "errors": [], "receivedAt": "2026-11-22T10:00:00.000Z",
        "finishedAt": "2026-11-22T10:00:02.512Z", "waitForCapacityUntil": None,
        "waitingFor": [], "detailTruncated": None,
    }  # fmt: skip
    return {"detail-type": "Launch Fulfilled", "source": EVENT_SOURCE, "detail": detail} | overrides


def test_a_status_event_passes_and_a_broken_one_is_named() -> None:
    check_registered(_record())

    broken = _record()
    broken["detail"]["status"] = "Done"
    with pytest.raises(AssertionError, match="detail/status"):
        check_registered(broken)
    with pytest.raises(AssertionError, match="source"):
        check_registered(_record(source="someone-else"))
    with pytest.raises(AssertionError, match="no registry schema"):
        check_registered(_record(**{"detail-type": "Launch Finished"}))


def test_a_producers_launch_request_may_not_claim_the_services_source() -> None:
    request = {"requestId": "r-1", "count": 1}
    event = {"detail-type": LAUNCH_REQUESTED, "source": "team-a.scheduler", "detail": request}

    check_registered(event)
    with pytest.raises(AssertionError, match="source"):
        check_registered({**event, "source": EVENT_SOURCE})
    with pytest.raises(AssertionError, match="count"):
        check_registered({**event, "detail": {**request, "count": 0}})
