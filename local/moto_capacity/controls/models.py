"""The in-process control API: finite pools, injected faults, latency, consistency windows, the
clock, GPU reservation outcomes, images, reset and state. `responses` serves the same over HTTP.

The state each control changes lives with what it drives (`core`, `ec2.models`, `dynamodb`);
nothing there imports the controls.
"""

from collections.abc import Mapping

from moto_capacity.core.clock import CLOCK
from moto_capacity.core.locks import SERVICE_LOCKS
from moto_capacity.core.operations import OPERATION_CONTROLS, InjectedFault
from moto_capacity.dynamodb.exceptions import (
    CANCELLED,
    TRANSACT_WRITE,
    parse_cancellation_reasons,
)
from moto_capacity.dynamodb.models.conflicts import TRANSACTION_CONFLICTS
from moto_capacity.ec2.models.backend import (
    CAPACITY_LOCK,
    OFFERING_POOLS,
    CapacityReservationBackend,
    all_capacity_backends,
)
from moto_capacity.ec2.models.capacity_blocks import BLOCK_SETTINGS
from moto_capacity.ec2.models.consistency import CONSISTENCY
from moto_capacity.ec2.models.events import EC2_EVENTS
from moto_capacity.ec2.models.future_dated import FUTURE_DATED_SETTINGS
from moto_capacity.ec2.models.interruptible import reclaim
from moto_capacity.ec2.models.offerings import CAPACITY_TYPES, Offering
from moto_capacity.ec2.models.platforms import forget_registered_images, registered_images
from moto_capacity.ec2.models.platforms import register_image as register_platform_image
from moto_capacity.ec2.models.reservations import END_DATE_SETTINGS
from moto_capacity.ec2.models.retention import RETENTION, forget_departed
from moto_capacity.ec2.models.status_checks import STATUS_CHECKS
from moto_capacity.sqs.models import wake_long_polls

FAULT_SCOPES = ("call", "override")
OVERRIDE_SCOPED = "ec2:CreateFleet"


def _operation(operation: str) -> str:
    service, _, action = operation.partition(":")
    if not service or not action:
        raise ValueError(f"operation must be named service:Operation, got {operation!r}")
    return operation


def set_capacity(
    region: str, instance_type: str, zone: str, capacity_type: str, count: int
) -> None:
    """Make an offering finite: `count` more instances fit; 0 makes it insufficient."""
    if capacity_type not in CAPACITY_TYPES:
        raise ValueError(f"capacity_type must be one of {CAPACITY_TYPES}, got {capacity_type!r}")
    if isinstance(count, bool) or not isinstance(count, int):
        raise ValueError("count must be an integer")
    offering = Offering(region, instance_type, zone, capacity_type)
    with CAPACITY_LOCK:
        OFFERING_POOLS.set(offering, count)


def inject_fault(
    operation: str,
    code: str,
    message: str = "",
    times: int | None = None,
    rate: float | None = None,
    seed: int | None = None,
    cancellation_reasons: list[str] | None = None,
    scope: str = "call",
) -> None:
    """Fail `service:Operation` with `code`: every call, the next `times`, or at a seeded `rate`.

    `cancellation_reasons` (TransactionCanceledException on TransactWriteItems only) are the
    per-item reason codes DynamoDB lists, e.g. ["None", "TransactionConflict"]. `scope`
    "override" (ec2:CreateFleet only) fails single overrides inside the answer's Errors."""
    if not code:
        raise ValueError("code is required")
    if scope not in FAULT_SCOPES:
        raise ValueError(f"scope must be one of {FAULT_SCOPES}, got {scope!r}")
    if scope == "override" and operation != OVERRIDE_SCOPED:
        raise ValueError(f"scope override applies only to {OVERRIDE_SCOPED}")
    reasons = None
    if cancellation_reasons is not None:
        if (operation, code) != (TRANSACT_WRITE, CANCELLED):
            raise ValueError(
                f"cancellationReasons apply only to {TRANSACT_WRITE} with code {CANCELLED}"
            )
        reasons = parse_cancellation_reasons(cancellation_reasons)
    fault = InjectedFault(
        operation=_operation(operation),
        code=code,
        message=message or f"{code} (injected by moto_capacity)",
        times=times,
        rate=rate,
        seed=seed,
        cancellation_reasons=reasons,
        scope=scope,
    )
    OPERATION_CONTROLS.inject_fault(fault)


def set_latency(operation: str, seconds: float) -> None:
    """Delay every call of `service:Operation` by `seconds` (0 removes the delay)."""
    OPERATION_CONTROLS.set_latency(_operation(operation), float(seconds))


def set_consistency(
    instance_visibility_seconds: float | None = None,
    reservation_pending_seconds: float | None = None,
) -> None:
    """Fresh instance ids stay unknown, new reservations `pending`, for these seconds (0: off)."""
    CONSISTENCY.configure(instance_visibility_seconds, reservation_pending_seconds)


def set_status_checks(initializing_seconds: float) -> None:
    """A launched or started instance's status checks report `initializing` for these seconds,
    then `ok` (0: off, `ok` at once)."""
    STATUS_CHECKS.configure(initializing_seconds)


def set_transaction_conflicts(rate: float, seed: int | None = None) -> None:
    """Cancel TransactWriteItems touching an already-touched item with TransactionConflict, at
    a seeded `rate` (0 turns it off)."""
    TRANSACTION_CONFLICTS.configure(rate, seed)


def register_image(
    region: str,
    platform_details: str,
    name: str | None = None,
    account_id: str | None = None,
    architecture: str = "x86_64",
) -> str:
    """A new AMI whose PlatformDetails/UsageOperation say `platform_details`, built for
    `architecture` (x86_64, arm64, …); returns its id."""
    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.ec2.models import ec2_backends

    backend = ec2_backends[account_id or DEFAULT_ACCOUNT_ID][region]
    return str(register_platform_image(backend, platform_details, name, architecture).id)


def instance_states(
    region: str, tags: Mapping[str, str], account_id: str | None = None
) -> dict[str, str]:
    """Each instance carrying every one of `tags`, and its state's name, as the emulator holds
    them: what EC2's state-change events report, read without DescribeInstances (whose answer
    for a few hundred instances takes the better part of a second to write and read back)."""
    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.ec2.models import ec2_backends

    wanted = set(tags.items())
    with SERVICE_LOCKS["ec2"]:  # one request at a time: moto's backends are not thread-safe
        backend = ec2_backends[account_id or DEFAULT_ACCOUNT_ID][region]
        return {
            str(instance.id): str(instance.state)
            for reservation in list(backend.reservations.values())
            for instance in reservation.instances
            if wanted <= set(backend.tags.get(instance.id, {}).items())
        }


def advance_clock(seconds: float) -> None:
    """Move the emulator's time forward, and apply every transition now due: consistency
    windows, pending periods, assessments, payments, start and end dates, block endings and
    interruption notices (with the EC2 events each one sends); SQS long polls waiting meanwhile
    look again at once (a message the move made visible answers them)."""
    CLOCK.advance(seconds)
    with CAPACITY_LOCK:
        for backend in all_capacity_backends():
            backend.expire_due_reservations()
    forget_departed()
    wake_long_polls()


def set_launch_template_quota(quota: int) -> None:
    """How many launch templates a Region holds before CreateLaunchTemplate answers
    ResourceLimitExceeded (EC2's default quota is 5,000)."""
    RETENTION.set_launch_template_quota(quota)


def set_termination_scope(tag_key: str | None, tag_value: str | None = None) -> None:
    """Answer TerminateInstances as a policy allowing it only on instances tagged
    `tag_key`=`tag_value` would: UnauthorizedOperation when one id lacks the tag, or is gone.
    `None` turns it off."""
    RETENTION.set_termination_scope(tag_key, tag_value)


def set_lifecycle(
    assessment_seconds: float | None = None,
    payment_pending_seconds: float | None = None,
    end_date_lag_seconds: float | None = None,
) -> None:
    """How long future-dated requests stay `assessing`, and purchased Capacity Blocks
    `payment-pending`, on the emulator's clock (defaults 3600 and 30), and how long after its
    end date a reservation ends (by default within the hour, drawn from its id)."""
    for name, value in (
        ("assessmentSeconds", assessment_seconds),
        ("paymentPendingSeconds", payment_pending_seconds),
        ("endDateLagSeconds", end_date_lag_seconds),
    ):
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int | float) or value < 0
        ):
            raise ValueError(f"{name} must be a number of seconds >= 0")
    if assessment_seconds is not None:
        FUTURE_DATED_SETTINGS.assessment_seconds = float(assessment_seconds)
    if payment_pending_seconds is not None:
        BLOCK_SETTINGS.payment_pending_seconds = float(payment_pending_seconds)
    if end_date_lag_seconds is not None:
        if end_date_lag_seconds >= 3600:
            raise ValueError("endDateLagSeconds must be < 3600: EC2 ends it within the hour")
        END_DATE_SETTINGS.lag_seconds = float(end_date_lag_seconds)


def _backend_holding(reservation_id: str) -> CapacityReservationBackend:
    for backend in all_capacity_backends():
        if reservation_id in backend.reservations:
            return backend
    raise ValueError(f"no Capacity Reservation {reservation_id!r}")


def set_reservation_state(reservation_id: str, state: str) -> None:
    """Force an outcome the clock cannot produce: a future-dated request `delayed` or
    `unsupported`, a delayed one delivered (`active`), a block purchase `payment-failed`."""
    _backend_holding(reservation_id).force_state(reservation_id, state)


def interrupt(reservation_id: str, instance_count: int) -> None:
    """The owner reclaims `instance_count` instances of an interruptible reservation: those
    beyond its new size get the 2-minute interruption warning, then are terminated."""
    reclaim(_backend_holding(reservation_id), reservation_id, instance_count)


def reset() -> None:
    """Forget pools, faults, latencies, counters, consistency and status-check windows and the
    clock's offset (moto's own state is untouched)."""
    with CAPACITY_LOCK:
        OFFERING_POOLS.clear()
    OPERATION_CONTROLS.reset()
    CONSISTENCY.reset()
    STATUS_CHECKS.reset()
    CLOCK.reset()
    FUTURE_DATED_SETTINGS.reset()
    BLOCK_SETTINGS.reset()
    END_DATE_SETTINGS.reset()
    EC2_EVENTS.reset()
    TRANSACTION_CONFLICTS.reset()
    RETENTION.reset()
    forget_registered_images()


def state() -> dict[str, object]:
    """Pools, faults, latencies, per-operation counters and every reservation, as JSON data."""
    with CAPACITY_LOCK:
        reservations: list[dict[str, object]] = []
        for backend in all_capacity_backends():
            backend.expire_due_reservations()
            reservations.extend(r.summary() for r in backend.reservations.values())
        answer: dict[str, object] = {"pools": OFFERING_POOLS.snapshot()}
    answer.update(OPERATION_CONTROLS.snapshot())
    answer["reservations"] = reservations
    answer["consistency"] = CONSISTENCY.snapshot()
    answer["statusChecks"] = STATUS_CHECKS.snapshot()
    answer["clock"] = CLOCK.snapshot()
    answer["transactionConflicts"] = TRANSACTION_CONFLICTS.snapshot()
    answer["images"] = registered_images()
    answer["lifecycle"] = {
        "assessmentSeconds": FUTURE_DATED_SETTINGS.assessment_seconds,
        "paymentPendingSeconds": BLOCK_SETTINGS.payment_pending_seconds,
        "endDateLagSeconds": END_DATE_SETTINGS.lag_seconds,
    }
    answer["ec2Events"] = EC2_EVENTS.snapshot()
    answer["retention"] = RETENTION.snapshot()
    return answer
