"""An amiSelectorTerms alias resolves to one image per architecture, as Karpenter's AMI families do
(pkg/providers/amifamily: the x86_64 and arm64 public SSM parameters); each candidate instance
type launches the image it can run, and one CreateFleet carries one LaunchTemplateConfig per
image (botocore's CreateFleet model: LaunchTemplateConfigs is a list; the overrides of all of
them are what MAX_OVERRIDES_PER_FLEET counts)."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from capacity_launcher.adapters.launch_templates import LaunchTemplates
from capacity_launcher.adapters.template_data import template_basis
from capacity_launcher.domain.apis.config import NodeClass
from capacity_launcher.domain.apis.served_versions import REGISTRY
from capacity_launcher.domain.capacity.candidates import find_candidates
from capacity_launcher.domain.capacity.constraints import Requirements
from capacity_launcher.domain.capacity.fleet import (
    MAX_OVERRIDES_PER_FLEET,
    LaunchTemplate,
    fleet_offer,
    fleet_request,
)
from capacity_launcher.domain.capacity.image_architectures import (
    ImageArchitecture,
    ImageArchitectures,
    known,
)
from capacity_launcher.domain.capacity.instance_types import InstanceTypeInfo
from capacity_launcher.domain.capacity.offerings import ON_DEMAND, Offering
from capacity_launcher.domain.capacity.planning import LaunchAttempt
from capacity_launcher.domain.capacity.reservations import ReservationUse
from capacity_launcher.domain.errors import ConfigValidationError, NodeClassRefused
from capacity_launcher.startup import system_clock
from tests.unit.test_karpenter_documents import ec2nodeclass

X86_IMAGE = "ami-0aaaaaaaaaaaaaaa1"
ARM_IMAGE = "ami-0bbbbbbbbbbbbbbb2"
ZONES = ("us-east-1a", "us-east-1b")
SUBNETS = {zone: (f"subnet-{zone[-1]}",) for zone in ZONES}
C5 = InstanceTypeInfo("c5.large", ("amd64",), 2, 4096, zones=frozenset(ZONES))
M5 = InstanceTypeInfo("m5.large", ("amd64",), 2, 8192, zones=frozenset(ZONES))
C6G = InstanceTypeInfo("c6g.large", ("arm64",), 2, 4096, zones=frozenset(ZONES))
M6G = InstanceTypeInfo("m6g.large", ("arm64",), 2, 8192, zones=frozenset(ZONES))
CATALOG = {i.name: i for i in (C5, M5, C6G, M6G)}
BOTH = ImageArchitectures(
    (ImageArchitecture(X86_IMAGE, "x86_64"), ImageArchitecture(ARM_IMAGE, "arm64"))
)
USE = ReservationUse("open")
X86_TEMPLATE = LaunchTemplate("lt-x86", USE)
ARM_TEMPLATE = LaunchTemplate("lt-arm", USE)


def _hub(**terms: Any) -> NodeClass:
    hub = REGISTRY.read(ec2nodeclass(**terms)).conversion.hub
    assert isinstance(hub, NodeClass)
    return hub


# --- the alias's parameters


@pytest.mark.parametrize(
    ("alias", "x86_64", "arm64"),
    [
        (
            "al2023@latest",
            "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id",
            "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/arm64/standard/recommended/image_id",
        ),
        (
            "al2023@v20240625",
            "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/"
            "amazon-eks-node-al2023-x86_64-standard-1.33-v20240625/image_id",
            "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/arm64/standard/"
            "amazon-eks-node-al2023-arm64-standard-1.33-v20240625/image_id",
        ),
        (
            "al2@latest",
            "/aws/service/eks/optimized-ami/1.33/amazon-linux-2/recommended/image_id",
            "/aws/service/eks/optimized-ami/1.33/amazon-linux-2-arm64/recommended/image_id",
        ),
        (
            "al2@v20240703",
            "/aws/service/eks/optimized-ami/1.33/amazon-linux-2/amazon-eks-node-1.33-v20240703/image_id",
            "/aws/service/eks/optimized-ami/1.33/amazon-linux-2-arm64/"
            "amazon-eks-arm64-node-1.33-v20240703/image_id",
        ),
        (
            "bottlerocket@v1.20.3",
            "/aws/service/bottlerocket/aws-k8s-1.33/x86_64/1.20.3/image_id",
            "/aws/service/bottlerocket/aws-k8s-1.33/arm64/1.20.3/image_id",
        ),
    ],
)
def test_an_alias_names_the_x86_64_and_the_arm64_parameter(
    alias: str, x86_64: str, arm64: str
) -> None:
    hub = _hub(amiSelectorTerms=[{"alias": alias}])
    assert hub.spec.image_ssm_parameter == x86_64
    assert hub.spec.arm64_image_ssm_parameter == arm64


def test_a_windows_alias_and_an_explicit_parameter_have_one_image() -> None:
    assert (
        _hub(amiSelectorTerms=[{"alias": "windows2022@latest"}]).spec.arm64_image_ssm_parameter
        is None
    )
    explicit = _hub(amiSelectorTerms=[{"ssmParameter": "/aws/service/x/image_id"}])
    assert explicit.spec.arm64_image_ssm_parameter is None


def test_a_v1beta1_amifamily_has_both_images() -> None:
    document = ec2nodeclass("karpenter.k8s.aws/v1beta1", amiFamily="AL2023")
    document["spec"].pop("amiSelectorTerms", None)
    hub = REGISTRY.read(document).conversion.hub
    assert hub.spec.arm64_image_ssm_parameter.endswith(
        "/amazon-linux-2023/arm64/standard/recommended/image_id"
    )


def test_the_hub_refuses_an_arm64_parameter_without_the_main_one() -> None:
    with pytest.raises(ConfigValidationError) as refused:
        REGISTRY.read(
            {
                "apiVersion": "capacity-launcher/v1",
                "kind": "NodeClass",
                "metadata": {"name": "c"},
                "spec": {
                    "imageId": X86_IMAGE,
                    "arm64ImageSsmParameter": "/aws/service/x/image_id",
                    "subnetIds": ["subnet-1"],
                    "securityGroupIds": ["sg-1"],
                },
            }
        )
    assert "arm64ImageSsmParameter can only be set with imageSsmParameter" in str(refused.value)


# --- which image each candidate type gets


def test_each_type_gets_the_image_of_its_architecture() -> None:
    assert BOTH.images_by_type(["c5.large", "c6g.large", "m6g.large", "x9.large"], CATALOG) == {
        "c5.large": X86_IMAGE,
        "c6g.large": ARM_IMAGE,
        "m6g.large": ARM_IMAGE,
    }


def test_a_pool_of_both_architectures_keeps_every_type_with_two_images() -> None:
    candidates = find_candidates(
        Requirements.of([]), list(CATALOG.values()), ZONES, [ON_DEMAND], [], image_architecture=BOTH
    )
    assert {o.instance_type for o in candidates.on_demand} == set(CATALOG)
    assert candidates.cannot_run_image == []


def test_with_one_image_the_other_architecture_stays_refused() -> None:
    x86_only = known([ImageArchitecture(X86_IMAGE, "x86_64")])
    assert x86_only is not None
    candidates = find_candidates(
        Requirements.of([]), [C6G, M6G], ZONES, [ON_DEMAND], [], image_architecture=x86_only
    )
    assert not candidates.on_demand
    assert [i.name for i in candidates.cannot_run_image] == ["c6g.large", "m6g.large"]


def test_an_unknown_main_image_leaves_out_nothing_and_an_unknown_second_is_dropped() -> None:
    assert known([None, ImageArchitecture(ARM_IMAGE, "arm64")]) is None
    found = known([ImageArchitecture(X86_IMAGE, "x86_64"), None])
    assert found is not None and [i.image_id for i in found.images] == [X86_IMAGE]


# --- the fleet request's LaunchTemplateConfigs


def _attempt(names: list[str]) -> LaunchAttempt:
    offerings = tuple(Offering(ON_DEMAND, name, zone) for name in names for zone in ZONES)
    return LaunchAttempt(ON_DEMAND, offerings, count=2)


def _request(names: list[str], by_type: dict[str, LaunchTemplate]) -> dict[str, Any]:
    attempt = _attempt(names)
    offer = fleet_offer(attempt, SUBNETS, CATALOG)
    return fleet_request(
        attempt,
        count=2,
        client_token="t",
        launch_template=X86_TEMPLATE,
        subnets=SUBNETS,
        tags={},
        offer=offer,
        templates_by_type=by_type,
    )


def test_a_fleet_of_both_architectures_has_one_config_per_image() -> None:
    request = _request(
        ["c5.large", "c6g.large", "m5.large", "m6g.large"],
        {"c6g.large": ARM_TEMPLATE, "m6g.large": ARM_TEMPLATE},
    )
    configs = request["LaunchTemplateConfigs"]
    assert [c["LaunchTemplateSpecification"]["LaunchTemplateName"] for c in configs] == [
        "lt-x86",
        "lt-arm",
    ]
    types = [{o["InstanceType"] for o in c["Overrides"]} for c in configs]
    assert types == [{"c5.large", "m5.large"}, {"c6g.large", "m6g.large"}]
    # The priorities are the offer's ranks, across both configs: each rank once.
    priorities = sorted(o["Priority"] for c in configs for o in c["Overrides"])
    assert priorities == sorted(set(priorities)) and len(priorities) == 8


def test_a_fleet_of_one_architecture_has_the_one_config_of_its_image() -> None:
    arm = {"c6g.large": ARM_TEMPLATE, "m6g.large": ARM_TEMPLATE}
    request = _request(["c6g.large", "m6g.large"], arm)
    (config,) = request["LaunchTemplateConfigs"]
    assert config["LaunchTemplateSpecification"]["LaunchTemplateName"] == "lt-arm"
    assert len(config["Overrides"]) == 4
    (plain,) = _request(["c5.large"], {})["LaunchTemplateConfigs"]
    assert plain["LaunchTemplateSpecification"]["LaunchTemplateName"] == "lt-x86"


def test_the_override_limit_counts_across_configs() -> None:
    names = [f"{f}{g}.large" for f in ("c", "m") for g in range(1, 16)]
    catalog = {
        **{n: InstanceTypeInfo(n, ("amd64",), 2, 4096, zones=frozenset(ZONES)) for n in names},
        **{
            n.replace(".", "g."): InstanceTypeInfo(
                n.replace(".", "g."), ("arm64",), 2, 4096, zones=frozenset(ZONES)
            )
            for n in names
        },
    }
    subnets = SUBNETS
    attempt = _attempt(sorted(catalog))
    offer = fleet_offer(attempt, subnets, catalog)
    by_type = {n: ARM_TEMPLATE for n in catalog if "g." in n}
    request = fleet_request(
        attempt,
        count=1,
        client_token="t",
        launch_template=X86_TEMPLATE,
        subnets=subnets,
        tags={},
        offer=offer,
        templates_by_type=by_type,
    )
    configs = request["LaunchTemplateConfigs"]
    assert len(configs) == 2
    assert sum(len(c["Overrides"]) for c in configs) == MAX_OVERRIDES_PER_FLEET
    # 60 types x 2 zones: 120 offerings; what is cut is on the record, counted over both configs
    record = offer.left_out_record()
    assert record is not None and (record.offered, record.left_out) == (100, 20)


# --- launch templates: one per image, one basis for all of a class's


def test_a_class_with_two_images_has_one_basis_for_both_templates() -> None:
    data = {"ImageId": X86_IMAGE, "SecurityGroupIds": ["sg-1"]}
    arm = {**data, "ImageId": ARM_IMAGE}
    images = (X86_IMAGE, ARM_IMAGE)
    assert template_basis(data, images) == template_basis(arm, images)
    assert template_basis(data, images) != template_basis(
        data, (X86_IMAGE, "ami-0ccccccccccccccc3")
    )
    assert template_basis(data, (X86_IMAGE,)) == template_basis(data)  # one image: as before


class _Ssm:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def get_parameter(self, Name: str, **_: Any) -> dict[str, Any]:
        if Name not in self.values:
            error = {"Error": {"Code": "ParameterNotFound", "Message": Name}}
            raise ClientError(error, "GetParameter")  # type: ignore[arg-type]
        return {"Parameter": {"Name": Name, "Value": self.values[Name]}}


class _Ec2:
    ARCHITECTURES = {X86_IMAGE: "x86_64", ARM_IMAGE: "arm64"}

    def describe_images(self, ImageIds: list[str]) -> dict[str, Any]:
        return {
            "Images": [
                {
                    "ImageId": i,
                    "PlatformDetails": "Linux/UNIX",
                    "Architecture": self.ARCHITECTURES[i],
                }
                for i in ImageIds
            ]
        }


def test_launch_templates_read_both_parameters_and_skip_a_missing_arm64_one() -> None:
    hub = _hub(amiSelectorTerms=[{"alias": "al2023@latest"}])
    x86, arm = hub.spec.image_ssm_parameter, hub.spec.arm64_image_ssm_parameter
    assert x86 is not None and arm is not None
    both = LaunchTemplates(
        ec2=_Ec2(), ssm=_Ssm({x86: X86_IMAGE, arm: ARM_IMAGE}), clock=system_clock
    )
    found = both.image_architectures(hub)
    # The alias names accelerated variants too (SSM has none here): these two serve the types
    # with neither a GPU nor an AWS accelerator
    assert found == known(
        [
            ImageArchitecture(X86_IMAGE, "x86_64", "standard"),
            ImageArchitecture(ARM_IMAGE, "arm64", "standard"),
        ]
    )
    # An arm64 parameter SSM does not have (a Region without one): the x86_64 image alone
    only_x86 = LaunchTemplates(ec2=_Ec2(), ssm=_Ssm({x86: X86_IMAGE}), clock=system_clock)
    assert only_x86.image_architectures(hub) == known(
        [ImageArchitecture(X86_IMAGE, "x86_64", "standard")]
    )


def test_a_refused_arm64_parameter_fails_naming_its_field() -> None:
    hub = _hub(amiSelectorTerms=[{"alias": "al2023@latest"}])
    x86 = hub.spec.image_ssm_parameter
    assert x86 is not None

    class _Refusing(_Ssm):
        def get_parameter(self, Name: str, **kw: Any) -> dict[str, Any]:
            if Name == hub.spec.arm64_image_ssm_parameter:
                error = {"Error": {"Code": "AccessDeniedException", "Message": "no"}}
                raise ClientError(error, "GetParameter")  # type: ignore[arg-type]
            return super().get_parameter(Name, **kw)

    templates = LaunchTemplates(ec2=_Ec2(), ssm=_Refusing({x86: X86_IMAGE}), clock=system_clock)
    with pytest.raises(NodeClassRefused) as refused:
        templates.image_architectures(hub)
    assert refused.value.field == "spec.arm64ImageSsmParameter"


def test_a_refusal_with_two_images_names_both_and_both_architectures() -> None:
    hub = _hub(amiSelectorTerms=[{"alias": "al2023@latest"}])
    mac = InstanceTypeInfo("mac1.metal", ("x86_64_mac",), 12, 32768, zones=frozenset(ZONES))
    message = BOTH.refusal(hub, "macs", [mac])
    assert f"{X86_IMAGE} (x86_64) and {ARM_IMAGE} (arm64)" in message
    assert "spec.arm64ImageSsmParameter" in message
    assert "kubernetes.io/arch is amd64 or arm64" in message
