"""What a NodeClass's selectors resolve to now, and the names EC2 gives what they find (security
groups, images): what operators read (`get ec2nodeclass`'s status), through the launcher's own
resolvers, so the status says what a launch would use; and what the sync shares with every
launcher container (`shared`, domain/capacity/shared_resolution.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from capacity_launcher.adapters.aws import aws_call
from capacity_launcher.adapters.instance_types import InstanceTypeCatalog
from capacity_launcher.adapters.launch_templates import LaunchTemplates
from capacity_launcher.adapters.security_groups import SecurityGroups
from capacity_launcher.adapters.subnets import Subnets
from capacity_launcher.domain.apis.config import NodeClass
from capacity_launcher.domain.capacity.image_architectures import ImageArchitectures
from capacity_launcher.domain.capacity.shared_resolution import Resolution


class NodeClassResolution:
    def __init__(
        self,
        ec2: Any,
        ssm: Any,
        *,
        clock: Callable[[], datetime],
        catalog: InstanceTypeCatalog | None = None,
    ) -> None:
        """`catalog`: the instance types' (the sync keeps one across its runs, with its own
        TTLs: the region's listing is its largest read)."""
        self._ec2 = ec2
        self._subnets = Subnets(ec2)
        self._groups = SecurityGroups(ec2)
        self._templates = LaunchTemplates(ec2, ssm, clock=clock)
        self._catalog = catalog or InstanceTypeCatalog(ec2)

    def shared(self, node_class: NodeClass) -> Resolution | None:
        """What a launch of the class would resolve now, as every launcher container may share
        it: subnets, security groups, images (with their facts) and every instance type offered
        in the subnets' zones; None when the subnets or the main image are found nothing of.
        A selector AWS refuses raises as a launch's would (NodeClassRefused, LaunchFailed)."""
        subnets = self.subnets(node_class)
        if not subnets:
            return None
        groups = self.security_groups(node_class)
        images = self._templates.images(node_class)
        if not images:
            return None
        return Resolution(
            subnets=subnets,
            security_groups=groups,
            images=images,
            instance_types=tuple(self._catalog.offered(subnets.keys())),
            known_types=self._catalog.known(),
        )

    def subnets(self, node_class: NodeClass) -> dict[str, tuple[str, ...]]:
        return self._subnets.by_zone(node_class)

    def security_groups(self, node_class: NodeClass) -> tuple[str, ...]:
        return self._groups.ids(node_class)

    def images(self, node_class: NodeClass) -> ImageArchitectures | None:
        return self._templates.image_architectures(node_class)

    def security_group_names(self, ids: Sequence[str]) -> dict[str, str]:
        """Each group's name by id (one DescribeSecurityGroups)."""
        with aws_call("DescribeSecurityGroups"):
            groups = self._ec2.describe_security_groups(GroupIds=list(ids))["SecurityGroups"]
        return {g["GroupId"]: g.get("GroupName", "") for g in groups}

    def image_names(self, ids: Sequence[str]) -> dict[str, str]:
        """Each image's name by id (one DescribeImages)."""
        with aws_call("DescribeImages"):
            images = self._ec2.describe_images(ImageIds=list(ids))["Images"]
        return {i["ImageId"]: i.get("Name", "") for i in images}
