"""Launcher: SQS batches of launch requests (or one EventBridge `Launch Requested` event)."""

from __future__ import annotations

from capacity_launcher.startup import lambda_init

with lambda_init():
    from datetime import UTC, datetime
    from typing import Any

    from aws_lambda_powertools.utilities.typing import LambdaContext

    from capacity_launcher.observability import logger, metrics
    from capacity_launcher.service.launch import Message
    from capacity_launcher.service.wiring import idempotency_config, launch_batch
    from capacity_launcher.settings import get_settings

    IDEMPOTENCY = idempotency_config(get_settings())
    BATCH = launch_batch(IDEMPOTENCY)


@logger.inject_lambda_context(log_event=False)
@metrics.log_metrics(capture_cold_start_metric=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    IDEMPOTENCY.register_lambda_context(context)
    if "Records" in event:
        messages = [Message.from_sqs_record(r) for r in event["Records"]]
    else:
        messages = [Message(str(event.get("id", "event")), event, datetime.now(UTC))]
    failures = BATCH.process(messages, context.get_remaining_time_in_millis)
    return {"batchItemFailures": [{"itemIdentifier": f} for f in failures]}
