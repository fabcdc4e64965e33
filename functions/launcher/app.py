"""Launcher: SQS batches of launch requests (or one EventBridge `Launch Requested` event)."""

from __future__ import annotations

from capacity_launcher.startup import lambda_init, snapshot_hooks

with lambda_init() as host:
    from typing import Any

    from aws_lambda_powertools.utilities.typing import LambdaContext

    from capacity_launcher.observability import logger, metrics
    from capacity_launcher.service.launch import Message
    from capacity_launcher.service.wiring import Adapters
    from capacity_launcher.settings import get_settings

    # The container's one composition, on its host's clock, and its one launch batch processor.
    ADAPTERS = Adapters(get_settings(), clock=host.clock, pause=host.pause)
    IDEMPOTENCY = ADAPTERS.idempotency_config()
    BATCH = ADAPTERS.launch_batch(IDEMPOTENCY)
    # SnapStart: prime the clients before the snapshot, reseed after each restore.
    BEFORE_SNAPSHOT, AFTER_RESTORE = snapshot_hooks(ADAPTERS.prime)


@logger.inject_lambda_context(log_event=False)
@metrics.log_metrics(capture_cold_start_metric=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    IDEMPOTENCY.register_lambda_context(context)
    if "Records" in event:
        now = ADAPTERS.clock()
        messages = [Message.from_sqs_record(r, now) for r in event["Records"]]
    else:
        messages = [Message(str(event.get("id", "event")), event, ADAPTERS.clock())]
    failures = BATCH.process(messages, context.get_remaining_time_in_millis)
    return {"batchItemFailures": [{"itemIdentifier": f} for f in failures]}
