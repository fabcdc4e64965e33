"""The kinds served as their own hub: stored as written, with no other version to convert from
(the ``capacity-launcher/v1`` kinds, a PriorityClass, a Kueue Cohort). Each registers one
`ServedVersion` built by `own_hub` (domain/apis/api_versions.py, docs/api-versions.md)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel

from capacity_launcher.domain.apis.api_versions import Conversion, ServedVersion, as_document
from capacity_launcher.domain.apis.kept_fields import Kept


def own_hub(
    api_version: str,
    kind: str,
    model: type[BaseModel],
    parse: Callable[[Mapping[str, Any]], Any],
    kept: Callable[[Any], Kept],
    document: Callable[[Any], dict[str, Any]] = as_document,
) -> ServedVersion:
    """A kind served as its own hub, stored as written (the ``capacity-launcher/v1`` kinds, a
    PriorityClass, a Kueue Cohort): ``kept`` says what its apply reports as not acted on."""

    def to_hub(document: Any) -> Conversion:
        return Conversion((document,), kept(document))

    def from_hub(hub: Any, kept_fields: Mapping[str, Any]) -> dict[str, Any]:
        return document(hub)

    return ServedVersion(
        api_version=api_version,
        kind=kind,
        hub_kind=kind,
        parse=parse,
        to_hub=to_hub,
        from_hub=from_hub,
        document=document,
        model=model,
    )
