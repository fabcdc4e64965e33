"""What Karpenter's example documents (examples/karpenter/) expect in the local cloud.

- The nodes' role the EC2NodeClasses name (`KarpenterNodeRole-${CLUSTER_NAME}`), as Karpenter's
  getting-started creates it: the service makes each class an instance profile holding it.
- Subnets and the nodes' security group tagged `karpenter.sh/discovery: capacity-launcher`
  (the examples' `${CLUSTER_NAME}`), as Karpenter's getting-started tags them.
- The public SSM parameters the AMI aliases name (EKS optimized AMIs for
  DEFAULT_KUBERNETES_VERSION; https://docs.aws.amazon.com/eks/latest/userguide/retrieve-ami-id.html
  and https://docs.aws.amazon.com/eks/latest/userguide/retrieve-ami-id-bottlerocket.html), one
  per architecture and variant as AWS publishes them (x86_64, and arm64 for all but Windows; the
  standard images, the NVIDIA ones of AL2023 (x86_64 and arm64), AL2 (its GPU image) and
  Bottlerocket (`aws-k8s-<version>-nvidia`), and AL2023's x86_64 Neuron image), each naming one
  of moto's Amazon images of that architecture, a different one per variant. AWS lets no one
  write `/aws/service/*` parameters (moto refuses PutParameter there too), so they are put in
  moto's in-process store directly, as moto loads its own
  `/aws/service/ami-amazon-linux-latest` ones.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from capacity_launcher.domain.apis.karpenter.images import (
    DEFAULT_KUBERNETES_VERSION,
    STANDARD,
    VARIANTS,
    accelerated_parameters,
)
from capacity_launcher.domain.apis.karpenter.images import alias_parameters as alias_parameters_of

CLUSTER_NAME = "capacity-launcher"
DISCOVERY_TAG = {"karpenter.sh/discovery": CLUSTER_NAME}
ALIASES = (
    "al2023@latest",
    "al2023@v20240625",
    "al2@latest",
    "bottlerocket@latest",
    "windows2019@latest",
    "windows2022@latest",
    "windows2025@latest",
)


NODE_ROLE = f"KarpenterNodeRole-{CLUSTER_NAME}"
_EC2_TRUST = (
    '{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", '
    '"Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}]}'
)


def node_role(iam: Any) -> str:
    """The examples' node role (idempotent); its name."""
    try:
        iam.get_role(RoleName=NODE_ROLE)
    except iam.exceptions.NoSuchEntityException:
        iam.create_role(RoleName=NODE_ROLE, AssumeRolePolicyDocument=_EC2_TRUST)
    return NODE_ROLE


def tag_for_discovery(ec2: Any, resources: list[str]) -> None:
    ec2.create_tags(
        Resources=resources, Tags=[{"Key": k, "Value": v} for k, v in DISCOVERY_TAG.items()]
    )


def _amazon_images(ec2: Any, architecture: str) -> list[str]:
    """moto's Amazon images of the architecture, by id: one per variant is taken from them."""
    images = ec2.describe_images(
        Owners=["amazon"], Filters=[{"Name": "architecture", "Values": [architecture]}]
    )["Images"]
    return sorted(str(i["ImageId"]) for i in images)


def served(alias: str) -> list[tuple[str, str, str]]:
    """(architecture, variant, parameter) of every image parameter AWS publishes for an alias."""
    standard = alias_parameters_of(alias, DEFAULT_KUBERNETES_VERSION)
    found = [(arch, STANDARD, name) for arch, name in standard.items()]
    for architecture, variant, name in accelerated_parameters(alias, DEFAULT_KUBERNETES_VERSION):
        if name not in standard.values():  # Bottlerocket's standard x86_64 image serves Neuron
            found.append((architecture, variant, name))
    return found


def alias_parameters(ec2: Any, account_id: str, region: str) -> dict[str, str]:
    """Put the aliases' parameters in moto's store; parameter name -> image id."""
    from moto.ssm.models import Parameter, ssm_backends

    store = ssm_backends[account_id][region]._parameters
    # One DescribeImages per architecture (moto answers with its whole catalogue of it), not one
    # per variant: `local up` and the demo start sooner.
    listed: dict[str, list[str]] = {}
    written = {}
    for alias in ALIASES:
        for architecture, variant, name in served(alias):
            if architecture not in listed:
                listed[architecture] = _amazon_images(ec2, architecture)
            image_id = listed[architecture][VARIANTS.index(variant)]
            if not store.get(name):
                store[name].append(  # moto builds its own the same way
                    Parameter(  # type: ignore[abstract]
                        account_id=account_id,
                        name=name,
                        value=image_id,
                        parameter_type="String",
                        description=None,
                        allowed_pattern=None,
                        keyid=None,
                        last_modified_date=datetime.now(UTC),
                        version=1,
                        data_type="aws:ec2:image",
                    )
                )
            written[name] = image_id
    return written
