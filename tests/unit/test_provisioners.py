"""karpenter.sh/v1alpha4 Provisioner <-> the NodePool and NodeClass hubs (docs/provisioner.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from capacity_launcher.domain.apis.config import NodeClass, NodePool
from capacity_launcher.domain.apis.documents import parse_document
from capacity_launcher.domain.apis.served_versions import REGISTRY
from capacity_launcher.domain.errors import ConfigValidationError
from capacity_launcher.domain.quantities import PoolLimits

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "provisioner" / "provisioner.yaml"
API, KIND = "karpenter.sh/v1alpha4", "Provisioner"


def provisioner(**spec: Any) -> dict[str, Any]:
    provider = {"securityGroups": ["sg-0a1b2c3d4e5f67890"], "subnets": ["subnet-0123456789abcdef0"]}
    return {
        "apiVersion": API,
        "kind": KIND,
        "metadata": {"name": "p"},
        "spec": {"provider": provider, **spec},
    }


def test_the_seed_example_becomes_a_pool_and_a_class_and_comes_back_as_written() -> None:
    written = yaml.safe_load(EXAMPLE.read_text())

    applied = REGISTRY.read(written)

    pool, node_class = applied.conversion.hubs
    assert isinstance(pool, NodePool) and isinstance(node_class, NodeClass)
    assert pool.spec.node_class_ref == node_class.name == "seed-003"
    assert {(r.key, r.values) for r in pool.spec.requirements} == {
        ("node.kubernetes.io/instance-type", ("m5.large",)),
        ("kubernetes.io/arch", ("amd64",)),
        ("kubernetes.io/os", ("linux",)),
    }
    assert pool.spec.limits == PoolLimits.model_validate(
        {"cpu": 1000, "memory": "1000Gi", "unready": "20%"}
    )
    terms = node_class.spec.subnet_selector_terms or []
    assert [t.tags for t in terms] == [
        {"Name": "private-us-east-1a"},
        {"Name": "private-us-east-1b"},
    ]
    assert node_class.spec.security_group_ids == ["sg-0a1b2c3d4e5f67890"]
    assert REGISTRY.convert(pool, applied.conversion.kept, API, KIND) == written


def test_the_provider_version_is_inferred_when_omitted() -> None:
    inferred = REGISTRY.read(provisioner()).conversion.hubs
    explicit = provisioner()
    explicit["spec"]["provider"] |= {
        "apiVersion": "extensions.karpenter.sh/v1alpha1",
        "kind": "AWS",
    }

    assert REGISTRY.read(explicit).conversion.hubs == inferred


def test_fields_without_meaning_here_are_kept_and_reported_and_the_template_is_the_classs() -> None:
    document = provisioner(taints=[{"key": "gpu", "effect": "NoSchedule"}], ttlSecondsAfterEmpty=30)
    document["spec"]["provider"]["launchTemplateName"] = "base-template"

    conversion = REGISTRY.read(document).conversion

    assert set(conversion.kept.not_acted_on) == {"spec.taints", "spec.ttlSecondsAfterEmpty"}
    node_class = conversion.hubs[1]
    assert isinstance(node_class, NodeClass)
    assert node_class.spec.launch_template_name == "base-template"


SUBNET = ["subnet-0123456789abcdef0"]
ARM = {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}
NEXT_PROVIDER = "extensions.karpenter.sh/v1alpha9"


@pytest.mark.parametrize(
    ("change", "field", "rule"),
    [
        ({"limits": {"unready": "abc"}}, "spec.limits.unready", "percentage"),
        ({"limits": {"unready": "120%"}}, "spec.limits.unready", "percentage"),
        ({"limits": {"resources": {"pods": 10}}}, "spec.limits.resources", "cpu, memory"),
        ({"limits": {"resources": {"cpu": "lots"}}}, "spec.limits.resources.cpu", "cores"),
        ({"provider": {"subnets": SUBNET}}, "spec.provider.securityGroups", "required"),
        ({"provider": {"apiVersion": NEXT_PROVIDER}}, "spec.provider.apiVersion", "v1alpha1"),
        ({"architectures": ["amd64"], "requirements": [ARM]}, "spec.requirements", "no value"),
        (
            {"provider": {"subnets": SUBNET, "securityGroups": ["abc"]}},
            "spec.provider.securityGroups[0]",
            "sg-",
        ),
    ],
)
def test_broken_rules_are_named_at_the_provisioners_paths(
    change: dict[str, Any], field: str, rule: str
) -> None:
    document = provisioner()
    document["spec"] |= change

    with pytest.raises(ConfigValidationError) as raised:
        REGISTRY.read(document)

    assert any(e.field == field and rule in e.rule for e in raised.value.errors), (
        raised.value.errors
    )


def test_a_pool_a_provisioner_cannot_say_is_refused_by_path() -> None:
    pool = parse_document(
        {
            "apiVersion": "capacity-launcher/v1",
            "kind": "NodePool",
            "metadata": {"name": "p"},
            "spec": {"nodeClassRef": "c", "weight": 5, "limits": {"instances": "3"}},
        }
    )

    with pytest.raises(ConfigValidationError) as raised:
        REGISTRY.convert(pool, None, API, KIND)

    assert {e.field for e in raised.value.errors} == {"spec.weight", "spec.limits.instances"}


# --- round trips, over generated documents --------------------------------------------------

_ids = st.from_regex(r"\Asubnet-[0-9a-f]{8}\Z") | st.from_regex(r"\A[a-z][a-z0-9-]{0,10}\Z")
_requirement = st.sampled_from(
    [
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        {"key": "karpenter.k8s.aws/instance-family", "operator": "NotIn", "values": ["t3"]},
        {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": ["3"]},
    ]
)


@st.composite
def provisioners(draw: st.DrawFn) -> dict[str, Any]:
    provider: dict[str, Any] = {
        "subnets": draw(st.lists(_ids, min_size=1, max_size=3, unique=True)),
        "securityGroups": draw(
            st.lists(st.from_regex(r"\Asg-[0-9a-f]{8}\Z"), min_size=1, max_size=3, unique=True)
        ),
    }
    if draw(st.booleans()):
        provider |= {"apiVersion": "extensions.karpenter.sh/v1alpha1", "kind": "AWS"}
    optional_provider = {
        "instanceProfile": st.just("nodes"),
        "tags": st.dictionaries(st.sampled_from(["team", "env"]), st.sampled_from(["a", "b"])),
        "launchTemplateName": st.just("base-template"),
    }
    for name, values in optional_provider.items():
        if draw(st.booleans()):
            provider[name] = draw(values)
    spec: dict[str, Any] = {"provider": provider}
    constraints = {
        "zones": st.lists(
            st.sampled_from(["us-east-1a", "us-east-1b"]), min_size=1, max_size=2, unique=True
        ),
        "instanceTypes": st.lists(
            st.sampled_from(["m5.large", "c5.large"]), min_size=1, max_size=2, unique=True
        ),
        "architectures": st.sampled_from([["amd64"], ["arm64"], ["amd64", "arm64"]]),
        "operatingSystems": st.just(["linux"]),
        "requirements": st.lists(_requirement, max_size=2, unique_by=lambda r: r["key"]),
        "labels": st.just({"team": "ml"}),
        "taints": st.just([{"key": "gpu", "effect": "NoSchedule"}]),
        "ttlSecondsAfterEmpty": st.integers(0, 3600),
    }
    for name, values in constraints.items():
        if draw(st.booleans()):
            spec[name] = draw(values)
    limits: dict[str, Any] = {}
    if draw(st.booleans()):
        limits["unready"] = draw(st.integers(0, 50) | st.integers(0, 100).map(lambda p: f"{p}%"))
    if draw(st.booleans()):
        limits["resources"] = draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "cpu": st.sampled_from([1000, "500m"]),
                    "memory": st.just("1000Gi"),
                    "nvidia.com/gpu": st.just(8),
                },
            )
        )
    if limits:
        spec["limits"] = limits
    return {"apiVersion": API, "kind": KIND, "metadata": {"name": "p"}, "spec": spec}  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(document=provisioners())
def test_version_to_hubs_and_back_is_the_document_as_written(document: dict[str, Any]) -> None:
    applied = REGISTRY.read(document)

    back = REGISTRY.convert(applied.conversion.hub, applied.conversion.kept, API, KIND)

    assert back == document


@settings(max_examples=50, deadline=None)
@given(document=provisioners())
def test_a_pool_applied_otherwise_is_not_read_as_a_provisioner(document: dict[str, Any]) -> None:
    """Nothing kept (the pool was applied in another version): no provider is known, and a
    Provisioner without one could not be applied again as the object it is."""
    pool = REGISTRY.read(document).conversion.hub

    with pytest.raises(ConfigValidationError) as raised:
        REGISTRY.convert(pool, None, API, KIND)

    assert "spec.provider" in str(raised.value)


def test_a_pool_with_an_unready_limit_is_not_read_as_karpenters_v1_nodepool() -> None:
    pool = REGISTRY.read(yaml.safe_load(EXAMPLE.read_text())).conversion.hub

    with pytest.raises(ConfigValidationError) as raised:
        REGISTRY.convert(pool, None, "karpenter.sh/v1", "NodePool")

    assert [e.field for e in raised.value.errors] == ["spec.limits.unready"]
