"""Instance profiles for NodeClasses that name a `role` (Karpenter's EC2NodeClass `spec.role`).

One profile per NodeClass, named and placed by domain/capacity/instance_profiles.py, tagged as the
service's, holding the class's role: made when first needed (GetInstanceProfile, then GetRole,
CreateInstanceProfile with its path and tags, AddRoleToInstanceProfile), its role replaced when
the class names another, and deleted by the sync once no NodeClass names it (its role removed
first: IAM deletes only an empty profile). A class with `instanceProfile` uses that profile as
given; a class with neither launches with none.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from botocore.exceptions import ClientError

from capacity_launcher.adapters.aws import aws_call, client, error_code
from capacity_launcher.domain.apis.config import NodeClass
from capacity_launcher.domain.aws_errors import (
    IAM_ALREADY_EXISTS,
    IAM_NOT_FOUND,
    IAM_PROFILE_FULL,
    role_refusal,
)
from capacity_launcher.domain.capacity.instance_profiles import (
    NAME_PREFIX,
    profile_name,
    profile_path,
    profile_tags,
    role_mismatch,
    role_name,
)
from capacity_launcher.domain.errors import InstanceProfileNotReady, LaunchFailed

# A profile this container made or found holding its role is trusted this long, then looked at
# again (the sync deletes a profile only once its NodeClass is gone).
KNOWN_FOR_SECONDS = 300.0
# A role IAM said does not exist is not asked of again for this long (as Karpenter caches its
# role-not-found answers): a burst of requests to the class costs one GetRole.
REFUSED_FOR_SECONDS = 60.0


def _region() -> str:
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"


class InstanceProfiles:
    """`deployment`: what tells this deployment's profiles from another's in the account (the
    state table's name); `region`: the Region the service launches in; `read_only`: `ensure`
    only checks, as `status` does (a dry run makes nothing); `clock`: the seconds its remembered
    answers age by (the simulation gives its own, so that which AWS calls a run makes does not
    depend on how fast the machine ran it)."""

    def __init__(
        self,
        deployment: str,
        iam: Any | None = None,
        region: str | None = None,
        *,
        read_only: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._iam = iam or client("iam")
        self._clock = clock
        self._read_only = read_only
        self._deployment = deployment
        self._region = region or _region()
        self._lock = threading.Lock()
        self._known: dict[str, float] = {}  # profile name -> when it last held its role
        self._refused: dict[str, tuple[float, InstanceProfileNotReady]] = {}

    @property
    def path(self) -> str:
        return profile_path(self._deployment, self._region)

    def name(self, node_class: NodeClass) -> str | None:
        """The profile the class's instances launch with: its role's (made by the service), its
        `instanceProfile` as given, or none."""
        spec = node_class.spec
        if spec.role is None:
            return spec.instance_profile
        return self.name_of(node_class.metadata.name)

    def name_of(self, node_class: str) -> str:
        """The profile the service makes for the NodeClass named `node_class` (stored or not)."""
        return profile_name(self._deployment, self._region, node_class)

    def ensure(self, node_class: NodeClass) -> str | None:
        """The profile's name, the profile made and holding the class's role first;
        InstanceProfileNotReady when the role does not exist or may not be passed."""
        name = self.name(node_class)
        role = node_class.spec.role
        if role is None or name is None:
            return name
        now = self._clock()
        with self._lock:
            if now - self._known.get(name, -KNOWN_FOR_SECONDS) < KNOWN_FOR_SECONDS:
                return name
            refused = self._refused.get(name)
        if refused is not None and now - refused[0] < REFUSED_FOR_SECONDS:
            raise refused[1]
        if self._read_only:
            return self.status(node_class)
        try:
            self._ensure(name, node_class, role)
        except InstanceProfileNotReady as error:
            with self._lock:
                self._refused[name] = (now, error)
            raise
        with self._lock:
            self._known[name] = now
            self._refused.pop(name, None)
        return name

    def _ensure(self, name: str, node_class: NodeClass, role: str) -> None:
        profile = self._get(name)
        if profile is None or role_name(role) != role:
            # A role named with a path or as an ARN is checked to be that one every time: the
            # profile holds it by name only.
            self._check_role(node_class, role)
        if profile is None:
            profile = self._create(name, node_class)
        held = [str(r["RoleName"]) for r in profile.get("Roles", [])]
        wanted = role_name(role)
        if held == [wanted]:
            return
        if held and role_name(role) == role:
            # The role the class now names is checked before the one its instances run with is
            # taken out: a role missing or not allowed leaves the profile as it was.
            self._check_role(node_class, role)
        for other in held:  # a profile holds one role: the class now names another
            self._remove_role(name, other)
        self._add_role(name, node_class, role)

    def status(self, node_class: NodeClass) -> str | None:
        """The profile's name, read only (for `get ec2nodeclass`); InstanceProfileNotReady when
        the class's role does not exist or may not be passed. A role that exists is ready: its
        profile is made at the class's first launch if it is not yet."""
        name = self.name(node_class)
        role = node_class.spec.role
        if role is None or name is None:
            return name
        profile = self._get(name)
        held = [r["RoleName"] for r in (profile or {}).get("Roles", [])]
        if held != [role_name(role)]:
            self._check_role(node_class, role)
        return name

    def managed(self) -> list[str]:
        """The names of this deployment's profiles in this Region (every page)."""
        names: list[str] = []
        request: dict[str, Any] = {"PathPrefix": self.path}
        while True:
            with aws_call("ListInstanceProfiles", fatal=LaunchFailed):
                page = self._iam.list_instance_profiles(**request)
            names += [
                str(p["InstanceProfileName"])
                for p in page.get("InstanceProfiles", [])
                # Only ours, whatever the listing answers (never another's profile deleted).
                if str(p.get("Path", "")).startswith(self.path)
                and str(p["InstanceProfileName"]).startswith(NAME_PREFIX)
            ]
            if not page.get("IsTruncated") or not page.get("Marker"):
                return names
            request["Marker"] = page["Marker"]

    def delete(self, name: str) -> bool:
        """Removes the profile's role and deletes it; False when it was gone already."""
        profile = self._get(name)
        if profile is None:
            return False
        for role in profile.get("Roles", []):
            self._remove_role(name, str(role["RoleName"]))
        with aws_call("DeleteInstanceProfile", fatal=LaunchFailed):
            try:
                self._iam.delete_instance_profile(InstanceProfileName=name)
            except ClientError as error:
                if error_code(error) == IAM_NOT_FOUND:
                    return False
                raise
        with self._lock:
            self._known.pop(name, None)
        return True

    # -- IAM calls ------------------------------------------------------------------------------

    def _get(self, name: str) -> Mapping[str, Any] | None:
        with aws_call("GetInstanceProfile", fatal=LaunchFailed):
            try:
                found: Mapping[str, Any] = self._iam.get_instance_profile(InstanceProfileName=name)[
                    "InstanceProfile"
                ]
            except ClientError as error:
                if error_code(error) == IAM_NOT_FOUND:
                    return None
                raise
        return found

    def _check_role(self, node_class: NodeClass, role: str) -> None:
        with aws_call("GetRole", fatal=_role_refused(node_class, role)):
            found = self._iam.get_role(RoleName=role_name(role))["Role"]
        mismatch = role_mismatch(role, str(found.get("Arn", "")))
        if mismatch is not None:
            raise InstanceProfileNotReady(node_class.metadata.name, role, "RoleNotFound", mismatch)

    def _create(self, name: str, node_class: NodeClass) -> Mapping[str, Any]:
        tags = [{"Key": k, "Value": v} for k, v in profile_tags(node_class, self._region).items()]
        with aws_call("CreateInstanceProfile", fatal=LaunchFailed):
            try:
                made: Mapping[str, Any] = self._iam.create_instance_profile(
                    InstanceProfileName=name, Path=self.path, Tags=tags
                )["InstanceProfile"]
            except ClientError as error:
                if error_code(error) != IAM_ALREADY_EXISTS:
                    raise
                made = self._get(name) or {"Roles": []}  # another worker made it
        return made

    def _add_role(self, name: str, node_class: NodeClass, role: str) -> None:
        with aws_call("AddRoleToInstanceProfile", fatal=_role_refused(node_class, role)):
            try:
                self._iam.add_role_to_instance_profile(
                    InstanceProfileName=name, RoleName=role_name(role)
                )
            except ClientError as error:
                # Another worker added it first: the profile holds one role, which must be ours.
                if error_code(error) != IAM_PROFILE_FULL:
                    raise
                profile = self._get(name) or {}
                if [r["RoleName"] for r in profile.get("Roles", [])] != [role_name(role)]:
                    raise

    def _remove_role(self, name: str, role: str) -> None:
        with aws_call("RemoveRoleFromInstanceProfile", fatal=LaunchFailed):
            try:
                self._iam.remove_role_from_instance_profile(InstanceProfileName=name, RoleName=role)
            except ClientError as error:
                if error_code(error) != IAM_NOT_FOUND:
                    raise


def _role_refused(node_class: NodeClass, role: str) -> Any:
    def refused(code: str, message: str) -> LaunchFailed | InstanceProfileNotReady:
        reason = role_refusal(code)
        if reason is None:
            return LaunchFailed(code, message)
        return InstanceProfileNotReady(node_class.metadata.name, role, reason, message)

    return refused
