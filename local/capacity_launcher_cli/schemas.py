"""JSON Schemas of the public contracts, generated from the models that enforce them.

Checked in under schemas/ for the EventBridge schema registry and for producers; a test
regenerates them and fails when the checked-in copies are stale.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from capacity_launcher.domain.apis.api_versions import ServedVersion
from capacity_launcher.domain.apis.config_base import _NAME
from capacity_launcher.domain.apis.quota_preemption import DURATION_PATTERN
from capacity_launcher.domain.apis.quotas import CapacityQuota
from capacity_launcher.domain.apis.served_versions import REGISTRY
from capacity_launcher.domain.launch_request import (
    MAX_BODY_BYTES,
    MAX_NESTING,
    REQUEST_ID_PATTERN,
    LaunchRequest,
)
from capacity_launcher.domain.quantities import DIMENSIONS
from capacity_launcher.domain.records.event_details import (
    BlockEndDetail,
    InstanceTerminatedDetail,
    ReservationEventDetail,
)
from capacity_launcher.domain.records.reclaims import ReclaimClosed, ReclaimRequested
from capacity_launcher.domain.records.status import (
    BLOCK_EXPIRING,
    EVENT_SOURCE,
    INSTANCE_TERMINATED,
    LAUNCH_REQUESTED,
    RECLAIM_CLOSED,
    RECLAIM_REQUESTED,
    RequestRecord,
)
from capacity_launcher_cli.event_registry import registry_schemas, write_template

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def _schema(model: Any, mode: str, title: str, description: str) -> dict[str, Any]:
    generated: dict[str, Any] = model.model_json_schema(by_alias=True, mode=mode)
    return {"$schema": SCHEMA_DIALECT, **generated, "title": title, "description": description}


def _launch_request() -> dict[str, Any]:
    schema = _schema(
        LaunchRequest,
        "validation",
        "LaunchRequest",
        f"The detail of a {LAUNCH_REQUESTED!r} event, or an SQS message body: at most "
        f"{MAX_BODY_BYTES} bytes, nesting at most {MAX_NESTING} levels of arrays and objects "
        "(the body counted; a field nested deeper is refused by name).",
    )
    # The model checks the id in code; the schema states the same rule for producers.
    schema["properties"]["requestId"]["pattern"] = REQUEST_ID_PATTERN.pattern
    return schema


# Quantities as documents spell them: numbers, or strings with a CPU or memory suffix.
_QUANTITY = {
    "description": "cores ('2', '500m'), bytes with a suffix ('8Ti', '512Gi') or a count ('32')",
    "anyOf": [
        {
            "type": "string",
            "pattern": r"^(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:m|Ki|Mi|Gi|Ti|Pi|Ei|K|k|M|G|T|P|E)?$",
        },
        {"type": "number", "minimum": 0},
    ],
}


def _capacity_quota() -> dict[str, Any]:
    schema = _schema(
        CapacityQuota,
        "validation",
        "CapacityQuota",
        "A team's nominal quota per NodePool (flavor) and resource, shared in a cohort "
        "(docs/quotas.md). Cross-field rules are enforced by `capacity-launcher apply`.",
    )
    # The model parses quantities and checks names in code; the schema states the same rules.
    defs = schema["$defs"]
    defs["Quantity"] = _QUANTITY
    quantity = {"$ref": "#/$defs/Quantity"}
    resource_name = {"type": "string", "enum": list(DIMENSIONS)}
    name = {"type": "string", "pattern": _NAME.pattern}
    resource = defs["QuotaResource"]["properties"]
    resource["name"] = resource_name
    for field in ("nominalQuota", "borrowingLimit", "lendingLimit"):
        resource[field] = quantity
    defs["ResourceGroup"]["properties"]["coveredResources"]["items"] = resource_name
    defs["PoolLimits"]["properties"] = dict.fromkeys(DIMENSIONS, quantity)
    defs["Flavor"]["properties"]["name"] = name
    defs["Metadata"]["properties"]["name"] = name
    defs["CapacityQuotaSpec"]["properties"]["cohort"] = name
    defs["Preemption"]["properties"]["gracePeriod"] |= {"pattern": DURATION_PATTERN.pattern}
    return schema


def version_file(api_version: str, kind: str) -> str:
    """`karpenter.sh/v1` `NodePool` -> `karpenter.sh-v1-nodepool.json`."""
    return f"{api_version.replace('/', '-')}-{kind.lower()}.json"


def _served_version(version: ServedVersion) -> dict[str, Any]:
    schema = _schema(
        version.model,
        "validation",
        f"{version.api_version} {version.kind}",
        f"A {version.kind} document in {version.api_version} (docs/api-versions.md): "
        + (f"deprecated, use {version.deprecated_by}; " if version.deprecated_by else "")
        + f"converted on apply to the {REGISTRY.hub_version(version.hub_kind).api_version} "
        + f"{version.hub_kind}. Cross-field "
        "rules are enforced by `capacity-launcher apply`.",
    )
    schema["properties"]["apiVersion"] = {"const": version.api_version}
    schema["properties"]["kind"] = {"const": version.kind}
    defs = schema.get("$defs", {})
    if "PoolLimits" in defs:
        # The model parses quantities in code; the schema states the same rules.
        defs["Quantity"] = _QUANTITY
        defs["PoolLimits"]["properties"] = {d: {"$ref": "#/$defs/Quantity"} for d in DIMENSIONS}
    return schema


def served_versions() -> dict[str, dict[str, Any]]:
    """A schema for every served version of every kind (the hub CapacityQuota is
    capacity-quota.json)."""
    return {name: build() for name, build in _served_builders().items()}


def _served_builders() -> dict[str, Callable[[], dict[str, Any]]]:
    return {
        version_file(v.api_version, v.kind): partial(_served_version, v)
        for v in REGISTRY.versions()
        if v.model is not None and v.model is not CapacityQuota
    }


def contracts() -> dict[str, dict[str, Any]]:
    """File name -> schema, for every contract schemas/ carries."""
    return {name: build() for name, build in _builders().items()}


def contract(name: str) -> dict[str, Any]:
    """One file's schema, the others not generated (`explain`; KeyError: not a contract)."""
    return _builders()[name]()


def contract_names() -> list[str]:
    """The files schemas/ carries (no schema generated)."""
    return sorted(_builders())


def _builders() -> dict[str, Callable[[], dict[str, Any]]]:
    """File name -> what generates its schema."""
    return {
        **_served_builders(),
        "block-end-event.json": partial(
            _schema,
            BlockEndDetail,
            "serialization",
            "BlockEndEvent",
            f"The detail of the Capacity Block Evacuating and Capacity Block Extension Purchased "
            f"events (source {EVENT_SOURCE!r}): what a static NodePool's capacityBlockEnd (or a "
            "launch request's that opted in) made "
            "the sync do for a Capacity Block nearing its end, and why "
            "(docs/static-capacity.md).",
        ),
        "capacity-quota.json": _capacity_quota,
        "instance-terminated.json": partial(
            _schema,
            InstanceTerminatedDetail,
            "serialization",
            "InstanceTerminated",
            f"The detail of an {INSTANCE_TERMINATED!r} event (source {EVENT_SOURCE!r}): one of "
            "the service's instances stopped, terminated or was interrupted, and what it held "
            "was released.",
        ),
        "launch-request.json": _launch_request,
        "reclaim-closed.json": partial(
            _schema,
            ReclaimClosed,
            "serialization",
            "ReclaimClosed",
            f"The detail of a {RECLAIM_CLOSED!r} event (source {EVENT_SOURCE!r}): how the sync "
            "closed an open reclaim, why, what it terminated and what it spared; an enforced "
            "reclaim terminates only what the quotas of that moment still allow "
            "(docs/quotas.md).",
        ),
        "reclaim-requested.json": partial(
            _schema,
            ReclaimRequested,
            "serialization",
            "ReclaimRequested",
            f"The detail of a {RECLAIM_REQUESTED!r} event (source {EVENT_SOURCE!r}): a lender "
            "quota asks the borrowers in its cohort to release these instances by releaseBy; "
            "when enforced, the sync terminates those still running then (docs/quotas.md).",
        ),
        "reservation-event.json": partial(
            _schema,
            ReservationEventDetail,
            "serialization",
            "ReservationEvent",
            f"The detail of the Capacity Reservation Exhausted, Replenished, Utilization High, "
            f"Underutilized, Expiring, Activated and Expired events and of {BLOCK_EXPIRING!r} "
            f"(source {EVENT_SOURCE!r}): the reservation as the sync saw it.",
        ),
        "request-record.json": partial(
            _schema,
            RequestRecord,
            "serialization",
            "RequestRecord",
            f"`capacity-launcher status` output, and the detail of the Launch Fulfilled, "
            f"Partially Fulfilled, Failed and Rejected events, and of Launch Waiting while a "
            f"request waits for scheduled capacity (source {EVENT_SOURCE!r}).",
        ),
    }


def render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


REGISTRY_FOLDER = "eventbridge"


def write(directory: str | Path, template: str | Path | None = None) -> list[Path]:
    """The contracts to `directory`, the registry's schemas to its eventbridge/ folder, and
    the registry into `template`'s generated section."""
    target = Path(directory)
    (target / REGISTRY_FOLDER).mkdir(parents=True, exist_ok=True)
    written = []
    models = contracts()
    files = {
        **models,
        **{f"{REGISTRY_FOLDER}/{n}": s for n, s in registry_schemas(models).items()},
    }
    for name, schema in files.items():
        path = target / name
        path.write_text(render(schema), encoding="utf-8")
        written.append(path)
    if template is not None and write_template(template, models):
        written.append(Path(template))
    return written


def schemas_command(write_files: bool, directory: str, template: str | None = None) -> int:
    if write_files:
        for path in write(directory, template):
            print(f"wrote {path}")
        return 0
    print(json.dumps(contracts(), indent=2, sort_keys=True))
    return 0
