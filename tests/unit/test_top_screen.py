"""`capacity-launcher top`'s screen, laid out from one refresh's data: every section an operator
reads, within a 100-column terminal, with nothing cut silently."""

from __future__ import annotations

import argparse
import io
import re
from datetime import UTC, datetime, timedelta

import pytest
from rich.console import Console

from capacity_launcher.domain.accounting.pool_usage import Lease
from capacity_launcher.domain.apis.config import NodePool
from capacity_launcher.domain.apis.documents import parse_document
from capacity_launcher.domain.capacity.offerings import UnavailableEntry
from capacity_launcher.domain.capacity.reservations import ReservationSnapshot
from capacity_launcher.domain.quantities import Resources
from capacity_launcher.domain.records.status import RequestRecord, RequestStatus
from capacity_launcher_cli import top as top_command
from capacity_launcher_cli.top import SECTION_ROWS, QueueDepth, TopView, duration, screen
from capacity_launcher_client.deployment import Deployment

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
DEPLOYMENT = Deployment(
    region="us-east-1",
    event_bus="bus",
    launch_queue_url="https://sqs/launch",
    dead_letter_queue_url="https://sqs/dead",
    state_table="state",
    unavailable_offerings_table="ice",
    idempotency_table="idempotency",
    ice_ttl_seconds=180,
    limit_lease_seconds=60,
)


def _pool() -> NodePool:
    document = parse_document(
        {
            "apiVersion": "capacity-launcher/v1",
            "kind": "NodePool",
            "metadata": {"name": "training"},
            "spec": {"nodeClassRef": "gpu", "limits": {"cpu": "64", "instances": "16"}},
        }
    )
    assert isinstance(document, NodePool)
    return document


def _view(**changes: object) -> TopView:
    fields: dict[str, object] = {
        "observed_at": NOW,
        "where": "stack capacity-launcher",
        "queue": QueueDepth(
            visible=7, in_flight=2, delayed=1, dead_letters=3, oldest_age_seconds=754
        ),
        "leases": [
            Lease(
                "training",
                "train-run-42",
                4,
                Resources.ZERO,
                int(NOW.timestamp()) + 600,
                requester="ml-team",
            ),
        ],
        "records": [
            RequestRecord(
                request_id="gpu-run-7",
                node_pool="training",
                requester="ml-team",
                status=RequestStatus.WAITING,
                requested=2,
                launched=0,
                received_at=NOW - timedelta(minutes=5),
                finished_at=NOW,
                wait_for_capacity_until=NOW + timedelta(hours=2),
            )
        ],
        "pools": [_pool()],
        "pool_statuses": {
            "training": {
                "used": {"cpu": "60", "instances": "15"},
                "conditions": [
                    {"type": "ResourcesSufficient", "status": "False", "reason": "LimitReached"}
                ],
            }
        },
        "quotas": [
            {
                "metadata": {"name": "ml-team"},
                "status": {
                    "capacity": [
                        {"name": "training", "resources": [{"name": "cpu", "total": "32"}]}
                    ],
                    "usage": [{"name": "training", "resources": [{"name": "cpu", "total": "40"}]}],
                    "borrowed": [
                        {"name": "training", "resources": [{"name": "cpu", "total": "8"}]}
                    ],
                },
            }
        ],
        "reservations": [
            ReservationSnapshot(
                "cr-0block0000000001",
                "p5.48xlarge",
                "us-east-1a",
                "active",
                2,
                0,
                reservation_type="capacity-block",
                end_date=NOW + timedelta(minutes=45),
            ),
            ReservationSnapshot(
                "cr-0odcr00000000002",
                "m5.xlarge",
                "us-east-1b",
                "scheduled",
                4,
                4,
                start_date=NOW + timedelta(hours=3, minutes=5),
            ),
            ReservationSnapshot("cr-0gone0000000003", "m5.large", "us-east-1a", "expired", 1, 0),
        ],
        "dry": [
            UnavailableEntry(
                "spot:m5.large:us-east-1a",
                "InsufficientInstanceCapacity",
                "",
                "2026-11-26T11:59:00Z",
                int(NOW.timestamp()) + 150,
            ),
        ],
    }
    fields.update(changes)
    return TopView(**fields)  # type: ignore[arg-type]


def _render(view: TopView, width: int = 100) -> str:
    out = io.StringIO()
    Console(file=out, width=width, color_system=None).print(screen(view, interval=2))
    return out.getvalue()


def test_every_section_shows_what_an_operator_acts_on() -> None:
    text = _render(_view())
    # The queue: depth, oldest message, dead letters
    assert "7 waiting, 2 being served, 1 delayed; oldest 12m" in text
    assert "Dead letters 3" in text
    # Requests in flight: the one launching (its lease) and the one waiting, with time left
    assert "Requests in flight: 1 launching, 1 waiting" in text
    assert "train-run-42" in text and "Launching" in text and "lease 10m" in text
    assert "gpu-run-7" in text and "Waiting" in text and "wait 2h00m" in text
    # Waiting by team: how many and the oldest wait
    assert "Waiting by team: 1 waiting, oldest 5m" in text
    assert re.search(r"ml-team +1 +5m", text), text
    # The pool against its limits, and why it admits nothing more
    assert "cpu 60/64, instances 15/16" in text
    assert "False (LimitReached)" in text
    # The quota against its nominal, borrowing
    assert "40/32" in text
    # The block ends first, with its time left; the scheduled ODCR says when it starts
    assert text.index("cr-0block0000000001") < text.index("cr-0odcr00000000002")
    assert "45m" in text and "starts in 3h05m" in text
    assert "capacity-block" in text
    # An expired reservation is not shown
    assert "cr-0gone0000000003" not in text
    # A dry offering and when it clears
    assert "spot:m5.large:us-east-1a" in text and "2m" in text
    assert "every 2s (Ctrl-C quits)" in text


def test_the_screen_fits_a_100_column_terminal() -> None:
    text = _render(_view(), width=100)
    assert max(len(line) for line in text.splitlines()) <= 100


def test_redirected_output_is_not_padded_to_the_console_width(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`top --once > file` (or `| grep`) renders on a 200-column console: each line is as long
    as its text, not padded with blanks to column 200 (every section's line was)."""
    monkeypatch.setattr(top_command, "gather", lambda _deployment: _view())

    assert top_command.top(argparse.Namespace(once=True), DEPLOYMENT) == 0

    text = capsys.readouterr().out
    assert "Requests in flight: 1 launching, 1 waiting" in text
    assert [line for line in text.splitlines() if line != line.rstrip()] == []


def test_rows_beyond_a_section_are_counted_not_dropped_silently() -> None:
    entries = [
        UnavailableEntry(f"on-demand:m5.large:zone-{i}", "InsufficientInstanceCapacity", "",
                         "2026-11-26T11:59:00Z", int(NOW.timestamp()) + 60 + i)
        for i in range(SECTION_ROWS + 3)
    ]  # fmt: skip
    text = _render(_view(dry=entries))
    assert "… 3 more" in text
    assert f"zone-{SECTION_ROWS + 2}" not in text


def test_without_a_cloudwatch_datapoint_the_oldest_age_says_so() -> None:
    queue = QueueDepth(visible=0, in_flight=0, delayed=0, dead_letters=0, oldest_age_seconds=None)
    assert "oldest n/a" in _render(_view(queue=queue))


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(None, "-"), (-5, "0s"), (59, "59s"), (119, "119s"), (754, "12m"), (11100, "3h05m"),
     (190000, "2d04h")],
)  # fmt: skip
def test_durations_are_short_and_exact_enough(seconds: float | None, shown: str) -> None:
    assert duration(seconds) == shown


def test_an_empty_section_says_none() -> None:
    text = _render(_view(dry=[], quotas=[]))
    dry = text.split("Dry offerings (ICE cache)", 1)[1]
    assert "none" in dry
    quotas = text.split("CapacityQuotas", 1)[1].split("Reservations", 1)[0]
    assert "none" in quotas
