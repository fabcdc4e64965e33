"""InstanceEvents: EC2 state changes and reservation interruption warnings from the default bus."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.data_classes import EventBridgeEvent, event_source
from aws_lambda_powertools.utilities.typing import LambdaContext

from capacity_launcher.observability import logger, metrics
from capacity_launcher.service.wiring import instance_events


@logger.inject_lambda_context(log_event=False)
@metrics.log_metrics
@event_source(data_class=EventBridgeEvent)
def handler(event: EventBridgeEvent, context: LambdaContext) -> dict[str, Any]:
    outcome = instance_events().handle(event.detail_type, event.detail)
    return {
        "action": outcome.action,
        "instanceId": outcome.instance_id,
        "capacityReservationId": outcome.capacity_reservation_id,
    }
