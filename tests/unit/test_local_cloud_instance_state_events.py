"""The local cloud's stand-in for EC2's state-change events: one event per new state."""

from __future__ import annotations

import json
from typing import Any

from local_cloud.instance_state_events import (
    EC2_SOURCE,
    STATE_CHANGE,
    InstanceStateEvents,
)


class _Ec2:
    def __init__(self) -> None:
        self.states: dict[str, str] = {}

    def managed_states(self) -> dict[str, str]:
        return dict(self.states)


class _Bus:
    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []

    def put_events(self, Entries: list[dict[str, Any]]) -> None:
        self.entries += Entries


def test_only_changes_since_the_last_poll_become_events() -> None:
    ec2, bus = _Ec2(), _Bus()
    ec2.states = {"i-1": "running"}
    watcher = InstanceStateEvents(ec2.managed_states, bus, "us-east-1", "123456789012")
    watcher._known = watcher._states()  # the baseline start() takes

    ec2.states = {"i-1": "terminated", "i-2": "running"}
    assert watcher.poll() == 2
    assert watcher.poll() == 0

    by_instance = {json.loads(e["Detail"])["instance-id"]: e for e in bus.entries}
    terminated = by_instance["i-1"]
    assert terminated["Source"] == EC2_SOURCE
    assert terminated["DetailType"] == STATE_CHANGE
    assert terminated["EventBusName"] == "default"
    assert json.loads(terminated["Detail"]) == {"instance-id": "i-1", "state": "terminated"}
    assert terminated["Resources"] == ["arn:aws:ec2:us-east-1:123456789012:instance/i-1"]
