"""Bounded, jittered retries: the client's conflict retries and a handed-back message's wait."""

from __future__ import annotations

import pytest

from capacity_launcher.adapters.aws import _MAX_ATTEMPTS, _retry_conflicts
from capacity_launcher.domain.backoff import (
    HAND_BACK_CAP_SECONDS,
    IN_PROCESS_CAP_SECONDS,
    TRANSIENT_FAULT_SECONDS,
    hand_back_seconds,
    in_process_delay,
)
from tests.support.template import load_template


def _answer(code: str, reasons: list[str] | None = None) -> tuple[None, dict[str, object]]:
    parsed: dict[str, object] = {"Error": {"Code": code, "Message": "m"}}
    if reasons is not None:
        parsed["CancellationReasons"] = [{"Code": r} for r in reasons]
    return None, parsed


def test_a_transaction_cancelled_for_a_conflict_is_retried_with_a_short_wait() -> None:
    delay = _retry_conflicts(
        _answer("TransactionCanceledException", ["None", "TransactionConflict"])
    )
    assert delay is not None and 0 < delay <= IN_PROCESS_CAP_SECONDS


@pytest.mark.parametrize(
    "answer",
    [
        _answer("TransactionCanceledException", ["ConditionalCheckFailed", "None"]),
        _answer("ValidationException"),
        (None, {}),
        None,
    ],
)
def test_anything_else_is_left_to_botocore(answer: object) -> None:
    assert _retry_conflicts(answer) is None


def test_conflict_retries_are_bounded() -> None:
    answer = _answer("TransactionConflictException")
    assert _retry_conflicts(answer, attempts=_MAX_ATTEMPTS - 1) is not None
    assert _retry_conflicts(answer, attempts=_MAX_ATTEMPTS) is None


def test_a_handed_back_message_waits_seconds_growing_with_its_receives() -> None:
    lowest = [hand_back_seconds(n, rng=lambda: 0.0) for n in range(1, 8)]
    highest = [hand_back_seconds(n, rng=lambda: 1.0) for n in range(1, 8)]
    assert lowest == sorted(lowest) and highest == sorted(highest)
    assert lowest[0] >= 1 and highest[-1] == HAND_BACK_CAP_SECONDS
    assert all(lo <= hi for lo, hi in zip(lowest, highest, strict=True))


def test_a_transient_fault_cannot_dead_letter_a_request() -> None:
    # Given the launch queue's redrive policy: dead-lettered on the receive after maxReceiveCount
    queue = load_template()["Resources"]["LaunchQueue"]["Properties"]
    hand_backs = int(queue["RedrivePolicy"]["maxReceiveCount"]) - 1
    # Then even the shortest jittered waits of its hand-backs outlast a transient fault
    shortest = sum(hand_back_seconds(n, rng=lambda: 0.0) for n in range(1, hand_backs + 1))
    assert shortest >= TRANSIENT_FAULT_SECONDS
    # and no wait exceeds the queue's own visibility timeout
    assert int(queue["VisibilityTimeout"]) >= HAND_BACK_CAP_SECONDS


def test_in_process_waits_are_jittered_and_capped() -> None:
    assert in_process_delay(1, rng=lambda: 0.0) < in_process_delay(1, rng=lambda: 1.0)
    assert in_process_delay(50, rng=lambda: 1.0) == IN_PROCESS_CAP_SECONDS
