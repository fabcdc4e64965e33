"""InstanceEvents: EC2 state changes and reservation interruption warnings from the default bus."""

from __future__ import annotations

from capacity_launcher.startup import lambda_init, snapshot_hooks

with lambda_init() as host:
    from typing import Any

    from aws_lambda_powertools.utilities.typing import LambdaContext

    from capacity_launcher.observability import logger, metrics
    from capacity_launcher.service.wiring import Adapters
    from capacity_launcher.settings import get_settings

    # The use case, built once per container at init (like the launcher's), on its host's clock.
    ADAPTERS = Adapters(get_settings(), clock=host.clock, pause=host.pause)
    EVENTS = ADAPTERS.instance_events()
    # SnapStart: prime the clients before the snapshot, reseed after each restore.
    BEFORE_SNAPSHOT, AFTER_RESTORE = snapshot_hooks(ADAPTERS.prime)


# The EventBridge envelope is read as the dict it is: Powertools' data_classes package imports
# every event class it knows, which a cold start would pay for one field.
@logger.inject_lambda_context(log_event=False)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    # Not an EC2 event (`sam local invoke` without -e sends `{}`): logged and ignored, as any
    # detail-type the rules do not route here is.
    outcome = EVENTS.handle(
        str(event.get("detail-type", "")), event.get("detail") or {}, event.get("time")
    )
    return {
        "action": outcome.action,
        "instanceId": outcome.instance_id,
        "capacityReservationId": outcome.capacity_reservation_id,
    }
