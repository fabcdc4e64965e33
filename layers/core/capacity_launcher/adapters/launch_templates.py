"""Launch templates: one per (NodeClass, image, reservation target), named by a hash of their
content. A NodeClass with an image per architecture and variant (an alias) has one template per
image. What a template holds is adapters/template_data.py's; listing and deleting this
deployment's templates for the sync is adapters/template_inventory.py's."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from capacity_launcher.adapters.aws import aws_call, client
from capacity_launcher.adapters.cache import TtlCache
from capacity_launcher.adapters.image_parameters import ImageParameters
from capacity_launcher.adapters.image_selection import ImageSelection
from capacity_launcher.adapters.instance_profiles import InstanceProfiles
from capacity_launcher.adapters.security_groups import SecurityGroups
from capacity_launcher.adapters.template_data import (
    on_base,
    reservation_specification,
    template_data,
    template_name,
    template_tags,
)
from capacity_launcher.adapters.template_inventory import last_used
from capacity_launcher.domain.apis.config import NodeClass
from capacity_launcher.domain.capacity.fleet import LaunchTemplate
from capacity_launcher.domain.capacity.image_architectures import (
    STANDARD,
    ImageArchitecture,
    ImageArchitectures,
    known,
)
from capacity_launcher.domain.capacity.platforms import reservation_platform
from capacity_launcher.domain.capacity.reservations import (
    ReservationUse,
    ReservedTarget,
    reservation_use,
)
from capacity_launcher.domain.capacity.shared_resolution import SharedImage
from capacity_launcher.domain.errors import (
    InstanceProfileNotReady,
    LaunchFailed,
    NodeClassRefused,
    Transient,
)
from capacity_launcher.domain.records.tags import (
    TEMPLATE_USED_AT,
)
from capacity_launcher.observability import logger

if TYPE_CHECKING:  # pragma: no cover - typing only
    from capacity_launcher.adapters.shared_resolutions import SharedResolutions

_ALREADY_EXISTS = "InvalidLaunchTemplateName.AlreadyExistsException"
# GetParameter's answer for a name SSM does not have (an alias's arm64 or accelerated image in a
# Region or release without one: the class goes without it, as in Karpenter).
_PARAMETER_NOT_FOUND = "ParameterNotFound"
_IMAGE_FIELDS = ("PlatformDetails", "UsageOperation", "Architecture")
_BASE_FIELD = "spec.launchTemplateName"
_BASE_SECONDS = 60.0
# A name this container created or saw is trusted this long, then ensured again: the sync may
# have deleted it since (service/template_sweep.py waits far longer before it does). Seconds on
# the container's clock, the one the sweep judges templates by (the emulator's locally, which
# the simulation moves), not monotonic ones.
KNOWN_FOR_SECONDS = 300.0
# A template found again is marked used (TEMPLATE_USED_AT) when its mark is older than this: a
# template in use carries a mark younger than this plus KNOWN_FOR_SECONDS, far inside the
# sweep's hour, so a NodeClass reverted to it keeps it (domain/capacity/template_lifecycle.py).
MARK_USED_AFTER_SECONDS = 60.0


class LaunchTemplates:
    """Creates each content-addressed template once; a warm container remembers the names it saw
    (for KNOWN_FOR_SECONDS, or until a launch finds one gone: `forget`). `stack`: the
    deployment's name, tagged on each template and on what it launches."""

    def __init__(
        self,
        ec2: Any | None = None,
        ssm: Any | None = None,
        stack: str | None = None,
        profiles: InstanceProfiles | None = None,
        *,
        clock: Callable[[], datetime],
        shared: SharedResolutions | None = None,
    ) -> None:
        """`clock`: the composition root's (the time a template is marked used, compared with
        EC2's and judged by the sweep on the same clock; and how long a name is remembered).
        `shared`: the resolutions the sync shares, asked first for the class's security groups
        and images (a launcher's)."""
        self._shared = shared
        self._ec2 = ec2 or client("ec2")
        self._stack = stack
        self._clock = clock
        self._profiles = profiles
        self._image_parameters = ImageParameters(ssm)
        self._security_groups = SecurityGroups(self._ec2, shared)
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
            stack=self._stack,
            instance_profile=self.instance_profile(node_class),
        )
        if node_class.spec.launch_template_name:
            data = on_base(self._base(node_class), data)
        template = LaunchTemplate(template_name(node_class.metadata.name, data), use)
        name = template.name
        with self._lock:
            now = self._clock().timestamp()
            if now - self._known.get(name, -KNOWN_FOR_SECONDS) < KNOWN_FOR_SECONDS:
                return template
        found = self._found(name)
        if found is None:
            self._create(name, data, node_class, use, images)
        else:
            self._mark_used(found)
        with self._lock:
            self._known[name] = self._clock().timestamp()
        return template

    def security_group_ids(self, node_class: NodeClass) -> tuple[str, ...]:
        """The class's security groups (resolved once per 5 minutes, as `ensure` reads them)."""
        return self._security_groups.ids(node_class)

    def instance_profile(self, node_class: NodeClass) -> str | None:
        """The profile the class's instances launch with, made for its role first (never a
        launch without the identity the class names: InstanceProfileNotReady instead)."""
        if node_class.spec.role is None:
            return node_class.spec.instance_profile
        if self._profiles is None:
            name, role = node_class.metadata.name, node_class.spec.role
            raise InstanceProfileNotReady(name, role, "NoProfiles", "this launcher makes none")
        return self._profiles.ensure(node_class)

    def forget(self, names: Iterable[str]) -> None:
        """A launch found these templates gone (the sweep deleted them, or an operator): the
        next `ensure` asks EC2 again, and creates them again under the same names."""
        with self._lock:
            for name in names:
                self._known.pop(name, None)

    def _found(self, name: str) -> Mapping[str, Any] | None:
        """The template as EC2 lists it, None when it has none. Asked by a filter, which answers
        an empty list where creating an existing template answers an error: a new container's
        first launch finds its template made by an earlier one, and an error reply costs
        botocore a scan of every EC2 shape for modeled errors (about 10 ms of a cold start's
        CPU)."""
        with aws_call("DescribeLaunchTemplates", fatal=LaunchFailed):
            found = self._ec2.describe_launch_templates(
                Filters=[{"Name": "launch-template-name", "Values": [name]}]
            )
        templates = found.get("LaunchTemplates") or []
        return templates[0] if templates else None

    def _mark_used(self, template: Mapping[str, Any]) -> None:
        """Tag a template found again with when, unless a launcher did so lately: the sweep
        keeps the templates launches use. A refusal is logged: the next find marks it."""
        now = self._clock()
        if (now - last_used(template)).total_seconds() < MARK_USED_AFTER_SECONDS:
            return
        stamp = now.astimezone(UTC).isoformat(timespec="seconds")
        try:
            with aws_call("CreateTags", fatal=LaunchFailed):
                self._ec2.create_tags(
                    Resources=[template["LaunchTemplateId"]],
                    Tags=[{"Key": TEMPLATE_USED_AT, "Value": stamp}],
                )
        except (LaunchFailed, Transient) as refused:
            logger.warning(
                "launch template not marked used; the next launch marks it",
                extra={"template": template.get("LaunchTemplateName"), "error": refused},
            )

    def _create(
        self,
        name: str,
        data: Mapping[str, Any],
        node_class: NodeClass,
        use: ReservationUse,
        images: Sequence[str],
    ) -> None:
        tags = template_tags(node_class.metadata.name, data, use, images, self._stack)
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
                self._architecture(i, self._described(i, node_class), variant)
                for i, variant in self._variant_images(node_class)
            ]
        )

    @staticmethod
    def _architecture(
        image_id: str, image: Mapping[str, Any] | None, variant: str | None = None
    ) -> ImageArchitecture | None:
        architecture = image.get("Architecture") if image is not None else None
        return ImageArchitecture(image_id, architecture, variant) if architecture else None

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
        shared = self._shared.image(node_class, image_id) if self._shared is not None else None
        if shared is not None:
            return shared.facts
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
        """The class's images: its main one, then `arm64ImageSsmParameter`'s and the accelerated
        ones SSM has, each once."""
        return tuple(dict.fromkeys(i for i, _ in self._variant_images(node_class)))

    def _variant_images(self, node_class: NodeClass) -> list[tuple[str, str | None]]:
        """(image id, variant) of the class's images: its main one, `arm64ImageSsmParameter`'s
        and each of `acceleratedImageSsmParameters`' that SSM has. With accelerated images the
        others are the standard variant; without, they have none (any type of their
        architecture runs them)."""
        if self._shared is not None:
            resolution = self._shared.for_class(node_class)
            if resolution is not None and resolution.images:
                return [(i.image_id, i.variant) for i in resolution.images]
        parameters = self._image_parameters
        accelerated = node_class.spec.accelerated_image_ssm_parameters or []
        standard = STANDARD if accelerated else None
        main = self._image_id(node_class)
        found = [(main, standard)]
        arm64 = _unless_missing(parameters.arm64_image_id, node_class)
        if arm64 is not None and arm64 != main:
            found.append((arm64, standard))
        for index, image in enumerate(accelerated):
            image_id = _unless_missing(parameters.accelerated_image_id, node_class, index)
            if image_id is not None:
                found.append((image_id, image.variant))
        return list(dict.fromkeys(found))

    def images(self, node_class: NodeClass) -> tuple[SharedImage, ...]:
        """The class's images (its main one first) with what DescribeImages says of each, as a
        shared resolution keeps them; empty when EC2 does not know the main one."""
        found: list[SharedImage] = []
        for image_id, variant in self._variant_images(node_class):
            facts = self._described(image_id, node_class)
            if facts is None:
                if not found:
                    return ()
                continue
            found.append(SharedImage(image_id, variant, dict(facts)))
        return tuple(found)

    def _image_id(self, node_class: NodeClass) -> str:
        spec = node_class.spec
        if spec.image_id:
            return spec.image_id
        if self._shared is not None:
            resolution = self._shared.for_class(node_class)
            if resolution is not None and resolution.images:
                return resolution.images[0].image_id
        if spec.image_selector_terms:
            return self._image_selection.image_id(node_class)
        return self._image_parameters.image_id(node_class)


def _unless_missing[**P](
    read: Callable[P, str | None], *args: P.args, **kw: P.kwargs
) -> str | None:
    """A parameter's image id; None when SSM has no such parameter."""
    try:
        return read(*args, **kw)
    except NodeClassRefused as refused:
        if refused.code != _PARAMETER_NOT_FOUND:
            raise
        return None
