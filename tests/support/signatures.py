"""Signatures the local cloud never checks, not computed (tests/conftest.py opens this for the test
session, tests/simulation/world.py for each run).

moto checks no request's signature: it reads the access key and the region from the scope of
`Authorization`, nothing else of it (its IAM authorization, which would check, is never
switched on here). Signing every call (the canonical request built and hashed, the HMAC chain)
was a twelfth of a simulation run's CPU and 6.5% of an integration test's. Whether botocore signs
correctly is botocore's to test; which signer the functions use is checked on its own
(tests/integration/test_support_clients.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import botocore.auth

# A signature's 64 hexadecimal digits, never computed (`placeholder_signatures`).
PLACEHOLDER_SIGNATURE = "0" * 64


@contextmanager
def placeholder_signatures() -> Iterator[None]:
    """While open, botocore's SigV4 signer (`v4`: every service the suites call) writes the
    headers a signed request has, with the credential's scope and the date (the simulated one in
    a simulation), and a placeholder for the signature itself, not computed. Every other signer
    (S3's `s3v4`, a subclass) signs as before."""
    signer: Any = botocore.auth.AUTH_TYPE_MAPS["v4"]
    original = signer.add_auth

    def add_auth(self: Any, request: Any) -> None:
        if type(self) is not signer or self.credentials is None:
            return original(self, request)  # refused (no credentials) as botocore refuses
        for header in ("Authorization", "X-Amz-Date", "X-Amz-Security-Token"):
            if header in request.headers:  # a retry's request, signed before
                del request.headers[header]
        stamp = botocore.auth.get_current_datetime().strftime(botocore.auth.SIGV4_TIMESTAMP)
        request.context["timestamp"] = stamp  # as botocore's signer notes it
        request.headers["X-Amz-Date"] = stamp
        if self.credentials.token:
            request.headers["X-Amz-Security-Token"] = self.credentials.token
        scope = "/".join(
            (self.credentials.access_key, stamp[:8], self._region_name, self._service_name)
        )
        request.headers["Authorization"] = (
            f"AWS4-HMAC-SHA256 Credential={scope}/aws4_request, "
            f"SignedHeaders=host;x-amz-date, Signature={PLACEHOLDER_SIGNATURE}"
        )
        return None

    signer.add_auth = add_auth
    try:
        yield
    finally:
        signer.add_auth = original
