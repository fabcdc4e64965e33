"""PutEvents' limits (EventBridge API reference, PutEvents; "Calculating PutEvents event entry
size"): at most 10 entries and 256 KB per call. Large coalesced groups and large records must
still publish, whole where they can be."""

import json
from typing import Any

from botocore.exceptions import ClientError

from capacity_launcher.adapters.publisher import Event, Publisher

MAX_REQUEST_BYTES = 256 * 1024
DETAIL_TRUNCATED = "DetailTruncated"


def entry_size(entry: dict[str, Any]) -> int:
    """As EventBridge counts it: Source, DetailType, Detail and each resource, in UTF-8."""
    parts = [entry["Source"], entry["DetailType"], entry["Detail"], *entry.get("Resources", [])]
    return sum(len(part.encode()) for part in parts)


class StrictEventBridge:
    """Refuses what EventBridge refuses: more than 10 entries, or more than 256 KB, per call."""

    def __init__(self) -> None:
        self.calls: list[list[dict[str, Any]]] = []

    def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        if len(Entries) > 10 or sum(entry_size(e) for e in Entries) > MAX_REQUEST_BYTES:
            error = {"Error": {"Code": "ValidationException", "Message": "too large"}}
            raise ClientError(error, "PutEvents")  # type: ignore[arg-type]
        self.calls.append(Entries)
        return {"FailedEntryCount": 0, "Entries": [{"EventId": "e"} for _ in Entries]}


def _record(request_id: str, instances: int, offerings: int) -> dict[str, Any]:
    return {
        "requestId": request_id,
        "status": "PartiallyFulfilled",
        "instances": [
            {
                "instanceId": f"i-{n:017x}",
                "instanceType": "p5.48xlarge",
                "zone": "us-east-1a",
                "capacityType": "reserved",
                "capacityReservationId": f"cr-{n:017x}",
            }
            for n in range(instances)
        ],
        "unavailableOfferings": [
            {
                "instanceType": f"type{n}.48xlarge",
                "zone": "us-east-1b",
                "capacityType": "spot",
                "capacityReservationId": None,
                "reason": "AuthFailure.ServiceLinkedRoleCreationNotPermitted",
            }
            for n in range(offerings)
        ],
        "errors": [],
    }


def _published(bus: StrictEventBridge) -> list[dict[str, Any]]:
    return [json.loads(e["Detail"]) for call in bus.calls for e in call]


def test_a_coalesced_group_of_many_records_publishes_in_calls_within_both_limits() -> None:
    # Given 25 records of about 60 KB each (one coalesced group's status events)
    bus = StrictEventBridge()
    records = [_record(f"r-{n}", instances=300, offerings=0) for n in range(25)]
    # When they are published
    Publisher("bus", bus).publish(*(Event("Launch Fulfilled", r) for r in records))
    # Then every one arrives, in order, whole, in calls EventBridge accepts
    assert [d["requestId"] for d in _published(bus)] == [r["requestId"] for r in records]
    assert _published(bus) == records
    assert all(len(call) <= 10 for call in bus.calls)
    assert len(bus.calls) > 3  # 256 KB holds four such records, not ten


def test_a_record_too_large_alone_keeps_every_instance_and_says_what_it_left_out() -> None:
    # Given one record with 500 instances and thousands of unavailable offerings (> 256 KB)
    bus = StrictEventBridge()
    record = _record("r-big", instances=500, offerings=3000)
    assert len(json.dumps(record)) > MAX_REQUEST_BYTES
    # When it is published
    Publisher("bus", bus).publish(Event("Launch Partially Fulfilled", record))
    # Then it arrives in one entry with every instance, as many offerings as fit, their counts
    # and a note (the one policy of domain/records/detail_limits.py, which records are held
    # to already)
    ((detail,),) = [_published(bus)]
    assert detail["instances"] == record["instances"]
    kept = len(detail["unavailableOfferings"])
    assert 0 < kept < 3000
    assert detail["unavailableOfferings"] == record["unavailableOfferings"][:kept]
    assert detail["detailTruncated"] == {"unavailableOfferings": {"total": 3000, "kept": kept}}
    assert [e["code"] for e in detail["errors"]] == [DETAIL_TRUNCATED]
    assert f"{3000 - kept} of 3000 unavailableOfferings left out" in detail["errors"][0]["message"]
    assert entry_size(bus.calls[0][0]) <= MAX_REQUEST_BYTES


def test_a_record_that_fits_is_published_untouched() -> None:
    bus = StrictEventBridge()
    record = _record("r-small", instances=4, offerings=10)
    Publisher("bus", bus).publish(Event("Launch Fulfilled", record))
    assert _published(bus) == [record]
