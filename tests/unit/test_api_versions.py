"""Served API versions: registry, deprecation, retirement, kept fields (docs/api-versions.md)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capacity_launcher.domain.apis.api_versions import Conversion, ServedVersion, VersionRegistry
from capacity_launcher.domain.apis.config import NodePool
from capacity_launcher.domain.apis.documents import parse_document, to_document
from capacity_launcher.domain.apis.kept_fields import (
    KEPT_ANNOTATION,
    MAX_KEPT_BYTES,
    Kept,
    put,
    take,
)
from capacity_launcher.domain.apis.served_versions import REGISTRY
from capacity_launcher.domain.errors import ConfigValidationError

EXAMPLES = Path(__file__).parents[2] / "examples"
TAINTS = "spec.taints"


def _widget_version(api_version: str, deprecated_by: str | None = None) -> ServedVersion:
    """A made-up version of NodePool: `spec.poolOf` names the class, `spec.taints` is kept."""

    def parse(data: Mapping[str, Any]) -> dict[str, Any]:
        if not isinstance(data.get("spec", {}).get("poolOf"), str):
            raise ConfigValidationError([])
        return dict(data)

    def to_hub(widget: dict[str, Any]) -> Conversion:
        hub = parse_document(
            {
                "apiVersion": "capacity-launcher/v1",
                "kind": "NodePool",
                "metadata": {"name": widget["metadata"]["name"]},
                "spec": {"nodeClassRef": widget["spec"]["poolOf"]},
            }
        )
        kept = take(widget, [TAINTS])
        return Conversion((hub,), Kept(api_version, "Widget", kept, tuple(kept)))

    def from_hub(hub: NodePool, kept: Mapping[str, Any]) -> dict[str, Any]:
        document = {
            "apiVersion": api_version,
            "kind": "Widget",
            "metadata": {"name": hub.name},
            "spec": {"poolOf": hub.spec.node_class_ref},
        }
        return put(document, kept)

    return ServedVersion(
        api_version, "Widget", "NodePool", parse, to_hub, from_hub, deprecated_by=deprecated_by
    )


def _registry() -> VersionRegistry:
    registry = VersionRegistry()
    registry.serve(REGISTRY.hub_version("NodePool"), hub=True)
    registry.serve(_widget_version("example.com/v2"))
    registry.serve(_widget_version("example.com/v1", deprecated_by="example.com/v2 Widget"))
    registry.retire("example.com/v1alpha1", "Widget", "example.com/v2 Widget")
    return registry


def widget(api_version: str = "example.com/v2", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": "Widget",
        "metadata": {"name": "w"},
        "spec": {"poolOf": "general", **spec},
    }


def test_every_capacity_launcher_v1_example_reads_as_itself_unchanged() -> None:
    """The hubs stay served as they are: reading converts nothing and keeps nothing."""
    documents = [
        d
        for path in sorted(EXAMPLES.glob("*.yaml")) + sorted((EXAMPLES / "quotas").glob("*.yaml"))
        for d in yaml.safe_load_all(path.read_text())
        if d
    ]
    assert documents
    for data in documents:
        applied = REGISTRY.read(data)
        assert applied.conversion.hubs == (parse_document(data),)
        assert not applied.conversion.kept
        assert applied.warnings == ()
        hub = applied.conversion.hub
        assert REGISTRY.convert(hub, None, "capacity-launcher/v1", data["kind"]) == to_document(hub)


def test_a_deprecated_version_is_served_and_warns_naming_its_replacement() -> None:
    applied = _registry().read(widget("example.com/v1"))
    assert applied.conversion.hub.spec.node_class_ref == "general"
    assert applied.warnings == ("example.com/v1 Widget is deprecated; use example.com/v2 Widget",)
    assert _registry().read(widget()).warnings == ()


def test_a_version_no_longer_served_is_refused_naming_the_served_ones() -> None:
    with pytest.raises(ConfigValidationError) as caught:
        _registry().read(widget("example.com/v1alpha1"))
    (error,) = caught.value.errors
    assert error.field == "apiVersion"
    assert (
        "example.com/v1alpha1 Widget is no longer served; use example.com/v2 Widget" in error.rule
    )
    assert "served: example.com/v2 Widget, example.com/v1 Widget" in error.rule


def test_an_unknown_version_or_kind_names_what_is_served() -> None:
    with pytest.raises(ConfigValidationError) as caught:
        REGISTRY.read({"apiVersion": "capacity-launcher/v2", "kind": "NodeClass"})
    assert caught.value.errors[0].field == "apiVersion"
    assert "capacity-launcher/v1 NodeClass" in caught.value.errors[0].rule
    with pytest.raises(ConfigValidationError) as caught:
        REGISTRY.read({"apiVersion": "capacity-launcher/v1", "kind": "Gadget"})
    assert caught.value.errors[0].field == "kind"
    assert "NodePool" in caught.value.errors[0].rule
    with pytest.raises(ConfigValidationError) as caught:
        REGISTRY.read({"kind": "NodePool"})
    assert caught.value.errors[0].field == "apiVersion"


def test_output_version_must_be_served_for_the_kind() -> None:
    with pytest.raises(ConfigValidationError) as caught:
        REGISTRY.version_for("NodePool", "example.com/v9")
    assert "capacity-launcher/v1" in caught.value.errors[0].rule


def test_kept_fields_come_back_in_the_version_they_were_applied_in() -> None:
    registry = _registry()
    taints = [{"key": "gpu", "effect": "NoSchedule"}]
    applied = registry.read(widget(taints=taints))
    kept = applied.conversion.kept
    assert kept.not_acted_on == (TAINTS,)
    back = registry.convert(applied.conversion.hub, kept, "example.com/v2", "Widget")
    assert back == widget(taints=taints)


def test_kept_fields_travel_in_an_annotation_through_other_versions() -> None:
    """Read in another version, the kept fields ride in KEPT_ANNOTATION; applying that document
    keeps them again, so nothing is lost on the way (Kubernetes' lossless conversion)."""
    registry = _registry()
    taints = [{"key": "gpu", "effect": "NoSchedule"}]
    applied = registry.read(widget(taints=taints))
    as_hub = registry.convert(
        applied.conversion.hub, applied.conversion.kept, "capacity-launcher/v1", "NodePool"
    )
    carried = json.loads(as_hub["metadata"]["annotations"][KEPT_ANNOTATION])
    assert carried["fields"] == {TAINTS: taints}
    # Applying that hub document strips the annotation from the hub and keeps its fields again.
    again = registry.read(as_hub)
    assert again.conversion.kept == applied.conversion.kept
    assert "annotations" not in to_document(again.conversion.hub)["metadata"]
    back = registry.convert(again.conversion.hub, again.conversion.kept, "example.com/v2", "Widget")
    assert back == widget(taints=taints)


def test_a_broken_kept_annotation_is_refused_by_path() -> None:
    document = widget()
    document["metadata"]["annotations"] = {KEPT_ANNOTATION: "{not json"}
    with pytest.raises(ConfigValidationError) as caught:
        _registry().read(document)
    assert caught.value.errors[0].field == f"metadata.annotations[{KEPT_ANNOTATION}]"


def test_kept_fields_are_bounded() -> None:
    with pytest.raises(ConfigValidationError) as caught:
        Kept("example.com/v2", "Widget", {TAINTS: "x" * MAX_KEPT_BYTES})
    assert caught.value.errors[0].field == TAINTS
    assert f"at most {MAX_KEPT_BYTES} bytes" in caught.value.errors[0].rule


def test_a_version_registered_twice_is_a_programming_error() -> None:
    registry = _registry()
    with pytest.raises(ValueError, match="twice"):
        registry.serve(_widget_version("example.com/v2"))
    with pytest.raises(ValueError, match="is served"):
        registry.retire("example.com/v2", "Widget", "x")


_KEYS = st.text(alphabet="abcdefghij", min_size=1, max_size=4)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.lists(_KEYS, min_size=1, max_size=3).map(".".join), _JSON, max_size=4))
def test_put_then_take_gives_back_every_field(fields: dict[str, Any]) -> None:
    # Paths where one is a prefix of another are not independent fields.
    independent = {
        path: value
        for path, value in fields.items()
        if value is not None
        and not any(other != path and other.startswith(path + ".") for other in fields)
        and not any(path.startswith(other + ".") for other in fields)
    }
    assert take(put({}, independent), independent) == independent


def test_kept_round_trips_through_its_stored_json() -> None:
    kept = Kept("karpenter.sh/v1", "NodePool", {TAINTS: [{"key": "a"}]}, (TAINTS, "x.y"))
    assert Kept.from_json(json.loads(json.dumps(kept.to_json()))) == kept
