"""Instance profiles the service makes for a NodeClass's `role` (Karpenter's EC2NodeClass
`spec.role`): one per NodeClass, named and placed deterministically, so every function finds it
again without storing anything, and the sync finds the ones no NodeClass names any more.

The name is a hash of the deployment (its state table's name), the Region and the NodeClass's
name (Karpenter hashes its cluster, Region and NodeClass); the path holds the Region and the
deployment's hash, so one ListInstanceProfiles by path lists exactly this deployment's profiles
in this Region, and the template's grants on instance profiles name that path only.
"""

from __future__ import annotations

import hashlib

from capacity_launcher.domain.apis.config import NodeClass
from capacity_launcher.domain.records.tags import MANAGED, NODE_CLASS

ROLE_FIELD = "spec.role"
# Every profile the service makes lives under this path (the template's grants name it).
PATH_ROOT = "/capacity-launcher/"
NAME_PREFIX = "capacity-launcher_"
REGION_TAG = "capacity-launcher:region"


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]


def profile_path(deployment: str, region: str) -> str:
    """The path of this deployment's profiles in `region`."""
    return f"{PATH_ROOT}{region}/{_digest(deployment)}/"


def profile_name(deployment: str, region: str, node_class: str) -> str:
    """The instance profile a NodeClass's role is given in (at most 42 characters)."""
    return NAME_PREFIX + _digest(deployment, region, node_class)


def role_name(role: str) -> str:
    """The role's name as AddRoleToInstanceProfile takes it: a path (or an ARN) is dropped, as
    Karpenter drops it."""
    return role.rsplit("/", 1)[-1]


def role_mismatch(role: str, arn: str) -> str | None:
    """Why the role IAM has by the name of `role` is not the one `role` names, when it is given
    as an ARN (another account's, or another path) or with a path: AddRoleToInstanceProfile
    takes a name, and this account's role of that name must not stand in for another."""
    if role.startswith("arn:"):
        named = role
    elif "/" in role:
        named = arn.split(":role/", 1)[0] + ":role/" + role.lstrip("/")
    else:
        return None
    if named == arn:
        return None
    return f"this account's role {role_name(role)!r} is {arn}, not the role named"


def profile_tags(node_class: NodeClass, region: str) -> dict[str, str]:
    return {MANAGED: "true", NODE_CLASS: node_class.metadata.name, REGION_TAG: region}
