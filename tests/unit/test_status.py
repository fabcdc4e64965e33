"""The request record, the status detail-types and the other event names."""

import json
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest
from pydantic import ValidationError

from capacity_launcher.domain.errors import LaunchFailed, RequestRejected
from capacity_launcher.domain.records.status import (
    ALL_DETAIL_TYPES,
    BLOCK_EVACUATING,
    BLOCK_EXPIRING,
    BLOCK_EXTENSION_PURCHASED,
    DETAIL_TYPES,
    EVENT_SOURCE,
    INSTANCE_TERMINATED,
    LAUNCH_REQUESTED,
    RECLAIM_CLOSED,
    RECLAIM_REQUESTED,
    RESERVATION_ACTIVATED,
    RESERVATION_EXHAUSTED,
    RESERVATION_EXPIRED,
    RESERVATION_EXPIRING,
    RESERVATION_REPLENISHED,
    RESERVATION_UNDERUTILIZED,
    RESERVATION_UTILIZATION_HIGH,
    AwaitedReservation,
    ErrorDetail,
    LaunchedInstance,
    RequestRecord,
    RequestStatus,
    UnavailableOffering,
    format_timestamp,
    status_for,
)

RECEIVED = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
FINISHED = RECEIVED + timedelta(seconds=2)


def record(**changes: Any) -> RequestRecord:
    fields: dict[str, Any] = {
        "request_id": "train-run-42",
        "node_pool": "gpu-training",
        "requester": "team-a",
        "status": RequestStatus.PARTIALLY_FULFILLED,
        "requested": 4,
        "launched": 1,
        "instances": [
            LaunchedInstance(
                instance_id="i-0123456789abcdef0",
                instance_type="p5.48xlarge",
                zone="us-east-1a",
                capacity_type="reserved",
                capacity_reservation_id="cr-0123456789abcdef0",
            )
        ],
        "unavailable_offerings": [
            UnavailableOffering(
                instance_type="p5.48xlarge",
                zone="us-east-1b",
                capacity_type="on-demand",
                reason="InsufficientInstanceCapacity",
            )
        ],
        "errors": [ErrorDetail(code="InsufficientInstanceCapacity", message="no capacity")],
        "received_at": RECEIVED,
        "finished_at": FINISHED,
    }
    return RequestRecord(**(fields | changes))


def test_event_names_are_designs() -> None:
    assert EVENT_SOURCE == "capacity-launcher"
    assert LAUNCH_REQUESTED == "Launch Requested"
    assert DETAIL_TYPES == {
        RequestStatus.FULFILLED: "Launch Fulfilled",
        RequestStatus.PARTIALLY_FULFILLED: "Launch Partially Fulfilled",
        RequestStatus.FAILED: "Launch Failed",
        RequestStatus.REJECTED: "Launch Rejected",
        RequestStatus.WAITING: "Launch Waiting",
    }
    assert RESERVATION_EXHAUSTED == "Capacity Reservation Exhausted"
    assert RESERVATION_REPLENISHED == "Capacity Reservation Replenished"
    assert RESERVATION_UTILIZATION_HIGH == "Capacity Reservation Utilization High"
    assert RESERVATION_EXPIRING == "Capacity Reservation Expiring"
    assert INSTANCE_TERMINATED == "Instance Terminated"
    assert RESERVATION_ACTIVATED == "Capacity Reservation Activated"
    assert BLOCK_EXPIRING == "Capacity Block Expiring"
    assert RESERVATION_EXPIRED == "Capacity Reservation Expired"
    assert RECLAIM_REQUESTED == "Capacity Reclaim Requested"
    assert RECLAIM_CLOSED == "Capacity Reclaim Closed"
    assert RESERVATION_UNDERUTILIZED == "Capacity Reservation Underutilized"
    assert BLOCK_EVACUATING == "Capacity Block Evacuating"
    assert BLOCK_EXTENSION_PURCHASED == "Capacity Block Extension Purchased"
    assert len(set(ALL_DETAIL_TYPES)) == 18


def test_statuses_spell_like_the_contract() -> None:
    assert [str(s) for s in RequestStatus] == [
        "Fulfilled",
        "PartiallyFulfilled",
        "Failed",
        "Rejected",
        "Waiting",
    ]


@pytest.mark.parametrize(
    ("requested", "launched", "min_count", "status"),
    [
        (4, 4, 4, RequestStatus.FULFILLED),
        (4, 4, 1, RequestStatus.FULFILLED),
        (4, 3, 1, RequestStatus.PARTIALLY_FULFILLED),
        (4, 3, 3, RequestStatus.PARTIALLY_FULFILLED),
        (4, 3, 4, RequestStatus.FAILED),
        (4, 0, 1, RequestStatus.FAILED),
        (1, 0, 1, RequestStatus.FAILED),
        (4, 0, 0, RequestStatus.FAILED),
    ],
)
def test_status_for(requested: int, launched: int, min_count: int, status: RequestStatus) -> None:
    assert status_for(requested, launched, min_count) is status


def test_detail_has_exactly_designs_keys_in_order() -> None:
    detail = record().to_detail()

    assert list(detail) == [
        "requestId",
        "nodePool",
        "requester",
        "status",
        "requested",
        "launched",
        "instances",
        "unavailableOfferings",
        "errors",
        "receivedAt",
        "finishedAt",
        "waitForCapacityUntil",
        "waitingFor",
        "detailTruncated",
        "candidatesLeftOut",  # additive (issue 27): null unless a fleet's offer was cut
    ]
    assert detail["waitForCapacityUntil"] is None and detail["waitingFor"] == []
    assert detail["detailTruncated"] is None and detail["candidatesLeftOut"] is None
    assert detail["instances"] == [
        {
            "instanceId": "i-0123456789abcdef0",
            "instanceType": "p5.48xlarge",
            "zone": "us-east-1a",
            "capacityType": "reserved",
            "capacityReservationId": "cr-0123456789abcdef0",
            "capacityReservationType": None,
            "capacityReservationStartDate": None,
            "capacityReservationEndDate": None,
        }
    ]
    assert detail["unavailableOfferings"] == [
        {
            "instanceType": "p5.48xlarge",
            "zone": "us-east-1b",
            "capacityType": "on-demand",
            "capacityReservationId": None,
            "reason": "InsufficientInstanceCapacity",
        }
    ]
    assert detail["errors"] == [{"code": "InsufficientInstanceCapacity", "message": "no capacity"}]
    assert detail["status"] == "PartiallyFulfilled"


def test_detail_is_json_ready_with_utc_z_timestamps() -> None:
    detail = record().to_detail()

    assert json.loads(json.dumps(detail)) == detail
    assert detail["receivedAt"] == "2026-01-02T03:04:05.678Z"
    assert detail["finishedAt"] == "2026-01-02T03:04:07.678Z"


def test_absent_pool_and_requester_are_null_not_missing() -> None:
    detail = record(node_pool=None, requester=None).to_detail()

    assert detail["nodePool"] is None
    assert detail["requester"] is None


def test_timestamps_in_other_zones_and_naive_ones_are_utc() -> None:
    plus_two = timezone(timedelta(hours=2))
    moment = datetime(2026, 1, 2, 5, 4, 5, 678999, tzinfo=plus_two)

    assert format_timestamp(moment) == "2026-01-02T03:04:05.678Z"
    assert format_timestamp(datetime(2026, 1, 2, 3, 4, 5)) == "2026-01-02T03:04:05.000Z"
    assert record(received_at=moment).received_at == RECEIVED


def test_detail_round_trips() -> None:
    original = record()

    assert RequestRecord.from_detail(original.to_detail()) == original
    assert RequestRecord.from_detail(json.loads(json.dumps(original.to_detail()))) == original


def test_reading_back_tolerates_storage_attributes_and_decimals() -> None:
    stored = record().to_detail() | {"pk": "Request#train-run-42", "sk": "Record"}
    stored["requested"], stored["launched"] = Decimal(4), Decimal(1)

    assert RequestRecord.from_detail(stored) == record()


def test_detail_type_follows_status() -> None:
    assert record().detail_type == "Launch Partially Fulfilled"
    assert record(status=RequestStatus.REJECTED).detail_type == "Launch Rejected"
    assert record(status=RequestStatus.FAILED).is_terminal_failure
    assert not record(status=RequestStatus.FULFILLED).is_terminal_failure


def test_rejected_record() -> None:
    rejected = RequestRecord.rejected(
        "bad-1",
        [ErrorDetail.of(RequestRejected("unknown node pool 'gpu'", code="UnknownNodePool"))],
        received_at=RECEIVED,
        requested=4,
    )

    detail = rejected.to_detail()

    assert detail["status"] == "Rejected"
    assert detail["launched"] == 0
    assert detail["instances"] == []
    assert detail["errors"] == [{"code": "UnknownNodePool", "message": "unknown node pool 'gpu'"}]
    assert detail["finishedAt"] == detail["receivedAt"]


def test_error_detail_of_an_ec2_failure_keeps_its_code_and_message() -> None:
    detail = ErrorDetail.of(LaunchFailed("InvalidAMIID.NotFound", "The image does not exist"))

    assert detail.to_dict() == {
        "code": "InvalidAMIID.NotFound",
        "message": "The image does not exist",
    }
    assert ErrorDetail.of(RuntimeError("boom")).to_dict() == {
        "code": "RuntimeError",
        "message": "boom",
    }


@pytest.mark.parametrize(
    "changes",
    [
        {"status": "Done"},
        {"requested": -1},
        {
            "instances": [
                {
                    "instanceId": "i-1",
                    "instanceType": "m5.large",
                    "zone": "a",
                    "capacityType": "dedicated",
                }
            ]
        },
    ],
)
def test_invalid_records_are_refused(changes: dict[str, Any]) -> None:
    detail = record().to_detail() | changes

    with pytest.raises(ValidationError):
        RequestRecord.from_detail(detail)


def test_a_waiting_record_is_not_final_and_names_what_it_waits_for() -> None:
    start = datetime(2026, 1, 3, 11, 30, tzinfo=UTC)
    waiting = record(
        status=RequestStatus.WAITING,
        instances=[],
        launched=0,
        wait_for_capacity_until=start + timedelta(hours=2),
        waiting_for=[
            AwaitedReservation(
                capacity_reservation_id="cr-0123456789abcdef0",
                state="scheduled",
                capacity_reservation_type="capacity-block",
                start_date=start,
            )
        ],
    )
    detail = waiting.to_detail()

    assert not waiting.is_final and record().is_final
    assert waiting.detail_type == "Launch Waiting"
    assert detail["waitForCapacityUntil"] == "2026-01-03T13:30:00.000Z"
    assert detail["waitingFor"] == [
        {
            "capacityReservationId": "cr-0123456789abcdef0",
            "state": "scheduled",
            "capacityReservationType": "capacity-block",
            "startDate": "2026-01-03T11:30:00.000Z",
        }
    ]
    assert RequestRecord.from_detail(detail) == waiting


def test_a_reserved_instance_names_its_reservations_type_and_dates() -> None:
    instance = LaunchedInstance(
        instance_id="i-0123456789abcdef0",
        instance_type="p5.48xlarge",
        zone="us-east-1a",
        capacity_type="reserved",
        capacity_reservation_id="cr-0123456789abcdef0",
        capacity_reservation_type="capacity-block",
        capacity_reservation_start_date=datetime(2026, 1, 3, 11, 30),
        capacity_reservation_end_date=datetime(2026, 1, 4, 11, 30, tzinfo=UTC),
    )

    dumped = instance.to_dict()
    assert dumped["capacityReservationType"] == "capacity-block"
    assert dumped["capacityReservationStartDate"] == "2026-01-03T11:30:00.000Z"
    assert dumped["capacityReservationEndDate"] == "2026-01-04T11:30:00.000Z"
    assert LaunchedInstance.model_validate(dumped) == instance
