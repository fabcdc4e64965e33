"""NoOffering's words: which requirement keys leave a pool no offering, and their rules."""

from __future__ import annotations

from capacity_launcher.domain.capacity.constraints import Requirements
from capacity_launcher.domain.capacity.instance_types import InstanceTypeInfo
from capacity_launcher.domain.capacity.offering_exclusions import (
    Exclusion,
    excluding_keys,
    exclusion_words,
    places,
)
from capacity_launcher.domain.capacity.requirements import Operator, Requirement

ZONES = ("us-east-1a", "us-east-1b")
M5 = InstanceTypeInfo("m5.large", ("amd64",), 2, 8192, zones=frozenset(ZONES))
C5 = InstanceTypeInfo("c5.xlarge", ("amd64",), 4, 8192, zones=frozenset(ZONES))
OFFERED = places([M5, C5], ZONES, ["on-demand", "spot"])


def requirements(*terms: tuple[str, Operator, tuple[str, ...]]) -> Requirements:
    return Requirements.of(
        [Requirement(key=key, operator=operator, values=values) for key, operator, values in terms]
    )


def test_windows_on_linux_types_names_the_os_key_its_rule_and_what_is_offered() -> None:
    windows = requirements(
        ("kubernetes.io/os", Operator.IN, ("windows",)),
        ("node.kubernetes.io/instance-type", Operator.IN, ("m5.large", "c5.xlarge")),
    )

    exclusion = excluding_keys(windows, OFFERED)

    assert exclusion == Exclusion(("kubernetes.io/os",))
    assert exclusion_words(windows, exclusion, OFFERED) == (
        "requirements[kubernetes.io/os]: allows [windows], but the pool's offerings have [linux]"
    )


def test_a_zone_outside_the_node_class_zones_is_named() -> None:
    west = requirements(("topology.kubernetes.io/zone", Operator.IN, ("us-west-2a",)))

    exclusion = excluding_keys(west, OFFERED)

    assert exclusion is not None
    assert "requirements[topology.kubernetes.io/zone]: allows [us-west-2a]" in exclusion_words(
        west, exclusion, OFFERED
    )
    assert "[us-east-1a, us-east-1b]" in exclusion_words(west, exclusion, OFFERED)


def test_two_keys_that_each_exclude_everything_are_both_named() -> None:
    both = requirements(
        ("kubernetes.io/os", Operator.IN, ("windows",)),
        ("karpenter.k8s.aws/instance-cpu", Operator.GT, ("64",)),
    )

    exclusion = excluding_keys(both, OFFERED)

    assert exclusion == Exclusion(("karpenter.k8s.aws/instance-cpu", "kubernetes.io/os"))
    words = exclusion_words(both, exclusion, OFFERED)
    assert "requirements[karpenter.k8s.aws/instance-cpu]: allows values > 64" in words
    assert "offerings have [2, 4]" in words


def test_keys_that_exclude_everything_only_together_are_named_together() -> None:
    # m5 has 2 vCPUs, c5 is of family c5: each key alone admits one of them
    crossed = requirements(
        ("karpenter.k8s.aws/instance-family", Operator.IN, ("m5",)),
        ("karpenter.k8s.aws/instance-cpu", Operator.IN, ("4",)),
    )

    exclusion = excluding_keys(crossed, OFFERED)

    assert exclusion == Exclusion(
        ("karpenter.k8s.aws/instance-cpu", "karpenter.k8s.aws/instance-family"), together=True
    )
    assert exclusion_words(crossed, exclusion, OFFERED) == (
        "requirements on karpenter.k8s.aws/instance-cpu ([4]), "
        "karpenter.k8s.aws/instance-family ([m5]) admit no offering together, though each "
        "alone admits some"
    )


def test_nothing_is_blamed_when_something_matches() -> None:
    assert (
        excluding_keys(requirements(("kubernetes.io/os", Operator.IN, ("linux",))), OFFERED) is None
    )


def test_a_pinned_type_offered_nowhere_blames_the_instance_type_key() -> None:
    pinned = requirements(("node.kubernetes.io/instance-type", Operator.IN, ("x9.huge",)))

    exclusion = excluding_keys(pinned, [])

    assert exclusion == Exclusion(("node.kubernetes.io/instance-type",))
    assert exclusion_words(pinned, exclusion, []) == (
        "requirements[node.kubernetes.io/instance-type]: allows [x9.huge], none of which is "
        "offered in the node class's zones"
    )
    assert excluding_keys(requirements(), []) is None
