"""`capacity-launcher web` without a cloud or a browser: the JSON its page polls, laid out from
one refresh's data, and the server's rules (read-only, loopback hosts only, the page's own
scripts only). The page itself is tested in Chromium: tests/e2e/test_web_view.py."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from capacity_launcher.domain.accounting.pool_usage import Lease
from capacity_launcher.domain.apis.config import NodePool
from capacity_launcher.domain.apis.documents import parse_document
from capacity_launcher.domain.capacity.offerings import UnavailableEntry
from capacity_launcher.domain.capacity.reservations import ReservationSnapshot
from capacity_launcher.domain.quantities import Resources
from capacity_launcher.domain.records.status import (
    AwaitedReservation,
    ErrorDetail,
    RequestRecord,
    RequestStatus,
)
from capacity_launcher_cli.web_server import ViewCache, WebServer, allowed_hosts
from capacity_launcher_cli.web_view import FAILURE_ROWS, RECENT_ROWS, Observed, view_json

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


def _pool(name: str, limits: dict[str, str] | None) -> NodePool:
    spec: dict[str, Any] = {"nodeClassRef": "general"}
    if limits is not None:
        spec["limits"] = limits
    document = parse_document(
        {
            "apiVersion": "capacity-launcher/v1",
            "kind": "NodePool",
            "metadata": {"name": name},
            "spec": spec,
        }
    )
    assert isinstance(document, NodePool)
    return document


def _record(request_id: str, status: RequestStatus, **fields: Any) -> RequestRecord:
    return RequestRecord(
        request_id=request_id,
        node_pool="training",
        requester="ml-team",
        status=status,
        requested=2,
        launched=2 if status is RequestStatus.FULFILLED else 0,
        received_at=NOW - timedelta(minutes=5),
        finished_at=NOW - timedelta(minutes=4),
        **fields,
    )


def _reservation(reservation_id: str, state: str, **fields: Any) -> ReservationSnapshot:
    return ReservationSnapshot(
        reservation_id=reservation_id,
        instance_type="p5.48xlarge",
        zone="us-east-1a",
        state=state,
        total=4,
        available=1,
        **fields,
    )


def _observed() -> Observed:
    return Observed(
        observed_at=NOW,
        where="stack capacity-launcher",
        pools=[
            _pool("training", {"cpu": "64", "memory": "256Gi", "instances": "16"}),
            _pool("open", None),
        ],
        pool_statuses={
            "training": {
                "used": {"cpu": "48", "memory": "64Gi", "instances": "16", "unready": "2"},
                "conditions": [
                    {"type": "Ready", "status": "True", "reason": "NodeClassFound", "message": ""},
                    {
                        "type": "ResourcesSufficient",
                        "status": "False",
                        "reason": "LimitReached",
                        "message": "nothing more launches until instances end: instances 16 of 16",
                    },
                ],
            },
            "open": {"used": {}, "conditions": []},
        },
        leases=[
            Lease(
                "training", "run-9", 3, Resources.ZERO, int(NOW.timestamp()) + 600, requester="ml"
            ),
            Lease("training", "run-8", 1, Resources.ZERO, int(NOW.timestamp()), settled=True),
        ],
        waits=[
            _record(
                "run-7",
                RequestStatus.WAITING,
                wait_for_capacity_until=NOW + timedelta(hours=2),
                waiting_for=[
                    AwaitedReservation(capacity_reservation_id="cr-0future", state="scheduled"),
                    AwaitedReservation(
                        kind="Quota",
                        node_pool="training",
                        quota="ml",
                        resource="instances",
                        needed="2",
                    ),
                ],
            )
        ],
        recent=[
            _record("run-6", RequestStatus.FULFILLED),
            _record(
                "run-5",
                RequestStatus.FAILED,
                errors=[
                    ErrorDetail(code="InsufficientInstanceCapacity", message="none in 1a"),
                    ErrorDetail(code="InsufficientInstanceCapacity", message="none in 1b"),
                ],
            ),
            _record(
                "run-4",
                RequestStatus.REJECTED,
                errors=[ErrorDetail(code="NoOffering", message="no m5 in 1f")],
            ),
        ],
        reservations=[
            _reservation("cr-later", "active", end_date=NOW + timedelta(days=2)),
            _reservation("cr-soon", "active", end_date=NOW + timedelta(minutes=30)),
            _reservation(
                "cr-block",
                "scheduled",
                reservation_type="capacity-block",
                start_date=NOW + timedelta(hours=3),
                end_date=NOW + timedelta(days=1),
            ),
            _reservation("cr-gone", "expired"),
        ],
        dry=[
            UnavailableEntry(
                "od:p5.48xlarge:us-east-1b", "ICE", "none", "t", int(NOW.timestamp()) + 90
            ),
            UnavailableEntry(
                "od:p5.48xlarge:us-east-1a", "ICE", "none", "t", int(NOW.timestamp()) + 30
            ),
        ],
    )


def test_each_pool_shows_its_usage_against_each_limit_and_its_conditions() -> None:
    # Given a pool at its instance limit and another with no limits
    pools = view_json(_observed(), 2.0)["pools"]

    # Then each limited resource has its use, its limit and the fraction of it used
    training = pools[0]
    assert training["name"] == "training"
    assert training["resources"] == [
        {"name": "cpu", "used": "48", "limit": "64", "fraction": 0.75},
        {"name": "memory", "used": "64Gi", "limit": "256Gi", "fraction": 0.25},
        {"name": "instances", "used": "16", "limit": "16", "fraction": 1.0},
    ]
    assert training["unready"] == "2"
    # And the requests launching in it now (open leases only), and why it admits no more
    assert training["inFlight"] == 1
    assert training["sufficient"] == {
        "status": False,
        "reason": "LimitReached",
        "message": "nothing more launches until instances end: instances 16 of 16",
    }
    # And a pool with no limits and nothing used has no rows, and no conditions to show
    assert pools[1]["resources"] == []
    assert pools[1]["ready"] is None


def test_requests_show_launching_waiting_newest_and_failures_with_every_reason() -> None:
    requests = view_json(_observed(), 2.0)["requests"]

    assert requests["counts"] == {"Fulfilled": 1, "Failed": 1, "Rejected": 1}
    assert requests["countedOf"] == 3
    assert [lease["lease"] for lease in requests["launching"]] == ["run-9"]
    assert requests["launching"][0]["leaseEndsIn"] == "10m"
    assert requests["waiting"][0]["requestId"] == "run-7"
    assert requests["waiting"][0]["waitEndsIn"] == "2h00m"
    assert requests["waiting"][0]["finishedAt"] is None
    # what each waits for, in words, whatever its kind (a queue's wait has no reservation id)
    assert [w["named"] for w in requests["waiting"][0]["waitingFor"]] == [
        "cr-0future",
        "quota ml instances (2 more) in training",
    ]
    assert [r["requestId"] for r in requests["recent"]] == ["run-6", "run-5", "run-4"]
    assert [(r["requestId"], r["reasons"]) for r in requests["failures"]] == [
        (
            "run-5",
            [
                {"code": "InsufficientInstanceCapacity", "message": "none in 1a"},
                {"code": "InsufficientInstanceCapacity", "message": "none in 1b"},
            ],
        ),
        ("run-4", [{"code": "NoOffering", "message": "no m5 in 1f"}]),
    ]
    assert requests["failuresOf"] == 2


def test_rows_are_bounded_and_the_rest_counted() -> None:
    many = [
        _record(f"r-{i}", RequestStatus.FAILED, errors=[ErrorDetail(code="X", message="y")])
        for i in range(RECENT_ROWS + 5)
    ]
    observed = Observed(observed_at=NOW, where="here", recent=many)

    requests = view_json(observed, 2.0)["requests"]

    assert len(requests["recent"]) == RECENT_ROWS
    assert len(requests["failures"]) == FAILURE_ROWS
    assert requests["failuresOf"] == len(many)
    assert requests["counts"] == {"Failed": len(many)}


def test_reservations_show_used_free_and_idle_soonest_to_end_first() -> None:
    reservations = view_json(_observed(), 2.0)["reservations"]

    # Active and upcoming ones only, the soonest to end first
    assert [r["id"] for r in reservations] == ["cr-soon", "cr-block", "cr-later"]
    soon, block, _ = reservations
    assert (soon["used"], soon["free"], soon["total"]) == (3, 1, 4)
    # An active reservation's free capacity is idle (billed); a scheduled one bills nothing yet
    assert soon["idle"] == 1
    assert block["idle"] is None
    assert soon["timeLeft"] == "30m"
    assert block["timeLeft"] == "starts in 3h00m"
    assert block["kind"] == "capacity-block"


def test_the_ice_cache_soonest_to_clear_first() -> None:
    entries = view_json(_observed(), 2.0)["iceCache"]

    assert [(e["offering"], e["clearsIn"]) for e in entries] == [
        ("od:p5.48xlarge:us-east-1a", "30s"),
        ("od:p5.48xlarge:us-east-1b", "90s"),
    ]


def test_the_view_is_json_with_when_and_where() -> None:
    view = json.loads(json.dumps(view_json(_observed(), 0.5)))

    assert view["observedAt"] == NOW.isoformat()
    assert view["where"] == "stack capacity-launcher"
    assert view["refreshSeconds"] == 0.5


# -- the server --------------------------------------------------------------------------------


class _Reader:
    def __init__(self) -> None:
        self.reads = 0
        self.error: Exception | None = None

    def __call__(self) -> dict[str, Any]:
        self.reads += 1
        if self.error is not None:
            raise self.error
        return {"where": "<script>alert(1)</script>", "reads": self.reads}


@pytest.fixture
def served() -> Iterator[tuple[WebServer, _Reader]]:
    import threading

    reader = _Reader()
    server = WebServer("127.0.0.1", 0, reader)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server, reader
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _ask(
    server: WebServer, path: str, method: str = "GET", host: str | None = None
) -> tuple[int, dict[str, str], bytes]:
    port = server.server_address[1]
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        headers = {"Host": host} if host is not None else {}
        connection.request(method, path, headers=headers)
        answer = connection.getresponse()
        return answer.status, dict(answer.getheaders()), answer.read()
    finally:
        connection.close()


def test_the_page_its_files_and_the_view_are_served_with_their_types(
    served: tuple[WebServer, _Reader],
) -> None:
    server, _ = served
    for path, content_type, marker in (
        ("/", "text/html", b"/web.js"),
        ("/web.js", "text/javascript", b"textContent"),
        ("/web.css", "text/css", b"table"),
    ):
        status, headers, body = _ask(server, path)
        assert (status, headers["Content-Type"].split(";")[0]) == (200, content_type)
        assert marker in body
        # Only the page's own scripts run, it cannot be framed, and nothing is sniffed
        assert "script-src 'self'" in headers["Content-Security-Policy"]
        assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
        assert headers["X-Content-Type-Options"] == "nosniff"

    status, headers, body = _ask(server, "/api/view?t=1")
    assert (status, headers["Content-Type"]) == (200, "application/json")
    assert json.loads(body)["where"] == "<script>alert(1)</script>"
    assert _ask(server, "/nothing")[0] == 404


def test_the_page_writes_values_as_text_never_as_markup(
    served: tuple[WebServer, _Reader],
) -> None:
    server, _ = served
    script = _ask(server, "/web.js")[2].decode()
    for markup in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert markup not in script


def test_it_only_reads(served: tuple[WebServer, _Reader]) -> None:
    server, reader = served
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        assert _ask(server, "/api/view", method)[0] == 501
    assert reader.reads == 0


def test_on_loopback_it_answers_only_loopback_host_names(
    served: tuple[WebServer, _Reader],
) -> None:
    # A page elsewhere pointing a name of its own at this port (DNS rebinding) is refused
    server, reader = served
    port = server.server_address[1]
    assert _ask(server, "/api/view", host=f"attacker.example:{port}")[0] == 403
    assert _ask(server, "/", host="attacker.example")[0] == 403
    assert reader.reads == 0
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost"):
        assert _ask(server, "/api/view", host=host)[0] == 200


def test_a_view_that_cannot_be_read_is_an_error_the_page_shows(
    served: tuple[WebServer, _Reader],
) -> None:
    server, reader = served
    reader.error = RuntimeError("Could not connect to the endpoint URL")

    status, headers, body = _ask(server, "/api/view")

    assert (status, headers["Content-Type"]) == (502, "application/json")
    assert json.loads(body) == {"error": "RuntimeError: Could not connect to the endpoint URL"}


def test_any_host_name_is_answered_only_off_loopback() -> None:
    assert allowed_hosts("0.0.0.0", 8466) is None
    assert allowed_hosts("10.0.0.5", 8466) is None
    assert allowed_hosts("127.0.0.1", 8466) == allowed_hosts("localhost", 8466)
    assert "[::1]:8466" in (allowed_hosts("::1", 8466) or ())


def test_pages_open_together_share_one_read_per_refresh() -> None:
    reader = _Reader()
    cache = ViewCache(reader, max_age=60.0)
    assert cache() == cache() == {"where": "<script>alert(1)</script>", "reads": 1}
    assert ViewCache(reader, max_age=0.0)()["reads"] == 2
