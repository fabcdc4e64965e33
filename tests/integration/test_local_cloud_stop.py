"""A local cloud's stop leaves nothing of it in moto for the next cloud, unless the process ends
with it (`reset_on_stop=False`: a simulation run, whose process exits next)."""

from __future__ import annotations

import pytest
from moto.backends import get_backend
from moto.moto_api import _internal as moto_api

import moto_capacity
from local_cloud.cloud import LocalCloud, LocalCloudOptions

ACCOUNT, REGION = "123456789012", "us-east-1"


def _tables() -> list[str]:
    return sorted(str(name) for name in get_backend("dynamodb")[ACCOUNT][REGION].tables)


@pytest.mark.parametrize("reset_on_stop", [True, False])
def test_stop_resets_moto_unless_the_process_ends_with_the_cloud(reset_on_stop: bool) -> None:
    # Given a local cloud in process, its resources made
    options = LocalCloudOptions(
        in_process=True, schedules=False, instance_events=False, reset_on_stop=reset_on_stop
    )
    cloud = LocalCloud(options)
    cloud.start()
    try:
        made = _tables()
        assert made, "the template's tables"
    finally:
        # When it stops
        cloud.stop()
    try:
        # Then its tables are gone from moto, or, when the process ends with it, left as they were
        assert _tables() == ([] if reset_on_stop else made)
    finally:
        moto_api.moto_api_backend.reset()
        moto_capacity.reset()
