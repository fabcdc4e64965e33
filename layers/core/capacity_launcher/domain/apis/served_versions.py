"""The registry of every served (apiVersion, kind): the hubs, and the versions converted to them.

The hubs are the ``capacity-launcher/v1`` kinds, served unchanged (docs/api-versions.md). Each
family of other versions registers itself here with one ``REGISTRY.serve(...)`` line.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from capacity_launcher.domain.apis.api_versions import ServedVersion, VersionRegistry
from capacity_launcher.domain.apis.config import (
    CAPACITY_QUOTA,
    NODE_CLASS,
    NODE_POOL,
    NodeClass,
    NodePool,
)
from capacity_launcher.domain.apis.documents import Document, parse_document, to_document
from capacity_launcher.domain.apis.hub_kinds import own_hub
from capacity_launcher.domain.apis.karpenter import ec2nodeclass, nodepool
from capacity_launcher.domain.apis.kept_fields import Kept
from capacity_launcher.domain.apis.kueue.cohorts import cohort_version
from capacity_launcher.domain.apis.ome.versions import ome_versions
from capacity_launcher.domain.apis.priority_classes import priority_class_version
from capacity_launcher.domain.apis.provisioners import provisioner_version
from capacity_launcher.domain.apis.quotas import CapacityQuota

HUB_API_VERSION = "capacity-launcher/v1"


def _hub(kind: str, model: type[BaseModel]) -> ServedVersion:
    def parse(data: Mapping[str, Any]) -> Document:
        return parse_document(data)

    return own_hub(
        HUB_API_VERSION,
        kind,
        model,
        parse,
        lambda document: Kept(HUB_API_VERSION, kind),
        document=to_document,
    )


REGISTRY = VersionRegistry()
REGISTRY.serve(
    _hub(NODE_CLASS, NodeClass),
    _hub(NODE_POOL, NodePool),
    _hub(CAPACITY_QUOTA, CapacityQuota),
    hub=True,
)
REGISTRY.serve(*nodepool.versions(), *ec2nodeclass.versions())
REGISTRY.serve(*ome_versions())
REGISTRY.serve(priority_class_version(), hub=True)
REGISTRY.serve(cohort_version(), hub=True)
REGISTRY.serve(provisioner_version())
# Karpenter's AWSNodeTemplate (v1alpha1) became the EC2NodeClass; Karpenter serves it no more.
REGISTRY.retire(
    "karpenter.k8s.aws/v1alpha1", "AWSNodeTemplate", "karpenter.k8s.aws/v1 EC2NodeClass"
)
