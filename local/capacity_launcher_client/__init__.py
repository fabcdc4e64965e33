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

Each name is imported when first asked for: `capacity_launcher_client.deployment` alone (what the
CLI's every command reads) does not load the client, its models or boto3.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

# Each exported name -> the module it comes from.
_CLIENT = "capacity_launcher_client.client"
_DEPLOYMENT = "capacity_launcher_client.deployment"
_STATUS = "capacity_launcher.domain.records.status"
_ERRORS = "capacity_launcher.domain.errors"
_SOURCES = {
    "CLIENT_SOURCE": _CLIENT,
    "Deployment": _DEPLOYMENT,
    "DeploymentNotFound": _DEPLOYMENT,
    "FieldError": "capacity_launcher.domain.field_errors",
    "InvalidLaunchRequest": _ERRORS,
    "LaunchClient": _CLIENT,
    "LaunchRequest": _CLIENT,
    "PoolNotChecked": _CLIENT,
    "Progress": _CLIENT,
    "RequestRecord": _STATUS,
    "RequestRejected": _ERRORS,
    "RequestStatus": _STATUS,
    "SubmitRefused": _CLIENT,
    "WaitTimedOut": _CLIENT,
    "as_request": _CLIENT,
}

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


def __getattr__(name: str) -> Any:
    """PEP 562: an exported name, imported from its module on first use and kept here."""
    if name == "clients":
        value: Any = import_module("capacity_launcher_client.clients")
    elif name in _SOURCES:
        value = getattr(import_module(_SOURCES[name]), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
