"""The service's status events, captured as a test or a demo reads them: an EventBridge rule on the
service's bus sends every event of `source` capacity-launcher to a queue of its own."""

from __future__ import annotations

import json
from typing import Any

from capacity_launcher.domain.records.status import EVENT_SOURCE


def capture_status_events(sqs: Any, events: Any, bus: str, name: str) -> str:
    """Create queue `name` and rule `name` on `bus` sending it the service's events; its URL."""
    url = str(sqs.create_queue(QueueName=name)["QueueUrl"])
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    events.put_rule(
        Name=name, EventBusName=bus, EventPattern=json.dumps({"source": [EVENT_SOURCE]})
    )
    events.put_targets(Rule=name, EventBusName=bus, Targets=[{"Id": "capture", "Arn": arn}])
    return url
