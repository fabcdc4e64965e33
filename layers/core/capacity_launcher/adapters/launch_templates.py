"""Launch templates: one per (NodeClass, image, reservation target), named by a hash of their
content. A NodeClass with one image per architecture (an alias) has one template per image."""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from botocore.exceptions import ClientError

from capacity_launcher.adapters.aws import aws_call, client, error_code
from capacity_launcher.adapters.cache import TtlCache
from capacity_launcher.adapters.image_parameters import ImageParameters
from capacity_launcher.adapters.image_selection import ImageSelection
from capacity_launcher.adapters.instance_profiles import InstanceProfiles
from capacity_launcher.adapters.security_groups import SecurityGroups
from capacity_launcher.domain.aws_errors import is_launch_template_gone
from capacity_launcher.domain.config import NodeClass
from capacity_launcher.domain.errors import (
    InstanceProfileNotReady,
    LaunchFailed,
    NodeClassRefused,
)
from capacity_launcher.domain.fleet import LaunchTemplate
from capacity_launcher.domain.image_architectures import (
    ImageArchitecture,
    ImageArchitectures,
    known,
)
from capacity_launcher.domain.launch_options import MetadataOptions
from capacity_launcher.domain.platforms import reservation_platform
from capacity_launcher.domain.reservations import ReservationUse, ReservedTarget, reservation_use
from capacity_launcher.domain.tags import (
    MANAGED,
    NODE_CLASS,
    RESERVATION_TARGET,
    TEMPLATE_BASIS,
    managed_tags,
)
from capacity_launcher.domain.template_lifecycle import ManagedTemplate, target_tag

_ALREADY_EXISTS = "InvalidLaunchTemplateName.AlreadyExistsException"
# GetParameter's answer for a name SSM does not have (an alias's arm64 image in a Region or
# release without one: the class then has its x86_64 image only, as in Karpenter).
_PARAMETER_NOT_FOUND = "ParameterNotFound"
_IMAGE_FIELDS = ("PlatformDetails", "UsageOperation", "Architecture")
# launchTemplateName: the base's fields that the pool, the class or the attempt decide instead.
_NOT_FROM_BASE = frozenset({"NetworkInterfaces", "SecurityGroups", "InstanceMarketOptions"})
_BASE_FIELD = "spec.launchTemplateName"
_BASE_SECONDS = 60.0
# A name this container created or saw is trusted this long, then ensured again: the sync may
# have deleted it since (service/template_sweep.py waits far longer before it does). Wall-clock
# seconds (time.time, which the simulation moves with its clock), not monotonic ones.
KNOWN_FOR_SECONDS = 300.0
# DescribeLaunchTemplates answers at most 200 a page.
_PAGE_SIZE = 200


def reservation_specification(use: ReservationUse) -> dict[str, Any]:
    """EC2's CapacityReservationSpecification for a use of reservations."""
    spec: dict[str, Any] = {"CapacityReservationPreference": use.preference}
    if use.target is not None:
        key = (
            "CapacityReservationId"
            if use.target.reservation_id
            else "CapacityReservationResourceGroupArn"
        )
        spec["CapacityReservationTarget"] = {key: use.target.name}
    return spec


def template_data(
    node_class: NodeClass,
    image_id: str,
    reservation_spec: Mapping[str, Any],
    *,
    spot: bool = False,
    market: str | None = None,
    security_group_ids: Sequence[str] | None = None,
    instance_profile: str | None = None,
) -> dict[str, Any]:
    """Launch template data; a spot template also tags the spot request EC2 makes for each
    instance (CreateFleet `instant` cannot tag `spot-instances-request`; a launch template can).
    `instance_profile`: the profile made for the class's role (else its instanceProfile)."""
    spec = node_class.spec
    tags = [{"Key": k, "Value": v} for k, v in sorted(managed_tags(node_class).items())]
    data: dict[str, Any] = {
        "ImageId": image_id,
        "SecurityGroupIds": sorted(security_group_ids or spec.security_group_ids or ()),
        # IMDSv2 unless the NodeClass says otherwise: instances of a shared reservation must not
        # leak credentials via SSRF; instance tags stay out of the metadata service.
        "MetadataOptions": (spec.metadata_options or MetadataOptions()).launch_template_options(),
        "CapacityReservationSpecification": dict(reservation_spec),
        "TagSpecifications": [
            {"ResourceType": "volume", "Tags": tags},
            {"ResourceType": "network-interface", "Tags": tags},
        ],
    }
    if market is not None:
        # A Capacity Block or an interruptible reservation serves only launches in its market.
        data["InstanceMarketOptions"] = {"MarketType": market}
    if spot:
        # The policy lets RunInstances/CreateFleet create spot requests only carrying our tag.
        data["TagSpecifications"].append({"ResourceType": "spot-instances-request", "Tags": tags})
    profile = instance_profile or spec.instance_profile
    if profile:
        data["IamInstanceProfile"] = {"Name": profile}
    if spec.user_data:
        data["UserData"] = base64.b64encode(spec.user_data.encode()).decode()
    if spec.block_device_mappings:
        data["BlockDeviceMappings"] = [
            m.launch_template_mapping() for m in spec.block_device_mappings
        ]
    return data


def on_base(base: Mapping[str, Any], data: Mapping[str, Any]) -> dict[str, Any]:
    """A NodeClass's template data over a named template's (`launchTemplateName`): every field
    the class sets wins; the base's network interfaces, security group names and market options
    are left out, as the pool's subnets, the class's groups and the capacity type decide those."""
    kept = {k: v for k, v in base.items() if k not in _NOT_FROM_BASE}
    return {**kept, **data}


def _digest(data: object) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def template_name(node_class_name: str, data: Mapping[str, Any]) -> str:
    return f"capacity-launcher-{node_class_name}-{_digest(data)}"


def template_basis(data: Mapping[str, Any], images: Sequence[str] = ()) -> str:
    """The template's content apart from its reservation and market parts: equal for every
    template one NodeClass content and image give, different once either changes. A class with
    an image per architecture (`images`, more than one) has one basis for all its templates,
    the image of each replaced by all of them: changing any image supersedes every template."""
    rest = {
        k: v
        for k, v in data.items()
        if k not in ("CapacityReservationSpecification", "InstanceMarketOptions")
    }
    if len(images) > 1:
        rest["ImageId"] = list(images)
    rest["TagSpecifications"] = [
        s
        for s in rest.get("TagSpecifications", [])
        if s["ResourceType"] != "spot-instances-request"
    ]
    return _digest(rest)


def template_tags(
    node_class_name: str, data: Mapping[str, Any], use: ReservationUse, images: Sequence[str] = ()
) -> list[dict[str, str]]:
    tags = {
        MANAGED: "true",
        NODE_CLASS: node_class_name,
        TEMPLATE_BASIS: template_basis(data, images),
    }
    if use.target is not None:
        tags[RESERVATION_TARGET] = target_tag(use.target.name)
    return [{"Key": k, "Value": v} for k, v in tags.items()]


class LaunchTemplates:
    """Creates each content-addressed template once; a warm container remembers the names it saw."""

    def __init__(
        self,
        ec2: Any | None = None,
        ssm: Any | None = None,
        profiles: InstanceProfiles | None = None,
    ) -> None:
        self._ec2 = ec2 or client("ec2")
        self._profiles = profiles
        self._image_parameters = ImageParameters(ssm)
        self._security_groups = SecurityGroups(self._ec2)
        self._image_selection = ImageSelection(self._ec2)
        self._known: dict[str, float] = {}  # name -> when it was last created or seen
        self._images: dict[str, Mapping[str, Any] | None] = {}
        self._lock = threading.Lock()
        self._bases: TtlCache[Mapping[str, Any]] = TtlCache(_BASE_SECONDS)

    def ensure(
        self,
        node_class: NodeClass,
        target: ReservedTarget | None,
        *,
        spot: bool = False,
        image_id: str | None = None,
    ) -> LaunchTemplate:
        """The template for one attempt (reserved ones address `target`), created if new, for
        `image_id` (one of the class's images; by default its main one)."""
        use = reservation_use(node_class, target, spot=spot)
        spec = reservation_specification(use)
        images = self._image_ids(node_class)
        data = template_data(
            node_class,
            image_id or images[0],
            spec,
            spot=spot,
            market=use.market,
            security_group_ids=self._security_groups.ids(node_class),
            instance_profile=self.instance_profile(node_class),
        )
        if node_class.spec.launch_template_name:
            data = on_base(self._base(node_class), data)
        template = LaunchTemplate(template_name(node_class.metadata.name, data), use)
        name = template.name
        with self._lock:
            if time.time() - self._known.get(name, -KNOWN_FOR_SECONDS) < KNOWN_FOR_SECONDS:
                return template
        if not self._exists(name):
            self._create(name, data, node_class, use, images)
        with self._lock:
            self._known[name] = time.time()
        return template

    def instance_profile(self, node_class: NodeClass) -> str | None:
        """The profile the class's instances launch with, made for its role first (never a
        launch without the identity the class names: InstanceProfileNotReady instead)."""
        if node_class.spec.role is None:
            return node_class.spec.instance_profile
        if self._profiles is None:
            name, role = node_class.metadata.name, node_class.spec.role
            raise InstanceProfileNotReady(name, role, "NoProfiles", "this launcher makes none")
        return self._profiles.ensure(node_class)

    def _exists(self, name: str) -> bool:
        """Whether EC2 has the template. Asked by a filter, which answers an empty list where
        creating an existing template answers an error: a new container's first launch finds
        its template made by an earlier one, and an error reply costs botocore a scan of every
        EC2 shape for modeled errors (about 10 ms of a cold start's CPU)."""
        with aws_call("DescribeLaunchTemplates", fatal=LaunchFailed):
            found = self._ec2.describe_launch_templates(
                Filters=[{"Name": "launch-template-name", "Values": [name]}]
            )
        return bool(found.get("LaunchTemplates"))

    def _create(
        self,
        name: str,
        data: Mapping[str, Any],
        node_class: NodeClass,
        use: ReservationUse,
        images: Sequence[str],
    ) -> None:
        tags = template_tags(node_class.metadata.name, data, use, images)
        try:
            with aws_call("CreateLaunchTemplate", node_class=node_class):
                self._ec2.create_launch_template(
                    LaunchTemplateName=name,
                    LaunchTemplateData=data,
                    TagSpecifications=[{"ResourceType": "launch-template", "Tags": tags}],
                )
        except LaunchFailed as refused:
            if refused.code != _ALREADY_EXISTS:  # content-addressed: another worker made it
                raise

    def _base(self, node_class: NodeClass) -> Mapping[str, Any]:
        """The named template's default version's data (a warm container keeps it a minute)."""
        name = node_class.spec.launch_template_name

        def load() -> Mapping[str, Any]:
            with aws_call(
                "DescribeLaunchTemplateVersions", node_class=node_class, field=_BASE_FIELD
            ):
                versions = self._ec2.describe_launch_template_versions(
                    LaunchTemplateName=name, Versions=["$Default"]
                )["LaunchTemplateVersions"]
            found: Mapping[str, Any] = versions[0]["LaunchTemplateData"] if versions else {}
            return found

        return self._bases.get_or_load(name, load)

    def image_platform(self, node_class: NodeClass) -> str | None:
        """The reservation platform of the NodeClass's image (DescribeImages PlatformDetails and
        UsageOperation); None when EC2 does not know the image (CreateFleet then says why)."""
        _, image = self._image(node_class)
        if image is None:
            return None
        return reservation_platform(image.get("PlatformDetails"), image.get("UsageOperation"))

    def image_architecture(self, node_class: NodeClass) -> ImageArchitecture | None:
        """The architecture of the NodeClass's main image (DescribeImages Architecture); None
        when EC2 does not know the image or does not say."""
        image_id = self._image_id(node_class)
        return self._architecture(image_id, self._described(image_id, node_class))

    def image_architectures(self, node_class: NodeClass) -> ImageArchitectures | None:
        """Every image of the NodeClass (its main one first) with its architecture; None when
        EC2 does not know the main one (an image it does not know is left out)."""
        return known(
            [
                self._architecture(i, self._described(i, node_class))
                for i in self._image_ids(node_class)
            ]
        )

    @staticmethod
    def _architecture(image_id: str, image: Mapping[str, Any] | None) -> ImageArchitecture | None:
        architecture = image.get("Architecture") if image is not None else None
        return ImageArchitecture(image_id, architecture) if architecture else None

    def _image(self, node_class: NodeClass) -> tuple[str, Mapping[str, Any] | None]:
        """The main image id and what DescribeImages says of it."""
        image_id = self._image_id(node_class)
        return image_id, self._described(image_id, node_class)

    def _described(self, image_id: str, node_class: NodeClass) -> Mapping[str, Any] | None:
        """What DescribeImages says of an image (None when EC2 does not know it), read once per
        image id: an AMI's platform and architecture never change."""
        with self._lock:
            if image_id in self._images:
                return self._images[image_id]
        try:
            with aws_call("DescribeImages", node_class=node_class, field="spec.imageId"):
                images = self._ec2.describe_images(ImageIds=[image_id])["Images"]
        except LaunchFailed as refused:
            if not refused.code.startswith("InvalidAMIID."):
                raise
            images = []
        # Only the fields read here: a container keeps them for its life.
        image = {k: images[0].get(k) for k in _IMAGE_FIELDS} if images else None
        with self._lock:
            self._images[image_id] = image
        return image

    def _image_ids(self, node_class: NodeClass) -> tuple[str, ...]:
        """The class's images: its main one, then `arm64ImageSsmParameter`'s when SSM has it."""
        main = self._image_id(node_class)
        try:
            arm64 = self._image_parameters.arm64_image_id(node_class)
        except NodeClassRefused as refused:
            if refused.code != _PARAMETER_NOT_FOUND:
                raise
            arm64 = None
        return (main,) if arm64 is None or arm64 == main else (main, arm64)

    def _image_id(self, node_class: NodeClass) -> str:
        spec = node_class.spec
        if spec.image_id:
            return spec.image_id
        if spec.image_selector_terms:
            return self._image_selection.image_id(node_class)
        return self._image_parameters.image_id(node_class)


class TemplateInventory:
    """The service's launch templates as the sync's lifecycle sees them: listed a bounded number
    of pages a run (continuing where the last run stopped), deleted one by one."""

    def __init__(self, ec2: Any | None = None, pages_per_run: int = 5) -> None:
        self._ec2 = ec2 or client("ec2")
        self._pages_per_run = pages_per_run
        self._next_token: str | None = None

    def managed(self) -> list[ManagedTemplate]:
        """Up to `pages_per_run` pages of templates tagged managed; the next call goes on from
        there, and starts over after the last page."""
        found: list[ManagedTemplate] = []
        for _ in range(self._pages_per_run):
            page = self._page(self._next_token)
            found += [_managed(raw) for raw in page.get("LaunchTemplates", [])]
            self._next_token = page.get("NextToken") or None
            if self._next_token is None:
                break
        return found

    def delete(self, name: str) -> bool:
        """Deletes a template; False when it was gone already."""
        with aws_call("DeleteLaunchTemplate", fatal=LaunchFailed):
            try:
                self._ec2.delete_launch_template(LaunchTemplateName=name)
            except ClientError as error:
                if is_launch_template_gone(error_code(error)):
                    return False
                raise
        return True

    def _page(self, token: str | None) -> dict[str, Any]:
        request: dict[str, Any] = {
            "Filters": [{"Name": f"tag:{MANAGED}", "Values": ["true"]}],
            "MaxResults": _PAGE_SIZE,
        }
        if token:
            request["NextToken"] = token
        with aws_call("DescribeLaunchTemplates"):
            return dict(self._ec2.describe_launch_templates(**request))


def _managed(raw: Mapping[str, Any]) -> ManagedTemplate:
    tags = {t["Key"]: t.get("Value", "") for t in raw.get("Tags", [])}
    return ManagedTemplate(
        name=str(raw["LaunchTemplateName"]),
        created_at=raw["CreateTime"],
        node_class=tags.get(NODE_CLASS),
        basis=tags.get(TEMPLATE_BASIS),
        target=tags.get(RESERVATION_TARGET),
    )
