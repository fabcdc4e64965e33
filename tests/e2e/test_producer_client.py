"""capacity_launcher_client against the local cloud: the README's snippet as written, submit and
wait with progress, refusals before sending, timeouts, and waits for scheduled capacity."""

from __future__ import annotations

import contextlib
import io
import json
import re
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from capacity_launcher.domain.errors import InvalidLaunchRequest
from capacity_launcher_client import (
    LaunchClient,
    LaunchRequest,
    Progress,
    RequestRejected,
    RequestStatus,
    WaitTimedOut,
)
from capacity_launcher_client.deployment import STACK_OUTPUTS
from tests.e2e.conftest import E2E_POOL, REPO, E2eCloud, request_id

_README_BLOCK = re.compile(
    r"<!-- tests/e2e/test_producer_client.py runs this block.*?-->\n```python\n(.*?)^```",
    re.MULTILINE | re.DOTALL,
)
README_STACK = "capacity-launcher"


def test_an_unknown_pool_is_refused_before_sending_as_the_cli_refuses_it(
    e2e_cloud: E2eCloud,
) -> None:
    client = LaunchClient(e2e_cloud.deployment)
    request = LaunchRequest(request_id=request_id("nopool"), node_pool="no-such-pool", count=1)

    with pytest.raises(RequestRejected) as refused:
        client.submit(request)

    assert refused.value.code == "UnknownNodePool"
    assert str(refused.value) == "nodePool: no NodePool named 'no-such-pool'"
    assert client.get(request.request_id) is None
    assert e2e_cloud.events.for_request(request.request_id, timeout=5) == []  # never sent


def _stack_with_outputs(e2e_cloud: E2eCloud) -> None:
    """A CloudFormation stack named as the README names it, whose outputs are the local cloud's
    names (the deployed stack's, on AWS)."""
    names = {field: getattr(e2e_cloud.deployment, field) for field in set(STACK_OUTPUTS.values())}
    template = {
        "Resources": {"Placeholder": {"Type": "AWS::SQS::Queue"}},
        "Outputs": {output: {"Value": names[field]} for output, field in STACK_OUTPUTS.items()},
    }
    cloudformation = e2e_cloud.client("cloudformation")
    with contextlib.suppress(cloudformation.exceptions.AlreadyExistsException):
        cloudformation.create_stack(StackName=README_STACK, TemplateBody=json.dumps(template))


def test_the_readmes_snippet_runs_as_written(e2e_cloud: E2eCloud) -> None:
    # Given a stack named as the README names it
    _stack_with_outputs(e2e_cloud)
    (snippet,) = _README_BLOCK.findall((REPO / "README.md").read_text(encoding="utf-8"))
    assert len(snippet.strip().splitlines()) <= 5

    # When the README's block runs as written
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(snippet, "README.md", "exec"), {})

    # Then it printed the request's status and its instance
    status, instances = out.getvalue().split(" ", 1)
    assert status == "Fulfilled"
    assert re.fullmatch(r"\['i-[0-9a-f]+'\]\n", instances)


def test_submit_and_wait_reports_progress_until_the_record_is_final(
    e2e_cloud: E2eCloud,
) -> None:
    client = LaunchClient(e2e_cloud.deployment, poll_seconds=0.1)
    request = LaunchRequest(request_id=request_id("client"), node_pool=E2E_POOL, count=2)
    seen: list[Progress] = []

    record = client.submit_and_wait(request, timeout=60, on_progress=seen.append)

    assert record.status is RequestStatus.FULFILLED
    assert record.launched == 2
    assert seen[-1].record == record
    assert all(p.request_id == request.request_id for p in seen)
    assert [p.elapsed_seconds for p in seen] == sorted(p.elapsed_seconds for p in seen)
    assert client.get(request.request_id) == record
    events = e2e_cloud.events.for_request(request.request_id)
    assert [e["detail-type"] for e in events] == ["Launch Fulfilled"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"count": 0}, "count"),
        ({}, "count"),
        ({"count": 1, "imageId": "ami-0123456789abcdef0"}, "imageId"),
        ({"count": 2, "minCount": 3}, "minCount"),
    ],
)
def test_a_request_the_service_would_reject_is_refused_before_sending(
    e2e_cloud: E2eCloud, body: dict[str, Any], field: str
) -> None:
    client = LaunchClient(e2e_cloud.deployment)
    rid = request_id("refused")

    with pytest.raises(InvalidLaunchRequest) as refused:
        client.submit({"requestId": rid, "nodePool": E2E_POOL, **body})

    assert field in {e.field for e in refused.value.errors}
    assert client.get(rid) is None
    assert e2e_cloud.events.for_request(rid, timeout=1.0) == []


def test_wait_gives_up_after_its_timeout_with_what_it_saw(e2e_cloud: E2eCloud) -> None:
    client = LaunchClient(e2e_cloud.deployment, poll_seconds=0.05)
    seen: list[Progress] = []

    with pytest.raises(WaitTimedOut) as timed_out:
        client.wait(request_id("never-sent"), timeout=0.3, on_progress=seen.append)

    assert timed_out.value.record is None
    assert seen
    assert all(p.record is None for p in seen)


def test_wait_for_capacity_until_is_checked_and_carried(e2e_cloud: E2eCloud) -> None:
    client = LaunchClient(e2e_cloud.deployment)
    past = datetime.now(UTC) - timedelta(minutes=1)
    request = LaunchRequest(request_id=request_id("wait"), node_pool=E2E_POOL, count=1)

    # A deadline that has passed is refused by the service's own rule before it is sent
    with pytest.raises(ValueError, match="waitForCapacityUntil: must be later"):
        client.submit(request, wait_for_capacity_until=past)
    assert client.get(request.request_id) is None

    # A deadline it may wait until is carried in the request; any request may set one (issue
    # 37): e2e's on-demand pool serves it, or it waits for room there (earlier tests may fill it)
    until = datetime.now(UTC) + timedelta(hours=1)
    sent = client.submit(request, wait_for_capacity_until=until, check=False)
    assert sent.wait_for_capacity_until == until
    deadline = time.monotonic() + 60
    record = client.get(sent.request_id)
    while (
        record is None or record.status is RequestStatus.WAITING
    ) and time.monotonic() < deadline:
        time.sleep(2)
        record = client.get(sent.request_id)
    assert record is not None and record.status in (
        RequestStatus.FULFILLED,
        RequestStatus.WAITING,
    ), record
