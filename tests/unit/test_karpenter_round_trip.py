"""Property: a Karpenter document converted to the hub and back keeps every field its version has,
directly and through the hub's own version (docs/api-versions.md, kept fields)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capacity_launcher.domain.apis.served_versions import REGISTRY
from tests.unit.test_karpenter_documents import assert_round_trip, ec2nodeclass, nodepool

_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_REQUIREMENTS = [
    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
    {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand", "spot"]},
    {
        "key": "karpenter.k8s.aws/instance-category",
        "operator": "In",
        "values": ["c", "m", "r"],
        "minValues": 2,
    },
    {"key": "karpenter.k8s.aws/instance-family", "operator": "Exists", "minValues": 5},
    {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["2"]},
    {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gte", "values": ["4"]},
    {"key": "karpenter.k8s.aws/instance-memory", "operator": "Lte", "values": ["65536"]},
    {"key": "node.kubernetes.io/instance-type", "operator": "NotIn", "values": ["t3.nano"]},
    {"key": "team.example.com/owner", "operator": "In", "values": ["ml"]},
    {"key": "example.com/spot-ok", "operator": "DoesNotExist"},
]
_LIMITS = st.fixed_dictionaries(
    {},
    optional={
        "cpu": st.sampled_from([100, "100", "1500m", 8]),
        "memory": st.sampled_from(["1000Gi", "64Gi", "1Ti"]),
        "nodes": st.sampled_from([10, "3"]),
        "nvidia.com/gpu": st.sampled_from([8, "16"]),
        "ephemeral-storage": st.sampled_from(["100Gi"]),
    },
)
_TAINTS = st.lists(
    st.fixed_dictionaries(
        {
            "key": st.sampled_from(["gpu", "team"]),
            "effect": st.sampled_from(["NoSchedule", "NoExecute"]),
        }
    ),
    min_size=1,
    max_size=2,
)
_LABELS = st.dictionaries(
    st.sampled_from(["a", "team", "example.com/x"]),
    st.text("abc", max_size=3),
    min_size=1,
    max_size=2,
)


@st.composite
def nodepools(draw: st.DrawFn) -> dict[str, Any]:
    version = draw(st.sampled_from(["karpenter.sh/v1", "karpenter.sh/v1beta1"]))
    spec: dict[str, Any] = {
        "requirements": draw(st.lists(st.sampled_from(_REQUIREMENTS), unique_by=lambda r: r["key"]))
    }
    if draw(st.booleans()):
        spec["limits"] = draw(_LIMITS)
    if draw(st.booleans()):
        spec["weight"] = draw(st.integers(1, 100))
    if draw(st.booleans()):
        spec["disruption"] = {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "60s"}
    document = nodepool(version, **spec)
    template = document["spec"]["template"]
    if draw(st.booleans()):
        template["spec"]["taints"] = draw(_TAINTS)
    if draw(st.booleans()):
        template["spec"]["expireAfter"] = draw(st.sampled_from(["720h", "Never"]))
    if draw(st.booleans()):
        template["metadata"] = {"labels": draw(_LABELS)}
    if draw(st.booleans()):
        document["metadata"]["annotations"] = draw(_LABELS)
    return document


_IDS = ["sg-0a1b2c3d4e5f67890", "sg-0123456789abcdef0"]
_AMI_TERMS = st.sampled_from(
    [
        [{"alias": "al2023@latest"}],
        [{"alias": "al2023@v20240625"}],
        [{"alias": "bottlerocket@latest"}],
        [{"alias": "windows2022@latest"}],
        [{"id": "ami-0123456789abcdef0"}],
        [{"id": "ami-123"}, {"id": "ami-456"}],
        [{"ssmParameter": "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-x86_64"}],
    ]
)


@st.composite
def ec2nodeclasses(draw: st.DrawFn) -> dict[str, Any]:
    version = draw(st.sampled_from(["karpenter.k8s.aws/v1", "karpenter.k8s.aws/v1beta1"]))
    spec: dict[str, Any] = {
        "subnetSelectorTerms": draw(
            st.sampled_from([[{"tags": {"tier": "private"}}], [{"id": "subnet-0123456789abcdef0"}]])
        ),
        "securityGroupSelectorTerms": draw(
            st.sampled_from(
                [[{"tags": {"a": "b"}}], [{"id": _IDS[0]}, {"id": _IDS[1]}], [{"name": "nodes"}]]
            )
        ),
    }
    terms = draw(_AMI_TERMS)
    if version.endswith("/v1"):
        spec["amiSelectorTerms"] = terms
        if draw(st.booleans()):
            spec["capacityReservationSelectorTerms"] = [
                {"tags": {"team": "ml"}, "instanceMatchCriteria": "targeted"}
            ]
    else:
        spec["amiFamily"] = draw(st.sampled_from(["AL2023", "Bottlerocket", "AL2"]))
        if "alias" not in terms[0] and draw(st.booleans()):
            spec["amiFamily"] = "Custom"
            spec["amiSelectorTerms"] = terms
        if draw(st.booleans()):
            spec["capacityReservationSpec"] = draw(
                st.sampled_from(
                    [
                        {"capacityReservationPreference": "none"},
                        {
                            "capacityReservationTarget": {
                                "capacityReservationId": "cr-0123456789abcdef0"
                            }
                        },
                    ]
                )
            )
    if draw(st.booleans()):
        spec["role"] = None
        spec["instanceProfile"] = "profile"
    if draw(st.booleans()):
        spec["tags"] = {"team": draw(st.text("abc", max_size=4))}
    if draw(st.booleans()):
        spec["userData"] = draw(st.text(max_size=20))
    if draw(st.booleans()):
        spec["blockDeviceMappings"] = [
            {
                "deviceName": "/dev/xvda",
                "ebs": {
                    "volumeSize": draw(st.sampled_from(["20Gi", "100G", "1Ti"])),
                    "volumeType": "gp3",
                },
            }
        ]
    if draw(st.booleans()):
        spec["metadataOptions"] = {
            "httpTokens": draw(st.sampled_from(["required", "optional"])),
            "httpPutResponseHopLimit": 2,
        }
    if draw(st.booleans()):
        spec["kubelet"] = {"maxPods": draw(st.integers(1, 250))}
    document = ec2nodeclass(version, **spec)
    document["spec"] = {k: v for k, v in document["spec"].items() if v is not None}
    return document


@_SETTINGS
@given(nodepools())
def test_a_nodepool_round_trips_through_the_hub(document: dict[str, Any]) -> None:
    assert_round_trip(REGISTRY.read(document), document)


@_SETTINGS
@given(ec2nodeclasses())
def test_an_ec2nodeclass_round_trips_through_the_hub(document: dict[str, Any]) -> None:
    assert_round_trip(REGISTRY.read(document), document)
