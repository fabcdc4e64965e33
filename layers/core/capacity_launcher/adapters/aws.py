"""boto3 clients, made once per container, with botocore's retry modes (no hand-written retry),
and `aws_call`: the one way an adapter turns a botocore ClientError into a domain error."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from functools import cache
from itertools import batched
from typing import TYPE_CHECKING, Any, Literal

import boto3
from botocore import __version__ as botocore_version
from botocore.config import Config
from botocore.exceptions import ClientError

from capacity_launcher.domain.aws_errors import ErrorKind, aws_error, classify
from capacity_launcher.domain.backoff import in_process_delay
from capacity_launcher.domain.errors import CapacityLauncherError

if TYPE_CHECKING:  # pragma: no cover - typing only
    from capacity_launcher.domain.apis.config import NodeClass

# EC2 throttles per account: adaptive mode adds client-side rate limiting on top of backoff.
_ADAPTIVE = frozenset({"ec2"})
_MAX_ATTEMPTS = 5
# What botocore's retry modes do not retry but DynamoDB means as "try again": writers that met.
_CONFLICT_CODES = frozenset({"TransactionConflictException", "TransactionCanceledException"})


_SESSION_LOCK = threading.Lock()  # one session's client creation is not thread-safe
# The operations the layer calls, by service: what a snapshot primes (`prime_clients`). A test
# holds it to the client methods the layer's source names.
OPERATIONS: dict[str, tuple[str, ...]] = {
    "dynamodb": (
        "BatchGetItem", "BatchWriteItem", "DeleteItem", "GetItem", "PutItem", "Query", "Scan",
        "TransactWriteItems", "UpdateItem",
    ),
    "ec2": (
        "CreateFleet", "CreateLaunchTemplate", "CreateTags", "DeleteLaunchTemplate",
        "DescribeCapacityBlockExtensionOfferings", "DescribeCapacityReservations",
        "DescribeImages", "DescribeInstanceStatus", "DescribeInstanceTypeOfferings",
        "DescribeInstanceTypes", "DescribeInstances", "DescribeLaunchTemplateVersions",
        "DescribeLaunchTemplates", "DescribeSecurityGroups", "DescribeSubnets",
        "PurchaseCapacityBlockExtension", "TerminateInstances",
    ),
    "events": ("PutEvents",),
    "iam": (
        "AddRoleToInstanceProfile", "CreateInstanceProfile", "DeleteInstanceProfile",
        "GetInstanceProfile", "GetRole", "ListInstanceProfiles", "RemoveRoleFromInstanceProfile",
    ),
    "resource-groups": ("ListGroupResources",),
    "sqs": ("ChangeMessageVisibility", "GetQueueAttributes", "SendMessage"),
    "ssm": ("GetParameter",),  # Powertools' SSMProvider, on our client
}  # fmt: skip
_MADE: dict[str, Any] = {}  # the container's clients, by service: what `prime_clients` primes


@cache
def _session() -> boto3.session.Session:
    return boto3.session.Session()


@cache
def client(service: str) -> Any:
    """A shared client for `service` (thread-safe; endpoint from AWS_ENDPOINT_URL when set).

    Every client comes from one botocore session, whose loader reads the shared data files
    (endpoints, partitions, retry rules) once for all of them: most of a cold start's client cost.
    After `client.cache_clear()` the next client starts a new session too."""
    with _SESSION_LOCK:
        if client.cache_info().currsize == 0:
            _session.cache_clear()
        return _made(_session(), service)


def _made(session: boto3.session.Session, service: str) -> Any:
    mode: Literal["adaptive", "standard"] = "adaptive" if service in _ADAPTIVE else "standard"
    config = Config(
        retries={"mode": mode, "max_attempts": _MAX_ATTEMPTS},
        connect_timeout=5,
        read_timeout=30,
        max_pool_connections=50,
    )
    made = session.client(service, config=config)  # type: ignore[call-overload]
    _MADE[service] = made
    if service == "dynamodb":
        # Before botocore's own retry handler, which leaves these alone. Any write can meet an
        # ongoing transaction on its item (TransactionConflictException), not only transactions.
        made.meta.events.register_first("needs-retry.dynamodb", _retry_conflicts)
    return made


def prime_clients() -> int:
    """Load, in each client the container made, the model of every operation the layer calls,
    its input and output shapes throughout: what each operation's first call would otherwise
    build. For a SnapStart snapshot, made once per published version; returns the shapes."""
    primed = 0
    for service, made in list(_MADE.items()):
        model, seen = made.meta.service_model, set[str]()
        for name in OPERATIONS.get(service, ()):
            operation = model.operation_model(name)
            for shape in (operation.input_shape, operation.output_shape):
                _walk(shape, seen)
        primed += len(seen)
    return primed


def _walk(shape: Any, seen: set[str]) -> None:
    """Resolve `shape` and the shapes under it, each name once (botocore caches each on its
    parent; a recursive shape makes a new child each time it is asked)."""
    if shape is None or shape.name in seen:
        return
    seen.add(shape.name)
    for child in (
        *getattr(shape, "members", {}).values(),
        getattr(shape, "member", None),
        getattr(shape, "key", None),
        getattr(shape, "value", None),
    ):
        _walk(child, seen)


def _retry_conflicts(response: Any = None, attempts: int = 1, **_: Any) -> float | None:
    """Transaction conflicts (two writers on one item) are transient, but botocore's retry modes
    do not retry them: retry here, bounded and jittered; None leaves the rest to botocore."""
    if attempts >= _MAX_ATTEMPTS or not response or len(response) < 2:
        return None
    parsed = response[1] or {}
    code = str(parsed.get("Error", {}).get("Code", ""))
    reasons = [str(r.get("Code", "")) for r in parsed.get("CancellationReasons") or []]
    if code in _CONFLICT_CODES and classify(code, reasons) is ErrorKind.TRANSIENT:
        return in_process_delay(attempts)
    return None


# How each service's listings say "there is more": the token a page ends with and the request
# parameter that asks for the page after it.
_NEXT_PAGE = (("LastEvaluatedKey", "ExclusiveStartKey"), ("NextToken", "NextToken"))


def all_pages(call: Callable[..., dict[str, Any]], **params: Any) -> Iterator[dict[str, Any]]:
    """Every page of a listing call, asked one after another: DynamoDB's Query and Scan (by
    `LastEvaluatedKey`), EC2's and Resource Groups' listings (by `NextToken`).

    botocore's paginators do the same, but a process's first `get_paginator` lists every service
    botocore ships to find their paginator files: about 7 ms of CPU, more than two calls cost, in
    every cold start (docs/BENCHMARKS.md, "Cold start"). A page that repeats the token it was
    asked with would loop forever: that is an error, as it is for botocore's paginators."""
    asked: Any = None
    while True:
        page = call(**params)
        yield page
        following = next(((p, page[t]) for t, p in _NEXT_PAGE if page.get(t)), None)
        if following is None:
            return
        parameter, token = following
        if token == asked:
            raise RuntimeError(f"the listing answered the token it was asked with: {parameter}")
        params, asked = {**params, parameter: token}, token


def most_per_call(api: Any, operation: str, parameter: str) -> int:
    """How many items the list `parameter` of `operation` takes, from the service model botocore
    ships (`max`): botocore checks a list's minimum before sending, never its maximum, so a longer
    one reaches AWS and is refused whole (`DescribeInstanceTypes` takes 100 `InstanceTypes`)."""
    shape = api.meta.service_model.operation_model(operation).input_shape
    return int(shape.members[parameter].metadata["max"])


def in_chunks(items: Iterable[str], size: int) -> Iterator[list[str]]:
    """`items` in lists of at most `size`, in order."""
    return (list(chunk) for chunk in batched(items, size, strict=False))


# What a request met in the SDK, before anything was sent: a member the running botocore's model of
# the operation lacks (AWS's own code for an unknown parameter), or a value it refuses.
SDK_UNKNOWN_PARAMETER = "UnknownParameter"
SDK_INVALID_PARAMETER = "InvalidParameter"


def members_unknown_to_sdk(made: Any, operation: str, params: Mapping[str, Any]) -> list[str]:
    """The request members `made`'s (a boto3 client's) model of `operation` does not know.

    botocore refuses such a request before sending it (ParamValidationError): a member that came
    with a later botocore than the one running (CreateFleet's ReservedCapacityOptions first in
    1.42.72) is never sent. The layer ships its own pinned botocore (layers/core/requirements.txt),
    so in Lambda this is empty; elsewhere (an older SDK) it names what is missing. A client
    without a model (a test's fake) knows everything."""
    model = getattr(getattr(made, "meta", None), "service_model", None)
    if model is None:
        return []
    shape = model.operation_model(operation).input_shape
    known = shape.members if shape is not None else {}
    return sorted(m for m in params if m not in known)


def sdk_refusal(operation: str, detail: str) -> str:
    """What to say when the running botocore refuses a request: which botocore, and the fix."""
    return (
        f"botocore {botocore_version} refused {operation} before sending it: {detail}; the "
        "functions run on the layer's pinned botocore (layers/core/requirements.txt): deploy "
        "the layer, or upgrade botocore where this runs"
    )


def error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", "Unknown"))


def cancellation_reasons(error: ClientError) -> list[str]:
    return [str(r.get("Code", "")) for r in error.response.get("CancellationReasons") or []]


def error_message(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Message", ""))


@contextmanager
def aws_call(
    operation: str,
    *,
    node_class: NodeClass | None = None,
    field: str | None = None,
    fatal: Callable[[str, str], CapacityLauncherError] | None = None,
) -> Iterator[None]:
    """Run AWS calls, raising what `domain.aws_errors.aws_error` makes of a ClientError.

    Throttled/Transient when retrying can help, ConditionFailed when a write's condition did not
    hold (catch it to read the answer), NodeClassRefused/LaunchFailed for a call made for
    `node_class` (`field` is the one blamed when the code names none), `fatal(code, message)` for
    the rest; with no `fatal`, the rest propagates as the ClientError it is.
    """
    try:
        yield
    except ClientError as error:
        domain = domain_error(operation, error, node_class=node_class, field=field, fatal=fatal)
        if domain is None:
            raise
        raise domain from error


def domain_error(
    operation: str,
    error: ClientError,
    *,
    node_class: NodeClass | None = None,
    field: str | None = None,
    fatal: Callable[[str, str], CapacityLauncherError] | None = None,
) -> CapacityLauncherError | None:
    """What `aws_call` raises for `error` (None: the ClientError itself), for errors caught by
    a library that wraps them (Powertools parameters) rather than in an `aws_call` block."""
    return aws_error(
        operation,
        error_code(error),
        error_message(error),
        cancellation_reasons(error),
        node_class=node_class,
        field=field,
        fatal=fatal,
    )
