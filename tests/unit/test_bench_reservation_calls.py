"""The reservation-calls benchmark's line under *Why a goal was missed* (docs/BENCHMARKS.md)."""

from __future__ import annotations

from benchmarks.reservation_calls import Point, missed

# A warm request into a group, steady: 10 calls.
STEADY = {
    "BatchGetItem": 1,
    "BatchWriteItem": 1,
    "CreateFleet": 1,
    "DescribeInstances": 1,
    "PutEvents": 1,
    "PutItem": 2,
    "TransactWriteItems": 3,
}


def test_the_miss_line_is_written_only_when_the_goal_is_missed() -> None:
    # Given a group's steady request in 10 calls at 1 and at 1,000 members: no line
    flat = [Point("group", n, dict(STEADY), True) for n in (1, 1000)]
    assert missed(flat) == []
    # When the read grows with the members: the line says the figures
    grown = [
        Point("group", 1, dict(STEADY), True),
        Point("group", 1000, {**STEADY, "BatchGetItem": 11}, True),
    ]
    [line] = missed(grown)
    assert line.startswith("- **Into a reservation in 10 AWS calls**: steady: group 10-20")
