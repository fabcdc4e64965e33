"""capacity_launcher_client: submit launch requests to capacity-launcher and learn how they
ended. The request model is the service's own (`LaunchRequest`), so what it refuses, this does.

    from capacity_launcher_client import LaunchClient, LaunchRequest

    client = LaunchClient.connect("capacity-launcher")  # the stack's outputs name everything
    record = client.submit_and_wait(LaunchRequest(request_id="run-42", node_pool="gpu", count=4))
"""

from capacity_launcher.domain.errors import InvalidLaunchRequest
from capacity_launcher.domain.launch_request import LaunchRequest
from capacity_launcher.domain.records.status import RequestRecord, RequestStatus
from capacity_launcher_client.client import (
    CLIENT_SOURCE,
    LaunchClient,
    Progress,
    SubmitRefused,
    WaitTimedOut,
    as_request,
)
from capacity_launcher_client.deployment import Deployment, DeploymentNotFound

__all__ = [
    "CLIENT_SOURCE",
    "Deployment",
    "DeploymentNotFound",
    "InvalidLaunchRequest",
    "LaunchClient",
    "LaunchRequest",
    "Progress",
    "RequestRecord",
    "RequestStatus",
    "SubmitRefused",
    "WaitTimedOut",
    "as_request",
]
