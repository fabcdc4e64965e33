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

    def get_paginator(self, name: str) -> _Ec2:
        assert name == "describe_instances"
        return self

    def paginate(self, Filters: list[dict[str, Any]]) -> list[dict[str, Any]]:
        assert Filters == [{"Name": "tag:capacity-launcher:managed", "Values": ["true"]}]
        instances = [{"InstanceId": i, "State": {"Name": s}} for i, s in self.states.items()]
        return [{"Reservations": [{"Instances": instances}]}]


class _Bus:
    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []

    def put_events(self, Entries: list[dict[str, Any]]) -> None:
        self.entries += Entries


def test_only_changes_since_the_last_poll_become_events() -> None:
    ec2, bus = _Ec2(), _Bus()
    ec2.states = {"i-1": "running"}
    watcher = InstanceStateEvents(ec2, bus, "us-east-1", "123456789012")
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
