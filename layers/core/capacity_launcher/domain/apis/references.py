"""What a configuration document names that must be applied for it to act: a NodePool's
NodeClass, a quota's flavors (NodePools), a reservation's PriorityClass (docs/ome.md,
docs/karpenter.md, "Applied in any order").

As in Kubernetes, a document is applied whatever it names: one naming something not applied yet
is stored, and its status says what it waits for (a condition False, naming the missing object).
What acts on it refuses meanwhile: a request for a pool whose NodeClass is missing, or associated
with a reservation whose PriorityClass is missing, is Rejected naming it. A cohort is not a
document here (as Kueue's implicit cohorts, it is the quotas naming it), so naming one never
waits for anything.
"""

from __future__ import annotations

from collections.abc import Collection

from capacity_launcher.domain.apis.config import NodeClass, NodePool
from capacity_launcher.domain.apis.priority_classes import PRIORITY_CLASS_NAME_PATH
from capacity_launcher.domain.apis.quotas import CapacityQuota
from capacity_launcher.domain.field_errors import FieldError

NODE_CLASS_PATH = "spec.nodeClassRef"


def waiting_for(
    document: NodeClass | NodePool | CapacityQuota,
    node_classes: Collection[str] = (),
    node_pools: Collection[str] = (),
    unresolved_class: str | None = None,
) -> list[FieldError]:
    """What `document` names that is not applied (given the stored NodeClasses, NodePools, and
    the PriorityClass its write found missing), each at its field, saying what waits for it."""
    if isinstance(document, NodePool):
        ref = document.spec.node_class_ref
        if ref in node_classes:
            return []
        return [
            FieldError(
                NODE_CLASS_PATH,
                f"NodeClass {ref!r} is not applied yet: requests for this pool are rejected "
                "until it is (status NodeClassReady False)",
            )
        ]
    if not isinstance(document, CapacityQuota):
        return []
    found = [
        FieldError(
            f"spec.resourceGroups[{g}].flavors[{f}].name",
            f"NodePool {flavor.name!r} is not applied yet: nothing is admitted there until it is "
            "(status Ready False, FlavorNotFound)",
        )
        for g, group in enumerate(document.spec.resource_groups)
        for f, flavor in enumerate(group.flavors)
        if flavor.name not in node_pools
    ]
    if unresolved_class is not None:
        found.append(
            FieldError(
                PRIORITY_CLASS_NAME_PATH,
                f"PriorityClass {unresolved_class!r} is not applied yet: requests associated "
                "with this reservation are rejected until it is (status PriorityClassReady "
                "False)",
            )
        )
    return found
