"""One TLS context for every botocore client of the test process that would make the same one.

Each new client's HTTP session (botocore's `URLLib3Session`) makes a new `ssl.SSLContext` for its
connection pool, whether or not it ever connects over TLS: OpenSSL's context, its default
ciphers and options, 0.3 ms of CPU a client (8 % of an integration test's fixed cost: each
test's cloud starts new clients, `aws.client.cache_clear()`). No test connects over TLS (moto
answers in process, the served local cloud over plain HTTP), and botocore configures each
context the same way from the same inputs: `shared_tls_contexts()` gives every session with the
same TLS settings (its `verify`, its client certificate) one context, made by botocore's own
function the first time. A session with proxies makes its own, as before: botocore changes a
proxy's context after making it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import botocore.httpsession


@contextmanager
def shared_tls_contexts() -> Iterator[dict[tuple[Any, ...], Any]]:
    """While open, sessions of the same TLS settings share one context (yielded: settings ->
    context)."""
    session_class = botocore.httpsession.URLLib3Session
    original = session_class._get_ssl_context
    made: dict[tuple[Any, ...], Any] = {}

    def get_ssl_context(self: Any) -> Any:
        if self._proxy_config._proxies:
            return original(self)
        settings = (self._verify, self._cert_file, self._key_file)
        context = made.get(settings)
        if context is None:
            context = made[settings] = original(self)
        return context

    session_class._get_ssl_context = get_ssl_context  # type: ignore[method-assign]
    try:
        yield made
    finally:
        session_class._get_ssl_context = original  # type: ignore[method-assign]
