"""Counting what a contender costs, from the outside: launch calls, the offerings each failed on,
and DynamoDB round trips (on the ICE table, and in all), via botocore's event hooks."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from capacity_launcher.domain.aws_errors import ErrorKind, classify


@dataclass
class LaunchCalls:
    calls: int = 0
    failed_calls: int = 0
    launched: int = 0
    # offering key → calls that EC2 refused for lack of capacity there
    refusals: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def note(self, launched: int, refused: list[str], failed: bool) -> None:
        with self._lock:
            self.calls += 1
            self.launched += launched
            self.failed_calls += int(failed)
            self.refusals.update(set(refused))


def is_insufficient_capacity(code: str) -> bool:
    return classify(code) is ErrorKind.INSUFFICIENT_CAPACITY


def watch_create_fleet(ec2: Any, calls: LaunchCalls) -> None:
    """Count every CreateFleet the launcher's shared client sends, and what it was refused
    (a reservation's refusal keyed `template:NAME`: the template names the reservation)."""
    pending = threading.local()

    def remember(params: dict[str, Any], **_: Any) -> None:
        spec = params["LaunchTemplateConfigs"][0]["LaunchTemplateSpecification"]
        pending.template = spec.get("LaunchTemplateName", "")

    def count(parsed: dict[str, Any], **_: Any) -> None:
        launched = sum(len(g.get("InstanceIds", [])) for g in parsed.get("Instances", []))
        refused = []
        for error in parsed.get("Errors", []):
            if not is_insufficient_capacity(error.get("ErrorCode", "")):
                continue
            override = error.get("LaunchTemplateAndOverrides", {}).get("Overrides", {})
            if error.get("ErrorCode") == "ReservationCapacityExceeded":
                refused.append(f"template:{getattr(pending, 'template', '')}")
            else:
                refused.append(
                    f"on-demand:{override.get('InstanceType')}:{override.get('AvailabilityZone')}"
                )
        calls.note(launched, refused, failed=bool(refused) and launched == 0)

    ec2.meta.events.register("provide-client-params.ec2.CreateFleet", remember)
    ec2.meta.events.register("after-call.ec2.CreateFleet", count)


@dataclass
class TableTrips:
    by_table: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __call__(self, params: dict[str, Any], **_: Any) -> None:
        tables = [params["TableName"]] if "TableName" in params else []
        tables += list(params.get("RequestItems", {}))
        tables += [
            op.get("TableName", "")
            for item in params.get("TransactItems", [])
            for op in item.values()
            if isinstance(op, dict)
        ]
        with self._lock:
            self.by_table.update(set(tables))


def watch_dynamodb(dynamodb: Any) -> TableTrips:
    trips = TableTrips()
    dynamodb.meta.events.register("provide-client-params.dynamodb.*", trips)
    return trips
