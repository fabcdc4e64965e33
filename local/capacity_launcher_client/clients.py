"""One boto3 session per place the service runs, and one client per AWS service, for the whole
process: what the client, the CLI and `top` share.

A boto3 session reads botocore's data files (endpoints, partitions, service models) when its first
client is built: tens of milliseconds of CPU per client made from a fresh session, paid on every
call when each call builds its own. The core's `adapters/aws.py` keeps one shared session for a
Lambda container (its endpoint from the environment); a process of the client may talk to
several deployments (a stack, a local cloud, each on its own endpoint and credentials), so it
keeps one session per (region, endpoint, credentials), and each client lives as long as the process.

Retries are botocore's standard mode, bounded. The connect timeout is short, and a local
endpoint retries no more than once: an endpoint nobody listens on fails within seconds, naming
itself, rather than after botocore's legacy ten DynamoDB attempts (about 26 s of silence).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # imported when the first session is made: `resolve` and `--help` need neither
    import boto3
    from botocore.config import Config

# Any credentials do for moto; used only for a local endpoint.
LOCAL_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
}
CONNECT_TIMEOUT_SECONDS = 3
READ_TIMEOUT_SECONDS = 30
# Attempts per call, the first included: AWS's throttling and transient errors are retried with
# botocore's backoff; a local cloud answers at once or is not running.
MAX_ATTEMPTS = 3
LOCAL_MAX_ATTEMPTS = 2
# EC2 throttles per account: adaptive mode adds client-side rate limiting on top of backoff.
_ADAPTIVE = frozenset({"ec2"})


@dataclass(frozen=True)
class Target:
    """Where calls go: what one session and its clients are shared by."""

    region: str
    endpoint_url: str | None = None

    @property
    def is_local(self) -> bool:
        return self.endpoint_url is not None


_LOCK = threading.Lock()  # building a client from a session is not thread-safe
_SESSIONS: dict[Target, boto3.Session] = {}
_CLIENTS: dict[tuple[Target, str], Any] = {}


def session(target: Target) -> boto3.Session:
    """The process's session for `target` (a local one with moto's throwaway credentials)."""
    with _LOCK:
        return _session(target)


def _session(target: Target) -> boto3.Session:
    found = _SESSIONS.get(target)
    if found is None:
        import boto3

        if target.is_local:
            found = boto3.Session(
                region_name=target.region,
                aws_access_key_id=LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"],
                aws_secret_access_key=LOCAL_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
                aws_session_token=LOCAL_CREDENTIALS["AWS_SESSION_TOKEN"],
            )
        else:
            found = boto3.Session(region_name=target.region)
        _SESSIONS[target] = found
    return found


def client(target: Target, service: str) -> Any:
    """The process's client for `service` at `target`, built on first use (thread-safe)."""
    key = (target, service)
    made = _CLIENTS.get(key)
    if made is not None:
        return made
    with _LOCK:
        made = _CLIENTS.get(key)
        if made is None:
            made = _session(target).client(  # type: ignore[call-overload]
                service, endpoint_url=target.endpoint_url, config=config(target, service)
            )
            _CLIENTS[key] = made
    return made


def config(target: Target, service: str) -> Config:
    from botocore.config import Config

    mode: Literal["adaptive", "standard"] = "adaptive" if service in _ADAPTIVE else "standard"
    attempts = LOCAL_MAX_ATTEMPTS if target.is_local else MAX_ATTEMPTS
    return Config(
        retries={"mode": mode, "max_attempts": attempts},
        connect_timeout=CONNECT_TIMEOUT_SECONDS,
        read_timeout=READ_TIMEOUT_SECONDS,
    )


def load_sdk(local: bool = False) -> None:
    """Import botocore's HTTP layer without pyOpenSSL, before a command that calls AWS; for a
    `local` deployment, without the AWS CRT too.

    botocore's HTTP session takes the standard library's SSLContext, which it finds through
    urllib3's pyOpenSSL module when that is installed (it then loads pyOpenSSL and cryptography:
    about a twentieth of a second of CPU, on every command) and through urllib3.util.ssl_ when
    it is not; both name the same class, `ssl.SSLContext`. botocore also loads the AWS CRT when
    it is installed (about 40 ms more): for SigV4a, `aws login` credentials and S3's CRT
    checksums, none of which a local cloud uses (moto, plain SigV4, throwaway credentials), so
    a local deployment's botocore runs as if it were not installed; against AWS it is loaded as
    usual. Each is loaded as if absent only while botocore is imported: a later import loads it
    as usual (nothing in the CLI makes one)."""
    import sys

    if "botocore.httpsession" in sys.modules:
        return
    hidden = [m for m in (_PYOPENSSL, *((_CRT,) if local else ())) if m not in sys.modules]
    for module in hidden:
        sys.modules[module] = None  # type: ignore[assignment]  # import fails: not installed
    try:
        import botocore.httpsession  # noqa: F401
    finally:
        for module in hidden:
            del sys.modules[module]


_PYOPENSSL = "urllib3.contrib.pyopenssl"
_CRT = "awscrt"


def forget() -> None:
    """Drop every shared session and client (tests; a process whose credentials changed)."""
    with _LOCK:
        _SESSIONS.clear()
        _CLIENTS.clear()
