"""What Karpenter's kinds share: Kubernetes object metadata, validation, and the hub document."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, Field

from capacity_launcher.domain.apis.api_versions import (
    Conversion,
    ServedVersion,
    as_document,
    validated,
)
from capacity_launcher.domain.apis.config_base import BUILT_ON_FIRST_USE, Document, Name
from capacity_launcher.domain.apis.documents import Document as HubDocument
from capacity_launcher.domain.apis.documents import parse_document
from capacity_launcher.domain.errors import ConfigValidationError
from capacity_launcher.domain.field_errors import FieldError

MAX_LABELS = 256
HUB_API_VERSION = "capacity-launcher/v1"


class ObjectMeta(Document):
    """metadata: a name, and labels and annotations kept as written (not acted on)."""

    model_config = BUILT_ON_FIRST_USE

    name: Name
    labels: dict[str, str] | None = Field(default=None, max_length=MAX_LABELS)
    annotations: dict[str, str] | None = Field(default=None, max_length=MAX_LABELS)


# A version's model as its document (one home: api_versions).
dumped = as_document


def hub_document(
    kind: str, name: str, spec: dict[str, Any], rename: Callable[[str], str]
) -> HubDocument:
    """The hub document a converted one stands for; its errors named by the original's paths."""
    document = {"apiVersion": HUB_API_VERSION, "kind": kind, "metadata": {"name": name}}
    try:
        return parse_document({**document, "spec": spec})
    except ConfigValidationError as error:
        renamed = [FieldError(rename(e.field), e.rule) for e in error.errors]
        raise ConfigValidationError(renamed) from None


def served(
    api_versions: tuple[str, str],
    kind: str,
    hub_kind: str,
    model: type[BaseModel],
    to_hub: Callable[[Any], Conversion],
    from_hub: Callable[[str], Callable[[Any, Mapping[str, Any]], dict[str, Any]]],
    hub_only: Callable[[str], Callable[[Any], frozenset[str]]] | None = None,
) -> list[ServedVersion]:
    """A kind's v1 and its deprecated v1beta1, parsed by one model (each version's own rules
    are checked by ``to_hub``); ``hub_only``: each version's ServedVersion.hub_only (none: the
    version expresses every hub field)."""
    v1, v1beta1 = api_versions

    def parse(data: Mapping[str, Any]) -> Any:
        return validated(model, data)

    common: dict[str, Any] = {"parse": parse, "to_hub": to_hub, "document": dumped, "model": model}

    def own(api_version: str) -> dict[str, Any]:
        found: dict[str, Any] = {"from_hub": from_hub(api_version)}
        if hub_only is not None:
            found["hub_only"] = hub_only(api_version)
        return found

    return [
        ServedVersion(v1, kind, hub_kind, **own(v1), **common),
        ServedVersion(
            v1beta1, kind, hub_kind, deprecated_by=f"{v1} {kind}", **own(v1beta1), **common
        ),
    ]
