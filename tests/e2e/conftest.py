"""One local cloud for the e2e suite (one per pytest-xdist worker that runs e2e tests), started
in-process on a free loopback port, with the examples applied and every status event captured by
an EventBridge rule into a queue."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import moto_capacity
from capacity_launcher_cli.deployment import LOCAL_FILE_ENV_VAR, Deployment, write_local
from capacity_launcher_cli.main import main
from local_cloud import function_output
from local_cloud.cloud import LocalCloud, LocalCloudOptions
from local_cloud.status_events import capture_status_events
from tests.support.event_registry import check_registered
from tests.support.retries import retries_without_sleeping

REPO = Path(__file__).resolve().parents[2]
# Failed messages come back after 2 s instead of the template's 720 s.
VISIBILITY_TIMEOUT_SECONDS = 2
WAIT_SECONDS = 60.0
# The tests' own pool: the examples' limits stay for the documented commands.
E2E_POOL = "e2e"
_E2E_POOL_DOCUMENT = f"""\
apiVersion: capacity-launcher/v1
kind: NodeClass
metadata: {{name: {E2E_POOL}}}
spec:
  imageSsmParameter: /aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-x86_64
  subnetSelectorTerms: [{{tags: {{tier: private}}}}]
  securityGroupIds: [sg-0a1b2c3d4e5f67890]
---
apiVersion: capacity-launcher/v1
kind: NodePool
metadata: {{name: {E2E_POOL}}}
spec:
  nodeClassRef: {E2E_POOL}
  requirements:
    - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
    - {{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}}
"""


@dataclass(frozen=True)
class CliResult:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


@dataclass
class StatusEvents:
    """Status events from the bus, collected from the capturing queue and kept by requestId."""

    sqs: Any
    queue_url: str
    seen: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def for_request(
        self, request_id: str, detail_type: str | None = None, timeout: float = WAIT_SECONDS
    ) -> list[dict[str, Any]]:
        """The request's events so far, once at least one (of `detail_type`, if named) came."""

        def arrived() -> bool:
            return any(
                detail_type in (None, e["detail-type"]) for e in self.seen.get(request_id, [])
            )

        deadline = time.monotonic() + timeout
        while not arrived() and time.monotonic() < deadline:
            # A long poll: answered as soon as an event arrives, not at the next short poll.
            response = self.sqs.receive_message(
                QueueUrl=self.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1
            )
            for message in response.get("Messages", []):
                event = json.loads(message["Body"])
                check_registered(event)  # as the stack's schema registry publishes it
                detail_id = event.get("detail", {}).get("requestId", "")
                self.seen.setdefault(detail_id, []).append(event)
                self.sqs.delete_message(
                    QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"]
                )
        return self.seen.get(request_id, [])


@dataclass
class E2eCloud:
    cloud: LocalCloud
    deployment: Deployment
    events: StatusEvents

    def client(self, service: str) -> Any:
        return self.deployment.client(service)


def run_cli(*argv: str, stdin: str = "") -> CliResult:
    """`capacity-launcher ARGV` in this process, `stdin` on its standard input; the functions'
    own output stays out of it."""
    out, err = io.StringIO(), io.StringIO()
    with (
        function_output.host_output(out),
        contextlib.redirect_stderr(err),
        _standard_input(stdin),
    ):
        code = main(list(argv))
    return CliResult(code, out.getvalue(), err.getvalue())


@contextlib.contextmanager
def _standard_input(text: str) -> Iterator[None]:
    saved = sys.stdin
    sys.stdin = io.StringIO(text)
    try:
        yield
    finally:
        sys.stdin = saved


def request_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def apply_text(tmp_path: Path, name: str, text: str) -> CliResult:
    """`apply -f` of documents written to a file of that name."""
    path = tmp_path / name
    path.write_text(text)
    return run_cli("apply", "-f", str(path))


def submit_through_queue(tmp_path: Path, body: dict[str, Any]) -> dict[str, Any]:
    """Send one launch request (given a fresh requestId) to the queue from a file, wait for its
    record and return it."""
    body = {"requestId": request_id(str(body.get("nodePool", "request"))), **body}
    path = tmp_path / f"{body['requestId']}.json"
    path.write_text(json.dumps(body))
    record: dict[str, Any] = run_cli("submit", "-f", str(path), "--via", "queue", "--wait").json()
    return record


@pytest.fixture(scope="package", autouse=True)
def _bytecode_compiled_once(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """The e2e tests start the CLI, `local up` and the demo in processes of their own, each
    importing the whole stack. Where the environment says not to write bytecode
    (PYTHONDONTWRITEBYTECODE) each would compile the project from source again, a quarter of a
    second of CPU a command: they share one cache of it outside the project instead
    (PYTHONPYCACHEPREFIX). A prefix holds every module's bytecode, the standard library's and
    the installed packages' too (their own __pycache__ is not read under it): made afresh for
    each run, the run's first processes compiled them all again (2.5 s of CPU for `local up`'s
    imports). So it is kept across runs, beside pytest's numbered folders, which pytest prunes
    and this it leaves (a run given --basetemp keeps its own): Python checks each cached file
    against its source's size and time, as in __pycache__, and compiles a changed one again.
    What runs is the same."""
    root = tmp_path_factory.getbasetemp()
    if hasattr(request.config, "workerinput"):  # pytest-xdist's workers share the run's folder
        root = root.parent
    if root.parent.name.startswith("pytest-of-"):  # pytest's own folder, above its runs
        root = root.parent
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
        patch.setenv("PYTHONPYCACHEPREFIX", str(root / "capacity-launcher-pycache"))
        yield


# Package scope: torn down before other folders' tests, which share moto's global backends.
@pytest.fixture(scope="package")
def e2e_cloud(tmp_path_factory: pytest.TempPathFactory) -> Iterator[E2eCloud]:
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    folder = tmp_path_factory.mktemp("local-cloud")
    with (folder / "functions.log").open("w", encoding="utf-8") as logs:
        cloud = LocalCloud(
            LocalCloudOptions(
                port=0,
                schedules=False,
                visibility_timeout_seconds=VISIBILITY_TIMEOUT_SECONDS,
                function_logs=logs,
            )
        )
        deployment = cloud.start()
        local_file = write_local(deployment, folder / "local.json")
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(LOCAL_FILE_ENV_VAR, str(local_file))
            events = _capture_status_events(deployment)
            assert run_cli("apply", "-f", str(REPO / "examples")).code == 0
            (folder / "e2e-pool.yaml").write_text(_E2E_POOL_DOCUMENT)
            assert run_cli("apply", "-f", str(folder / "e2e-pool.yaml")).code == 0
            try:
                yield E2eCloud(cloud, deployment, events)
            finally:
                cloud.stop()


def _capture_status_events(deployment: Deployment) -> StatusEvents:
    sqs = deployment.client("sqs")
    url = capture_status_events(
        sqs, deployment.client("events"), deployment.event_bus, "e2e-status-events"
    )
    return StatusEvents(sqs, url)


@pytest.fixture
def faults() -> Iterator[Any]:
    """moto_capacity's controls, cleared after the test; while it runs, botocore retries each
    faulted call as configured without sleeping its back-off (tests/support/retries.py)."""
    with retries_without_sleeping():
        yield moto_capacity
    moto_capacity.reset()
