"""Client reuse (issue 40): how many boto3 clients one `top` refresh builds, and how long a
producer's `LaunchClient.submit` takes, with one client per service for the process
(`capacity_launcher_client/clients.py`) against the naive baseline measured in the same run: a
fresh boto3 session and client on every call, as `Deployment.client` built them before.

Against an in-process local cloud (no Docker): the calls are real HTTP to moto's server, so the
times include the calls themselves, and the ratios are what the reuse saves.

    PYTHONPATH=layers/core:local:. .venv/bin/python -m benchmarks.client_reuse
"""

from __future__ import annotations

import logging
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import boto3

from capacity_launcher_cli import top
from capacity_launcher_client import LaunchClient, LaunchRequest, clients
from capacity_launcher_client.clients import LOCAL_CREDENTIALS
from capacity_launcher_client.deployment import Deployment
from local_cloud.cloud import LocalCloud, LocalCloudOptions

REFRESHES = 3
SUBMITS = 10
_POOL = "bench-reuse"


@dataclass(frozen=True)
class Side:
    """One way of making clients, measured."""

    clients_built: int  # over REFRESHES refreshes, the process's first included
    refresh_seconds: float
    submit_seconds: float


@dataclass(frozen=True)
class Result:
    naive: Side
    reused: Side

    @property
    def clients_ratio(self) -> float:
        return self.naive.clients_built / max(self.reused.clients_built, 1)

    @property
    def submit_ratio(self) -> float:
        return self.naive.submit_seconds / self.reused.submit_seconds

    @property
    def refresh_ratio(self) -> float:
        return self.naive.refresh_seconds / self.reused.refresh_seconds


def _naive_client(deployment: Deployment, service: str) -> Any:
    """Before: a new session, and a new client from it, on every call."""
    local = deployment.is_local
    session = boto3.Session(
        region_name=deployment.region,
        aws_access_key_id=LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"] if local else None,
        aws_secret_access_key=LOCAL_CREDENTIALS["AWS_SECRET_ACCESS_KEY"] if local else None,
        aws_session_token=LOCAL_CREDENTIALS["AWS_SESSION_TOKEN"] if local else None,
    )
    return session.client(service, endpoint_url=deployment.endpoint_url)  # type: ignore[call-overload]


@contextmanager
def _naive() -> Iterator[None]:
    original = Deployment.client
    Deployment.client = _naive_client  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        Deployment.client = original  # type: ignore[method-assign]


@contextmanager
def _counting() -> Iterator[list[str]]:
    """Every boto3 client built while inside, by service."""
    built: list[str] = []
    original = boto3.Session.client

    def counted(self: boto3.Session, *args: Any, **kwargs: Any) -> Any:
        built.append(str(args[0] if args else kwargs.get("service_name")))
        return original(self, *args, **kwargs)

    boto3.Session.client = counted  # type: ignore[method-assign]
    try:
        yield built
    finally:
        boto3.Session.client = original  # type: ignore[method-assign]


def _median(run: Callable[[], object], times: int) -> float:
    took = []
    for _ in range(times):
        began = time.perf_counter()
        run()
        took.append(time.perf_counter() - began)
    return statistics.median(took)


def _side(deployment: Deployment, label: str) -> Side:
    clients.forget()  # a fresh process: the first refresh builds the clients it reuses
    with _counting() as built:
        for _ in range(REFRESHES):
            top.gather(deployment)
    refresh = _median(lambda: top.gather(deployment), REFRESHES)
    producer = LaunchClient(deployment)
    numbers = iter(range(10**6))

    def submit() -> None:
        request = LaunchRequest(request_id=f"{label}-{next(numbers)}", node_pool=_POOL, count=1)
        producer.submit(request, check=False)

    submit()
    return Side(len(built), refresh, _median(submit, SUBMITS))


def run() -> Result:
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    cloud = LocalCloud(LocalCloudOptions(port=0, schedules=False))
    deployment = cloud.start()
    try:
        with _naive():
            naive = _side(deployment, "naive")
        reused = _side(deployment, "reused")
    finally:
        cloud.stop()
    return Result(naive, reused)


def render(result: Result) -> str:
    rows = [
        (
            f"boto3 clients built by {REFRESHES} `top` refreshes",
            "clients_built",
            "{}",
            "clients_ratio",
        ),
        ("`top` refresh (median)", "refresh_seconds", "{:.3f} s", "refresh_ratio"),
        ("client `submit` (median)", "submit_seconds", "{:.4f} s", "submit_ratio"),
    ]
    lines = [
        "| measure | naive (a client per call) | reused (one per service) | ratio |",
        "|---|---:|---:|---:|",
    ]
    for label, field, shape, ratio in rows:
        naive = shape.format(getattr(result.naive, field))
        reused = shape.format(getattr(result.reused, field))
        lines.append(f"| {label} | {naive} | {reused} | {getattr(result, ratio):.1f}x |")
    return "\n".join(lines) + "\n"


def section(result: Result) -> list[str]:
    """The report's section (docs/BENCHMARKS.md)."""
    return [
        "## Client reuse (issue 40)",
        "",
        "One boto3 client per service for the process (`capacity_launcher_client/clients.py`), "
        "against the naive baseline in the same run: a new session and client on every call, as "
        "before. `python -m benchmarks.client_reuse` runs this alone.",
        "",
        *render(result).splitlines(),
        "",
    ]


def main() -> int:
    print(render(run()), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
