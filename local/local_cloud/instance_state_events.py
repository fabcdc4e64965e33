"""moto emits no EC2 events, so the local cloud watches our instances and puts on the default bus
the `EC2 Instance State-change Notification` AWS would send when one changes state. It reads
their states from the emulator itself (moto_capacity.instance_states), as EC2 knows them when it
sends its events: a DescribeInstances a second cost a core's tenth with 50 instances, and most
of one with 200."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import moto_capacity
from capacity_launcher.domain.records.tags import MANAGED

STATE_CHANGE = "EC2 Instance State-change Notification"
EC2_SOURCE = "aws.ec2"
POLL_SECONDS = 1.0


def managed_instance_states(region: str, account_id: str) -> Callable[[], dict[str, str]]:
    """The states of the instances the service launched (tagged managed), in the emulator."""
    return lambda: moto_capacity.instance_states(region, {MANAGED: "true"}, account_id)


class InstanceStateEvents:
    """Polls the managed instances' states (`states`); each new state becomes one event."""

    def __init__(
        self, states: Callable[[], dict[str, str]], events: Any, region: str, account_id: str
    ) -> None:
        self._states = states
        self._events = events
        self._region = region
        self._account_id = account_id
        self._known: dict[str, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ec2-state-events", daemon=True)

    def start(self) -> None:
        self._known = self._states()  # what exists at start is not news
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.wait(POLL_SECONDS):
            try:
                self.poll()
            except Exception as error:  # keep watching, as EventBridge keeps delivering
                print(f"[ec2-state-events] poll failed: {error!r}")

    def poll(self) -> int:
        """Publish the changes since the last poll; returns how many."""
        current = self._states()
        changed = {i: s for i, s in current.items() if self._known.get(i) != s}
        self._known = current
        entries = [self._entry(instance_id, state) for instance_id, state in changed.items()]
        for start in range(0, len(entries), 10):
            self._events.put_events(Entries=entries[start : start + 10])
        return len(entries)

    def _entry(self, instance_id: str, state: str) -> dict[str, Any]:
        arn = f"arn:aws:ec2:{self._region}:{self._account_id}:instance/{instance_id}"
        return {
            "Source": EC2_SOURCE,
            "DetailType": STATE_CHANGE,
            "Detail": json.dumps({"instance-id": instance_id, "state": state}),
            "Resources": [arn],
            "EventBusName": "default",
            "Time": datetime.now(UTC),
        }
