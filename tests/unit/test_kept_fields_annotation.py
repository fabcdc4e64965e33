"""The kept-fields annotation gives back only what its document said (docs/api-versions.md):
`get -o yaml` in a version shows the object that is stored, and `get -o yaml | apply -f -` applies
it again. A document carrying kept fields that show another object (fields its version expresses,
with values the stored hub does not hold) is refused, naming the annotation and the paths.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from capacity_launcher.domain.apis.kept_fields import KEPT_ANNOTATION
from capacity_launcher.domain.apis.served_versions import REGISTRY
from capacity_launcher.domain.errors import ConfigValidationError
from tests.unit.test_hub_fields import karpenter_pool

KEPT_PATH = f"metadata.annotations[{KEPT_ANNOTATION}]"
POOL_VERSION = ("karpenter.sh/v1", "NodePool")
CLASS_VERSION = ("karpenter.k8s.aws/v1", "EC2NodeClass")
EVIL_IMAGE = "ami-0123456789abcdef0"
# A hub NodeClass launching EVIL_IMAGE.
HUB_CLASS: dict[str, Any] = {
    "apiVersion": "capacity-launcher/v1",
    "kind": "NodeClass",
    "metadata": {"name": "gpu"},
    "spec": {
        "imageId": EVIL_IMAGE,
        "subnetSelectorTerms": [{"tags": {"tier": "private"}}],
        "securityGroupIds": ["sg-0a1b2c3d4e5f67890"],
    },
}


def carrying(document: dict[str, Any], version: tuple[str, str], **fields: Any) -> dict[str, Any]:
    """`document` with a kept-fields annotation of `version` setting `fields` (dotted paths)."""
    found = copy.deepcopy(document)
    kept = {"apiVersion": version[0], "kind": version[1], "fields": fields, "notActedOn": []}
    found["metadata"].setdefault("annotations", {})[KEPT_ANNOTATION] = json.dumps(kept)
    return found


def shown(document: dict[str, Any], version: tuple[str, str]) -> dict[str, Any]:
    """What `get -o yaml` in `version` prints of the object `document` stores."""
    applied = REGISTRY.read(document)
    return REGISTRY.convert(applied.conversion.hub, applied.conversion.kept, *version)


@pytest.mark.parametrize(
    ("document", "version", "fields", "path"),
    [
        # The visible limit is 4 CPUs; `get` would show 99999 and a p5 pool.
        (
            karpenter_pool(),
            POOL_VERSION,
            {
                "spec.limits": {"cpu": "99999"},
                "spec.template.spec.requirements": [
                    {"key": "node.kubernetes.io/instance-type", "operator": "In",
                     "values": ["p5.48xlarge"]}
                ],
            },
            "spec.limits",
        ),
        # The class launches EVIL_IMAGE; read as Karpenter's, `get` would show an al2023 alias.
        (
            HUB_CLASS,
            CLASS_VERSION,
            {"spec.amiSelectorTerms": [{"alias": "al2023@latest"}]},
            "spec.amiSelectorTerms",
        ),
    ],
)  # fmt: skip
def test_kept_fields_that_show_another_object_are_refused(
    document: dict[str, Any], version: tuple[str, str], fields: dict[str, Any], path: str
) -> None:
    with pytest.raises(ConfigValidationError) as refused:
        REGISTRY.read(carrying(document, version, **fields))

    (error,) = refused.value.errors
    assert error.field == KEPT_PATH
    assert path in error.rule
    assert "as the stored object does not hold them" in error.rule


def test_kept_fields_that_give_back_the_document_still_travel() -> None:
    """The lossless way stays open: a Karpenter pool with taints and a GPU limit (kept, not acted
    on), read as the hub, applied again, reads back as written."""
    pool = karpenter_pool()
    pool["spec"]["template"]["spec"]["taints"] = [{"key": "gpu", "effect": "NoSchedule"}]
    pool["spec"]["limits"]["nvidia.com/gpu"] = "8"
    as_hub = shown(pool, ("capacity-launcher/v1", "NodePool"))
    assert KEPT_ANNOTATION in as_hub["metadata"]["annotations"]

    assert shown(as_hub, POOL_VERSION) == shown(pool, POOL_VERSION)
    assert shown(as_hub, POOL_VERSION)["spec"]["limits"]["nvidia.com/gpu"] == "8"


def test_kept_fields_cannot_say_a_field_acted_on_is_not() -> None:
    """A hub pool of weight 100 (tried before every other) whose kept fields list spec.weight as
    not acted on: apply would print `spec.weight: kept, not acted on`, and status.notActedOn too."""
    pool = {
        "apiVersion": "capacity-launcher/v1",
        "kind": "NodePool",
        "metadata": {"name": "gpu"},
        "spec": {"nodeClassRef": "gpu", "weight": 100},
    }
    document = carrying(pool, POOL_VERSION)
    kept = json.loads(document["metadata"]["annotations"][KEPT_ANNOTATION])
    kept["notActedOn"] = ["spec.weight"]
    document["metadata"]["annotations"][KEPT_ANNOTATION] = json.dumps(kept)

    with pytest.raises(ConfigValidationError) as refused:
        REGISTRY.read(document)

    (error,) = refused.value.errors
    assert error.field == KEPT_PATH
    assert error.rule.startswith("lists spec.weight as not acted on, which is acted on")
