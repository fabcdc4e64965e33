"""CapacityQuota documents in their short form, for the demo and the tests that apply them.

`examples/quotas/` shows the full form. Here a quota covers one node pool (its one flavor) and
names its requester after itself, which is all the demo and the tests need."""

from __future__ import annotations

from typing import Any


def capacity_quota(
    name: str,
    pool: str,
    nominal: dict[str, str],
    *,
    borrowing: dict[str, str] | None = None,
    cohort: str = "research",
    **spec: Any,
) -> dict[str, Any]:
    """A quota for requester `name` on `pool`: `nominal` and `borrowing` map resource to quantity
    (`{"instances": "6"}`); a borrowing limit turns `allowBorrowing` on unless `spec` says."""
    borrowing = borrowing or {}
    resources = []
    for resource, quantity in nominal.items():
        term = {"name": resource, "nominalQuota": quantity}
        if resource in borrowing:
            term["borrowingLimit"] = borrowing[resource]
        resources.append(term)
    if borrowing:
        spec.setdefault("allowBorrowing", True)
    return {
        "apiVersion": "capacity-launcher/v1",
        "kind": "CapacityQuota",
        "metadata": {"name": name},
        "spec": {
            "requesters": [name],
            "cohort": cohort,
            "resourceGroups": [
                {
                    "coveredResources": list(nominal),
                    "flavors": [{"name": pool, "resources": resources}],
                }
            ],
            **spec,
        },
    }
