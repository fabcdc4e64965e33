"""Clients of the test process with the same TLS settings share one TLS context
(tests/support/tls_contexts.py, open for the whole session): made by botocore as it makes each
one; other settings, or proxies, get their own."""

from __future__ import annotations

from typing import Any

import boto3
import botocore.httpsession
from botocore.config import Config

from tests.support.cloud import REGION, Cloud


def _context(client: Any) -> Any:
    return client._endpoint.http_session._manager.connection_pool_kw["ssl_context"]


def test_two_containers_clients_share_one_tls_context_as_botocore_makes_it(cloud: Cloud) -> None:
    # Given two containers' clients, each of its own session
    first = boto3.Session(region_name=REGION).client("ec2")
    second = boto3.Session(region_name=REGION).client("sqs")
    # Then their connection pools hold one TLS context
    assert _context(first) is _context(second)
    # And it is configured as botocore configures a new one
    made = botocore.httpsession.create_urllib3_context()
    shared = _context(first)
    assert (shared.protocol, shared.options, shared.verify_mode, shared.check_hostname) == (
        made.protocol,
        made.options,
        made.verify_mode,
        made.check_hostname,
    )


def test_other_tls_settings_or_proxies_get_their_own_context(cloud: Cloud) -> None:
    session = boto3.Session(region_name=REGION)
    verified = session.client("ec2")
    # A client that does not verify, or verifies with another bundle, has another context
    unverified = session.client("ec2", verify=False)
    bundled = session.client("ec2", verify="/nonexistent/bundle.pem")
    assert len({id(_context(c)) for c in (verified, unverified, bundled)}) == 3
    assert _context(unverified) is _context(session.client("sqs", verify=False))
    # And a client with proxies makes its own each time, as botocore does
    proxied = Config(proxies={"https": "http://proxy.invalid:3128"})
    first, second = (session.client("ec2", config=proxied) for _ in range(2))
    assert _context(first) is not _context(second)
    assert _context(first) is not _context(verified)
