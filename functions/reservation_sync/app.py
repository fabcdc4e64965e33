"""ReservationSync: every minute, reservation snapshots, their events and reconciliation; and, on
EC2's `EC2 Capacity Reservation <State>` event of a future-dated reservation, that one snapshot."""

from __future__ import annotations

from capacity_launcher.startup import lambda_init, snapshot_hooks

with lambda_init() as host:
    from typing import Any

    from aws_lambda_powertools.utilities.typing import LambdaContext

    from capacity_launcher.observability import MetricUnit, logger, metrics
    from capacity_launcher.service.wiring import Adapters
    from capacity_launcher.settings import get_settings

    # The use case, built once per container at init (like the launcher's), on its host's clock.
    ADAPTERS = Adapters(get_settings(), clock=host.clock, pause=host.pause)
    SYNC = ADAPTERS.reservation_sync()
    # SnapStart: prime the clients before the snapshot, reseed after each restore.
    BEFORE_SNAPSHOT, AFTER_RESTORE = snapshot_hooks(ADAPTERS.prime)


# The EventBridge envelope is read as the dict it is: Powertools' data_classes package imports
# every event class it knows, which a cold start would pay for one field.
@logger.inject_lambda_context(log_event=False)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    if event.get("source") == "aws.ec2":
        reservation_id = str(event["detail"]["capacity-reservation-id"])
        refreshed = SYNC.refresh(reservation_id)
        return {
            "detailType": event["detail-type"],
            "reservationId": reservation_id,
            "synced": refreshed.synced,
            "events": [e.detail_type for e in refreshed.events],
        }
    report = SYNC.run()
    if report.failed:
        # Each failed part was logged and counted (SyncPartFailed) where it failed; the minute's
        # other parts ran. Said once more here, so one line tells the run's outcome.
        logger.error("reservation sync finished with failed parts", extra={"failed": report.failed})
        metrics.add_metric(name="SyncRunsWithFailedParts", unit=MetricUnit.Count, value=1)
    reconciliation = report.reconciliation
    return {
        "failedParts": report.failed,
        # An invocation by hand (`sam local invoke` without -e) sends `{}`: a minute all the same.
        "scheduledAt": event.get("time"),
        "synced": len(report.synced),
        "conflicts": report.conflicts,
        "events": [e.detail_type for e in report.events],
        "drift": reconciliation.total_drift if reconciliation else 0,
        "adopted": reconciliation.adopted if reconciliation else [],
        # The requests Waiting as the minute counted them (RequestsWaiting over all).
        "waiting": sum(gauge.waiting for gauge in report.waiting),
    }
