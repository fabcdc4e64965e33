"""The local cloud makes one client per service for its own work (its resources, the visibility
override, its triggers' wiring): each client costs a class built from the service's model."""

from __future__ import annotations

from collections import Counter
from typing import Any

import botocore.session
import pytest

from tests.support.cloud import HOST, cloud_of, harness_options


def test_a_cloud_starting_makes_each_of_its_clients_once(monkeypatch: pytest.MonkeyPatch) -> None:
    made: Counter[tuple[int, str]] = Counter()
    original = botocore.session.Session.create_client

    def counted(session: Any, service_name: str, *args: Any, **kwargs: Any) -> Any:
        made[(id(session), service_name)] += 1
        return original(session, service_name, *args, **kwargs)

    monkeypatch.setattr(botocore.session.Session, "create_client", counted)
    options = harness_options(
        in_process=True, function_host=HOST, example_network=True, visibility_timeout_seconds=30
    )
    with cloud_of(options) as cloud:
        assert cloud.names.launch_queue_url
    assert made
    assert {key: n for key, n in made.items() if n > 1} == {}
