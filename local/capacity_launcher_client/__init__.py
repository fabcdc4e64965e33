"""capacity_launcher_client: submit launch requests to capacity-launcher and learn how they
ended. The request model is the service's own (`LaunchRequest`), so what it refuses, this does.

    from capacity_launcher_client import LaunchClient, LaunchRequest

    client = LaunchClient.connect("capacity-launcher")  # the stack's outputs name everything
    record = client.submit_and_wait(LaunchRequest(request_id="run-42", node_pool="gpu", count=4))

Errors, one type per mistake: InvalidLaunchRequest (a field breaks its rule: from a dict given to
`submit` and from `LaunchRequest(...)` alike; `.errors` lists each FieldError), RequestRejected
(the launcher would reject it: an unknown pool, `.code` UnknownNodePool), SubmitRefused (the bus
refused the event), WaitTimedOut (not finished in time), DeploymentNotFound; an endpoint nobody
answers raises botocore's EndpointConnectionError within seconds.
"""

from capacity_launcher.domain.errors import InvalidLaunchRequest, RequestRejected
from capacity_launcher.domain.field_errors import FieldError
from capacity_launcher.domain.records.status import RequestRecord, RequestStatus
from capacity_launcher_client import clients
from capacity_launcher_client.client import (
    CLIENT_SOURCE,
    LaunchClient,
    LaunchRequest,
    PoolNotChecked,
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
    "FieldError",
    "InvalidLaunchRequest",
    "LaunchClient",
    "LaunchRequest",
    "PoolNotChecked",
    "Progress",
    "RequestRecord",
    "RequestRejected",
    "RequestStatus",
    "SubmitRefused",
    "WaitTimedOut",
    "as_request",
    "clients",
]
