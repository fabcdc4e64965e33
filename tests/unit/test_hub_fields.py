"""The hub-fields annotation carries only the hub fields a version has no place for
(docs/api-versions.md): what a reviewer approves in the visible document is what is stored.

Each served version declares its hub-only paths (ServedVersion.hub_only); the first two tests
check the declarations against the conversions themselves, over hubs that set every hub field.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from capacity_launcher.domain.apis.api_versions import Conversion, ServedVersion, VersionRegistry
from capacity_launcher.domain.apis.config import NodePool
from capacity_launcher.domain.apis.documents import Document, parse_document, to_document
from capacity_launcher.domain.apis.kept_fields import HUB_FIELDS_ANNOTATION, HUB_FIELDS_PATH, Kept
from capacity_launcher.domain.apis.priority_classes import (
    PriorityTable,
    parse_priority_class,
    priority_table,
)
from capacity_launcher.domain.apis.served_versions import REGISTRY
from capacity_launcher.domain.errors import ConfigValidationError
from tests.unit.test_priority_classes import _reservation as ome_reservation

NO_CLASSES = PriorityTable()
NODE_CLASS: dict[str, Any] = {
    "apiVersion": "capacity-launcher/v1",
    "kind": "NodeClass",
    "metadata": {"name": "gpu"},
    "spec": {
        "imageSsmParameter": "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default",
        "subnetSelectorTerms": [{"tags": {"tier": "private"}}],
        "securityGroupIds": ["sg-0a1b2c3d4e5f67890"],
    },
}
NODE_POOL: dict[str, Any] = {
    "apiVersion": "capacity-launcher/v1",
    "kind": "NodePool",
    "metadata": {"name": "gpu"},
    "spec": {"nodeClassRef": "gpu"},
}
# A hub field's variants: each sets (or, with None, removes) spec fields of the base.
VARIANTS: dict[str, list[dict[str, Any]]] = {
    "NodeClass": [
        {"imageSsmParameter": None, "imageId": "ami-0123456789abcdef0"},
        {"arm64ImageSsmParameter": "/aws/service/arm64/image_id"},
        {
            "acceleratedImageSsmParameters": [
                {"ssmParameter": "/aws/service/nvidia/image_id", "variant": "nvidia"}
            ]
        },
        {"imageSsmParameter": None, "imageSelectorTerms": [{"name": "my-*", "owner": "self"}]},
        {"subnetSelectorTerms": None, "subnetIds": ["subnet-0123456789abcdef0"]},
        {"securityGroupIds": None, "securityGroupSelectorTerms": [{"tags": {"a": "b"}}]},
        {"instanceProfile": "gpu-nodes"},
        {"role": "KarpenterNodeRole-gpu"},
        {"userData": "#!/bin/sh\necho hello\n"},
        {"tags": {"team": "ml"}},
        {"capacityReservationSpec": {"capacityReservationPreference": "none"}},
        {"capacityReservationSelectorTerms": [{"tags": {"reservation": "training"}}]},
        {"blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "20Gi"}}]},
        {"metadataOptions": {"httpTokens": "required"}},
        {"launchTemplateName": "gpu-template"},
    ],
    "NodePool": [
        {"nodeClassRef": "other"},
        {"weight": 5},
        {
            "requirements": [
                {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m5"]}
            ]
        },
        {"limits": {"cpu": "4", "instances": "3"}},
        {"replicas": 2, "limits": {"instances": "3"}},
        {"replicas": 2, "replicasFrom": "Reserved"},
        {
            "replicas": 2,
            "capacityBlockEnd": {"action": "Extend", "maxExtensionPrice": "5000"},
        },
    ],
    "CapacityQuota": [
        {"cohort": "serving"},
        {"priority": 250},
        {"allowBorrowing": True},
        {"preemption": {"reclaimWithinCohort": "Any"}},
        {"preemption": {"reclaimWithinCohort": "Never", "gracePeriod": "5m"}},
        {"fairSharing": {"weight": "0.5"}},
        {"requesters": ["team-a"]},
        {"requesterPrefixes": ["team-"]},
        {
            "requesters": ["team-a"],
            "requesterOrigins": {"team-a": {"accounts": ["111122223333"]}},
        },
        {
            "resourceGroups": [
                {
                    "coveredResources": ["nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": "h100",
                            "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "16"}],
                        }
                    ],
                }
            ]
        },
    ],
}


def reservation(priority_class: str | None = None, **spec: Any) -> dict[str, Any]:
    """An OME reservation of 8 GPUs (naming ``priority_class`` when given)."""
    found = ome_reservation(priority_class)
    found["spec"].update(spec)
    return found


def karpenter_pool(annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A karpenter.sh/v1 NodePool whose visible limit is 4 CPUs."""
    metadata: dict[str, Any] = {"name": "gpu"}
    if annotations is not None:
        metadata["annotations"] = dict(annotations)
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": metadata,
        "spec": {
            "template": {
                "spec": {
                    "requirements": [
                        {
                            "key": "node.kubernetes.io/instance-type",
                            "operator": "In",
                            "values": ["m5.large"],
                        }
                    ],
                    "nodeClassRef": {
                        "group": "karpenter.k8s.aws",
                        "kind": "EC2NodeClass",
                        "name": "gpu",
                    },
                }
            },
            "limits": {"cpu": 4},
        },
    }


def hub_fields(**fields: Any) -> dict[str, str]:
    return {HUB_FIELDS_ANNOTATION: json.dumps(fields)}


def annotated(document: dict[str, Any], fields: Mapping[str, Any]) -> dict[str, Any]:
    found = copy.deepcopy(document)
    annotations = found["metadata"].setdefault("annotations", {})
    annotations[HUB_FIELDS_ANNOTATION] = json.dumps(dict(fields))
    return found


def rules(document: dict[str, Any], references: Any = None) -> list[str]:
    with pytest.raises(ConfigValidationError) as refused:
        REGISTRY.read(document, references)
    assert {e.field for e in refused.value.errors} == {HUB_FIELDS_PATH}
    return [e.rule for e in refused.value.errors]


def _base(kind: str) -> dict[str, Any]:
    if kind == "CapacityQuota":
        hub = REGISTRY.read(reservation(cohort="research"), NO_CLASSES).conversion.hub
        return to_document(hub)
    return copy.deepcopy(NODE_CLASS if kind == "NodeClass" else NODE_POOL)


def sample_hubs(kind: str) -> Iterator[Document]:
    """The base hub of ``kind``, then each variant of it that is a valid hub."""
    base = _base(kind)
    yield parse_document(base)
    for variant in VARIANTS[kind]:
        document = copy.deepcopy(base)
        for name, value in variant.items():
            if value is None:
                document["spec"].pop(name)
            else:
                document["spec"][name] = value
        yield parse_document(document)


def carried(document: Mapping[str, Any]) -> dict[str, Any]:
    annotations = document.get("metadata", {}).get("annotations", {})
    found: dict[str, Any] = json.loads(annotations.get(HUB_FIELDS_ANNOTATION, "{}"))
    return found


def without_carried(document: Mapping[str, Any]) -> dict[str, Any]:
    found = copy.deepcopy(dict(document))
    annotations = found.get("metadata", {}).get("annotations", {})
    annotations.pop(HUB_FIELDS_ANNOTATION, None)
    if not annotations:
        found.get("metadata", {}).pop("annotations", None)
    return found


def readings() -> Iterator[tuple[ServedVersion, Document, dict[str, Any]]]:
    """Every sample hub read in every served version of its kind that can read it."""
    for kind in VARIANTS:
        for hub in sample_hubs(kind):
            for version in REGISTRY.served_for(kind):
                try:
                    document = REGISTRY.convert(
                        hub, None, version.api_version, version.kind, NO_CLASSES
                    )
                except ConfigValidationError:
                    continue  # the version cannot say this hub: refused by path, never carried
                yield version, hub, document


@pytest.mark.parametrize("kind", sorted(VARIANTS))
def test_the_samples_set_every_field_of_the_hubs_spec(kind: str) -> None:
    """So a hub field added later must join the samples, and each version's declaration."""
    model = type(next(sample_hubs(kind)))
    spec_model = model.model_fields["spec"].annotation
    assert spec_model is not None
    fields = {f.alias or name for name, f in spec_model.model_fields.items()}
    set_by_samples = {name for hub in sample_hubs(kind) for name in to_document(hub)["spec"]}
    assert fields <= set_by_samples


def test_every_field_a_version_reads_back_in_the_annotation_is_one_it_declares() -> None:
    """Else `get -o yaml | apply -f -` of that object would be refused: what the registry
    carries in the annotation must be what the version's hub_only lets an apply set."""
    for version, _, document in readings():
        declared = version.hub_only(version.parse(without_carried(document)))
        assert set(carried(document)) <= declared, version.label


def test_every_declared_field_travels_in_the_annotation_and_applies_back() -> None:
    """A declared path the version could write in its document would never need the
    annotation: each one is seen carried, and the document carrying it applies back to the
    hub it was read from (a round trip for every served version with carried fields)."""
    declared: dict[str, set[str]] = {}
    seen: dict[str, set[str]] = {}
    for version, hub, document in readings():
        paths = version.hub_only(version.parse(without_carried(document)))
        declared.setdefault(version.label, set()).update(paths)
        seen.setdefault(version.label, set()).update(carried(document))
        if carried(document):
            assert REGISTRY.read(document, NO_CLASSES).conversion.hub == hub
    assert declared == seen
    # The versions that read hubs applied otherwise and carry fields in the annotation.
    assert {label for label, paths in seen.items() if paths} == {
        "karpenter.k8s.aws/v1 EC2NodeClass",
        "karpenter.k8s.aws/v1beta1 EC2NodeClass",
        "ome.io/v1beta1 CapacityReservation",
        "ome.io/v1beta1 ClusterCapacityReservation",
    }


def test_a_nodepool_limit_and_name_cannot_be_overridden_by_the_annotation() -> None:
    """Issue 34: a NodePool whose visible limits.cpu is 4 was stored under another name with no
    limits, and 5 x m5.large launched into it."""
    attack = karpenter_pool(hub_fields(**{"metadata.name": "other", "spec.limits": None}))

    found = rules(attack)

    assert len(found) == 2
    assert found[0].startswith("may not set metadata.name: metadata is always written")
    assert found[1].startswith("may not set spec.limits: karpenter.sh/v1 NodePool expresses it")
    assert REGISTRY.read(karpenter_pool()).conversion.hub.spec.limits is not None


@pytest.mark.parametrize(
    "fields",
    [
        {"spec.weight": 100},
        {"spec.requirements": []},
        {"spec.nodeClassRef": "other"},
        {"spec.limits.cpu": "100"},
        {"metadata": {"name": "other"}},
        {"status": {}},
    ],
)
def test_nothing_a_nodepool_version_says_can_be_set_by_the_annotation(
    fields: dict[str, Any],
) -> None:
    (rule,) = rules(karpenter_pool(hub_fields(**fields)))
    assert rule.startswith(f"may not set {next(iter(fields))}")


def test_an_ome_priority_and_preemption_cannot_be_overridden_by_the_annotation() -> None:
    """Issue 34: a reservation of priority 500 was stored at 1,000,000,000, reclaiming Any."""
    table = priority_table(
        [
            parse_priority_class(
                {
                    "apiVersion": "scheduling.k8s.io/v1",
                    "kind": "PriorityClass",
                    "metadata": {"name": "team-a-workloads"},
                    "value": 500,
                }
            )
        ]
    )
    smuggled = {"spec.priority": 1_000_000_000, "spec.preemption": {"reclaimWithinCohort": "Any"}}

    found = rules(annotated(reservation("team-a-workloads"), smuggled), table)

    assert [r.split(":")[0] for r in found] == [
        "may not set spec.preemption",
        "may not set spec.priority",
    ]
    assert "ome.io/v1beta1 CapacityReservation expresses it" in found[1]
    hub = REGISTRY.read(reservation("team-a-workloads"), table).conversion.hub
    assert hub.spec.priority == 500


def test_an_ome_grace_period_is_refused_not_stored_unreadable() -> None:
    """Issue 34: a grace period stored through the annotation could not be read back in OME
    (`OME has no grace period`)."""
    fields = {"spec.preemption": {"reclaimWithinCohort": "Never", "gracePeriod": "1h"}}

    (rule,) = rules(annotated(reservation(), fields), NO_CLASSES)

    assert rule.startswith("may not set spec.preemption: ome.io/v1beta1 CapacityReservation")


def test_apply_says_which_hub_fields_the_annotation_set() -> None:
    """A reservation naming no class carries the priority it was applied with (the default
    class's, since removed): the one hub field it may carry, and the apply names it."""
    applied = REGISTRY.read(annotated(reservation(), {"spec.priority": 250}), NO_CLASSES)

    assert applied.hub_fields == ("spec.priority",)
    assert applied.conversion.hub.spec.priority == 250
    assert REGISTRY.read(reservation(), NO_CLASSES).hub_fields == ()


def _capped_version() -> ServedVersion:
    """A made-up NodePool version that has no place for the weight and reads back only a
    weight of at most 50: the annotation may carry a weight, but not one it cannot read."""

    def parse(data: Mapping[str, Any]) -> dict[str, Any]:
        return dict(data)

    def to_hub(capped: dict[str, Any]) -> Conversion:
        name = capped["metadata"]["name"]
        hub = parse_document({**NODE_POOL, "metadata": {"name": name}})
        return Conversion((hub,), Kept("example.com/v1", "Capped"))

    def from_hub(hub: NodePool, kept: Mapping[str, Any]) -> dict[str, Any]:
        if hub.spec.weight > 50:
            raise ConfigValidationError([])
        return {"apiVersion": "example.com/v1", "kind": "Capped", "metadata": {"name": hub.name}}

    return ServedVersion(
        "example.com/v1",
        "Capped",
        "NodePool",
        parse,
        to_hub,
        from_hub,
        hub_only=lambda document: frozenset({"spec.weight"}),
    )


def test_an_object_its_own_version_cannot_read_back_is_refused() -> None:
    registry = VersionRegistry()
    registry.serve(REGISTRY.hub_version("NodePool"), hub=True)
    registry.serve(_capped_version())
    capped = {"apiVersion": "example.com/v1", "kind": "Capped", "metadata": {"name": "gpu"}}

    assert registry.read(annotated(capped, {"spec.weight": 40})).conversion.hub.spec.weight == 40
    with pytest.raises(ConfigValidationError) as refused:
        registry.read(annotated(capped, {"spec.weight": 90}))
    (error,) = refused.value.errors
    assert error.field == HUB_FIELDS_PATH
    assert "every stored object reads back in the version it was applied in" in error.rule
