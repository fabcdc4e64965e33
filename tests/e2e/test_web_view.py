"""The web view (`capacity-launcher web`) in a real browser: Debian's Chromium, driven by Selenium
through Debian's chromedriver, headless, against the e2e local cloud and the view served on a
free loopback port.

Where the browser or Selenium is missing the test is skipped, except when
CAPACITY_LAUNCHER_REQUIRE_BROWSER is set (.ci/run sets it, after installing Chromium): then it
fails, so CI cannot pass without running it. Every wait is explicit and bounded (WebDriverWait
polling the page); nothing sleeps.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import threading
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from capacity_launcher_cli.deployment import LOCAL_FILE_ENV_VAR
from capacity_launcher_cli.web_server import WebServer, start
from capacity_launcher_cli.web_view import Observed, view_json
from tests.e2e.conftest import E2E_POOL, REPO, E2eCloud, apply_text, run_cli
from tests.e2e.test_docs_commands import entry_point

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
REQUIRE_BROWSER = "CAPACITY_LAUNCHER_REQUIRE_BROWSER"
# A closed network and a throwaway profile: nothing reaches out, nothing is kept.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
# The page polls this often; each wait below gives up after WAIT_SECONDS (a launch or a
# termination reaches the view in a second or two).
REFRESH_SECONDS = 0.25
WAIT_SECONDS = 20.0
# A requester is any printable text: the page must show it as text, never run it.
HOSTILE_REQUESTER = '<img src=x onerror="window.injected=1">team-web'


def _browser_missing() -> str | None:
    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.access(path, os.X_OK):
            return f"{path} is not installed (apt-get install chromium chromium-driver)"
    if importlib.util.find_spec("selenium") is None:
        return "selenium is not installed (requirements-dev.txt)"
    return None


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    missing = _browser_missing()
    if missing is not None:
        if os.environ.get(REQUIRE_BROWSER):
            pytest.fail(f"{missing}; {REQUIRE_BROWSER} is set, so the browser test must run")
        pytest.skip(missing)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={tmp_path_factory.mktemp('chromium')}"):
        options.add_argument(flag)
    # The driver is named: Selenium Manager (which would download one) never runs.
    driver = webdriver.Chrome(options=options, service=Service(executable_path=str(CHROMEDRIVER)))
    driver.set_page_load_timeout(WAIT_SECONDS)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def web_view(e2e_cloud: E2eCloud) -> Iterator[WebServer]:
    server = start(e2e_cloud.deployment, "127.0.0.1", 0, REFRESH_SECONDS)
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _pool_document(name: str) -> str:
    return f"""\
apiVersion: capacity-launcher/v1
kind: NodePool
metadata: {{name: {name}}}
spec:
  nodeClassRef: {E2E_POOL}
  limits: {{instances: 2}}
  requirements:
    - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
    - {{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}}
"""


def _wait_for(browser: Any, what: str, seen: Callable[[], str], expected: str) -> None:
    """Poll the page (not the service) until `seen()` is `expected`; fail naming what it was."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.wait import WebDriverWait

    shown: list[str] = []

    def showing(_: Any) -> bool:
        shown.append(seen())
        return shown[-1] == expected

    try:
        WebDriverWait(browser, WAIT_SECONDS, poll_frequency=0.1).until(showing)
    except TimeoutException:
        last = shown[-1] if shown else "nothing"
        pytest.fail(f"the page never showed {what} {expected!r} ({WAIT_SECONDS}s): {last!r}")


def _text(browser: Any, selector: str) -> str:
    """The text of the first element `selector` finds, or '' while there is none."""
    found = browser.execute_script(
        "const e = document.querySelector(arguments[0]); return e ? e.textContent : '';",
        selector,
    )
    return str(found)


def test_the_page_shows_pools_and_requests_and_follows_them_without_reloading(
    e2e_cloud: E2eCloud, web_view: WebServer, browser: Any, tmp_path: Path
) -> None:
    # Given a pool of at most 2 instances, and the web view open on it
    pool = f"web-{uuid.uuid4().hex[:6]}"
    assert apply_text(tmp_path, "pool.yaml", _pool_document(pool)).code == 0
    browser.get(web_view.url)
    usage = f'#pools tr[data-key="{pool}"] [data-resource="instances"]'
    _wait_for(browser, "the pool's usage", lambda: _text(browser, usage), "instances 0 / 2")
    browser.execute_script("window.sameDocument = 'not reloaded';")

    # When a request launches an instance into it
    request = f"web-{uuid.uuid4().hex[:8]}"
    submitted = run_cli(
        "submit", "--request-id", request, "--node-pool", pool, "--count", "1",
        "--requester", HOSTILE_REQUESTER, "--wait",
    )  # fmt: skip
    assert submitted.code == 0, submitted.err
    row = f'#recent tr[data-key="{request}"]'

    # Then the page shows the request Fulfilled and the pool's usage grown, in place
    _wait_for(
        browser, "the status", lambda: _text(browser, f"{row} [data-field=status]"), "Fulfilled"
    )
    _wait_for(browser, "the pool's usage", lambda: _text(browser, usage), "instances 1 / 2")
    # And the requester as the text it is, not as markup
    assert _text(browser, f"{row} [data-field=requester]") == HOSTILE_REQUESTER
    assert browser.execute_script("return document.querySelectorAll('img').length") == 0
    assert browser.execute_script("return window.injected === undefined")

    # When its instance is terminated
    instance = submitted.json()["instances"][0]["instanceId"]
    e2e_cloud.client("ec2").terminate_instances(InstanceIds=[instance])

    # Then the pool's usage falls back, on the same page: it was never reloaded
    _wait_for(browser, "the pool's usage", lambda: _text(browser, usage), "instances 0 / 2")
    assert browser.execute_script("return window.sameDocument") == "not reloaded"
    assert _text(browser, "#state").startswith("live")


def test_a_refresh_that_fails_says_so_keeps_what_was_shown_and_recovers(browser: Any) -> None:
    # Given a view whose reads fail while `failing` holds an error
    failing: list[Exception] = []

    def read() -> dict[str, Any]:
        if failing:
            raise failing[0]
        return view_json(Observed(observed_at=datetime.now(UTC), where="the first view"), 0.25)

    server = WebServer("127.0.0.1", 0, read)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        browser.get(server.url)
        _wait_for(browser, "where it looks", lambda: _text(browser, "#where"), "the first view")

        # When a read fails, the page says so and why, and keeps what it showed
        failing.append(RuntimeError("Could not connect to the endpoint URL"))
        _wait_for(browser, "the state", lambda: _text(browser, "#state"), "stale")
        assert "Could not connect to the endpoint URL" in _text(browser, "#error")
        assert browser.execute_script("return !document.getElementById('error').hidden")
        assert _text(browser, "#where") == "the first view"

        # And once reads succeed again, it is live again, having kept polling
        failing.clear()
        _wait_for(browser, "the state", lambda: _text(browser, "#state"), "live, every 0.25s")
        assert browser.execute_script("return document.getElementById('error').hidden")
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=WAIT_SECONDS)


def test_the_web_command_serves_the_view_until_sigterm(e2e_cloud: E2eCloud) -> None:
    # Given `capacity-launcher web` in its own process, on a free loopback port
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    local_file = os.environ[LOCAL_FILE_ENV_VAR]
    web = subprocess.Popen(
        [*entry_point(), "web", "--port", str(port), "--local-file", local_file],
        cwd=REPO, stderr=subprocess.PIPE, text=True,
        env={k: v for k, v in os.environ.items() if k != "AWS_ENDPOINT_URL"},
    )  # fmt: skip
    try:
        # When it says where it listens (its first line), the view answers there
        assert web.stderr is not None
        assert web.stderr.readline().strip() == (
            f"web view at http://127.0.0.1:{port}/ (Ctrl-C stops it)"
        )
        url = f"http://127.0.0.1:{port}/api/view"
        with urllib.request.urlopen(url, timeout=WAIT_SECONDS) as answer:
            view = json.loads(answer.read())
        assert E2E_POOL in {pool["name"] for pool in view["pools"]}
        assert view["where"] == f"local cloud {e2e_cloud.deployment.endpoint_url}"
    finally:
        # Then SIGTERM stops it, as Ctrl-C does
        web.send_signal(signal.SIGTERM)
        code = web.wait(timeout=WAIT_SECONDS)
    assert code == 0
