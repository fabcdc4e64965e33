"""boto3 clients, made once per container, with botocore's retry modes (no hand-written retry)."""

from __future__ import annotations

from functools import cache
from typing import Any, Literal

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

# EC2 throttles per account: adaptive mode adds client-side rate limiting on top of backoff.
_ADAPTIVE = frozenset({"ec2"})
_MAX_ATTEMPTS = 5


@cache
def client(service: str) -> Any:
    """A shared client for `service` (thread-safe; endpoint from AWS_ENDPOINT_URL when set)."""
    mode: Literal["adaptive", "standard"] = "adaptive" if service in _ADAPTIVE else "standard"
    config = Config(
        retries={"mode": mode, "max_attempts": _MAX_ATTEMPTS},
        connect_timeout=5,
        read_timeout=30,
        max_pool_connections=50,
    )
    return boto3.session.Session().client(service, config=config)  # type: ignore[call-overload]


def error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", "Unknown"))


def error_message(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Message", ""))
