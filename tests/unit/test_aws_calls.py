"""One way to call AWS from an adapter: `aws_call` turns a ClientError into the domain's error,
`all_pages` asks a listing for each page in turn, and `batch_write` retries unprocessed items a
bounded number of times."""

from __future__ import annotations

import time
from typing import Any

import pytest
from botocore.exceptions import ClientError

from capacity_launcher.adapters import dynamodb
from capacity_launcher.adapters.aws import all_pages, aws_call
from capacity_launcher.adapters.dynamodb import BATCH_ATTEMPTS, batch_get, batch_write
from capacity_launcher.adapters.instance_records import InstanceRecords
from capacity_launcher.adapters.instance_types import InstanceTypeCatalog
from capacity_launcher.domain.apis.config import NodeClass
from capacity_launcher.domain.errors import (
    ConditionFailed,
    LaunchFailed,
    NodeClassRefused,
    Throttled,
    Transient,
)
from capacity_launcher.domain.records.instance_records import InstanceRecord


def _error(code: str, reasons: list[str] | None = None) -> ClientError:
    response: dict[str, Any] = {"Error": {"Code": code, "Message": f"{code} happened"}}
    if reasons is not None:
        response["CancellationReasons"] = [{"Code": r} for r in reasons]
    return ClientError(response, "Operation")  # type: ignore[arg-type]


def _raise(error: Exception) -> None:
    raise error


def test_throttling_becomes_throttled_naming_the_operation() -> None:
    with pytest.raises(Throttled) as raised, aws_call("GetItem"):
        _raise(_error("ProvisionedThroughputExceededException"))
    assert raised.value.operation == "GetItem"
    assert raised.value.code == "ProvisionedThroughputExceededException"


def test_a_transaction_cancelled_by_a_conflict_is_transient() -> None:
    with pytest.raises(Transient) as raised, aws_call("TransactWriteItems"):
        _raise(_error("TransactionCanceledException", ["None", "TransactionConflict"]))
    assert not isinstance(raised.value, Throttled)


def test_a_failed_condition_is_an_answer_that_says_which_item_failed() -> None:
    with pytest.raises(ConditionFailed) as raised, aws_call("TransactWriteItems"):
        _raise(_error("TransactionCanceledException", ["None", "ConditionalCheckFailed"]))
    assert raised.value.failed_at(1) and not raised.value.failed_at(0)
    assert not raised.value.failed_at(2)


def test_a_single_write_whose_condition_failed_is_condition_failed() -> None:
    with pytest.raises(ConditionFailed), aws_call("PutItem"):
        _raise(_error("ConditionalCheckFailedException"))


def test_without_a_fatal_kind_other_errors_propagate_unchanged() -> None:
    original = _error("ResourceNotFoundException")
    with pytest.raises(ClientError) as raised, aws_call("GetItem"):
        _raise(original)
    assert raised.value is original


def test_a_fatal_kind_makes_other_errors_domain_errors_with_the_aws_code() -> None:
    with pytest.raises(LaunchFailed) as raised, aws_call("DescribeImages", fatal=LaunchFailed):
        _raise(_error("UnauthorizedOperation"))
    assert raised.value.code == "UnauthorizedOperation"
    assert raised.value.message == "UnauthorizedOperation happened"


def test_a_call_made_for_a_node_class_blames_the_field() -> None:
    node_class = NodeClass.model_validate(
        {
            "apiVersion": "capacity-launcher/v1",
            "kind": "NodeClass",
            "metadata": {"name": "gpu"},
            "spec": {"imageId": "ami-1", "subnetIds": ["subnet-1"], "securityGroupIds": ["sg-1"]},
        }
    )
    with (
        pytest.raises(NodeClassRefused) as raised,
        aws_call("GetParameter", node_class=node_class, field="spec.imageSsmParameter"),
    ):
        _raise(_error("AccessDeniedException"))
    assert raised.value.field == "spec.imageSsmParameter"
    assert raised.value.node_class == "gpu"


def test_other_exceptions_pass_through() -> None:
    with pytest.raises(KeyError), aws_call("GetItem"):
        _raise(KeyError("Item"))


class _Table:
    """BatchWriteItem that leaves the last item of each call unprocessed `stubborn` times."""

    def __init__(self, stubborn: int) -> None:
        self.stubborn = stubborn
        self.calls: list[int] = []
        self.written: list[Any] = []

    def batch_write_item(self, RequestItems: dict[str, list[Any]]) -> dict[str, Any]:
        (table, requests), *_ = RequestItems.items()
        self.calls.append(len(requests))
        assert len(self.calls) <= 50, "unprocessed items retried without bound"
        if self.stubborn > 0:
            self.stubborn -= 1
            self.written += requests[:-1]
            return {"UnprocessedItems": {table: requests[-1:]}}
        self.written += requests
        return {"UnprocessedItems": {}}


def _requests(count: int) -> list[dict[str, Any]]:
    return [{"PutRequest": {"Item": {"pk": {"S": str(n)}}}} for n in range(count)]


def test_batch_write_sends_25_a_call_and_retries_what_is_left_after_a_pause() -> None:
    table, pauses = _Table(stubborn=2), []
    calls = batch_write(table, "t", _requests(30), pause=pauses.append)
    assert table.calls == [25, 1, 1, 5]
    assert calls == 4
    assert len(table.written) == 30
    assert len(pauses) == 2 and all(p > 0 for p in pauses)


def test_batch_write_gives_up_after_its_attempts_with_a_clear_error() -> None:
    table, pauses = _Table(stubborn=1000), []
    with pytest.raises(Throttled) as raised:
        batch_write(table, "t", _requests(3), pause=pauses.append)
    assert len(table.calls) == BATCH_ATTEMPTS
    assert len(pauses) == BATCH_ATTEMPTS - 1
    assert raised.value.operation == "BatchWriteItem"
    assert raised.value.code == "UnprocessedItems"


def test_instance_records_written_in_a_batch_are_retried_a_bounded_number_of_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(dynamodb, "in_process_delay", lambda attempt: 0.0)
    table = _Table(stubborn=1000)
    records = InstanceRecords("t", dynamodb=table, clock=time.time)
    with pytest.raises(Throttled):
        records.put(
            [
                InstanceRecord("i-1", "m5.large", "on-demand"),
                InstanceRecord("i-2", "m5.large", "on-demand"),
            ]
        )
    assert len(table.calls) == BATCH_ATTEMPTS


class _Reads:
    """BatchGetItem that leaves the last key of each call unprocessed `stubborn` times."""

    def __init__(self, stubborn: int) -> None:
        self.stubborn = stubborn
        self.calls: list[int] = []

    def batch_get_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
        (table, request), *_ = RequestItems.items()
        keys = request["Keys"]
        self.calls.append(len(keys))
        assert len(self.calls) <= 50, "unprocessed keys asked again without bound"
        if self.stubborn > 0:
            self.stubborn -= 1
            unprocessed = {table: {**request, "Keys": keys[-1:]}}
            return {"Responses": {table: keys[:-1]}, "UnprocessedKeys": unprocessed}
        return {"Responses": {table: keys}, "UnprocessedKeys": {}}


def _keys(count: int) -> list[dict[str, Any]]:
    return [{"pk": {"S": str(n)}} for n in range(count)]


def test_batch_get_asks_again_for_unprocessed_keys_after_a_pause() -> None:
    # Given a table that leaves one key unprocessed twice (DynamoDB asking us to slow down)
    table, pauses = _Reads(stubborn=2), []
    # When 3 keys are read
    found = batch_get(table, "t", _keys(3), pause=pauses.append)
    # Then every key is read, the left ones asked again only after a jittered pause each
    assert sorted(i["pk"] for i in found) == ["0", "1", "2"]
    assert table.calls == [3, 1, 1]
    assert len(pauses) == 2 and all(p > 0 for p in pauses)


def test_batch_get_gives_up_after_its_attempts_with_a_clear_error() -> None:
    table, pauses = _Reads(stubborn=1000), []
    with pytest.raises(Throttled) as raised:
        batch_get(table, "t", _keys(3), pause=pauses.append)
    assert len(table.calls) == BATCH_ATTEMPTS
    assert len(pauses) == BATCH_ATTEMPTS - 1
    assert (raised.value.operation, raised.value.code) == ("BatchGetItem", "UnprocessedKeys")


class _ThrottledEc2:
    def describe_instance_type_offerings(self, **_: Any) -> Any:
        raise _error("RequestLimitExceeded")


def test_a_throttled_instance_type_read_hands_back_instead_of_failing_the_request() -> None:
    with pytest.raises(Throttled) as raised:
        InstanceTypeCatalog(ec2=_ThrottledEc2()).offered(["us-east-1a"])
    assert raised.value.operation == "DescribeInstanceTypeOfferings"


class _Listing:
    """A listing call answering canned pages, keeping what it was asked."""

    def __init__(self, *answers: dict[str, Any]) -> None:
        self.answers = list(answers)
        self.asked: list[dict[str, Any]] = []

    def __call__(self, **params: Any) -> dict[str, Any]:
        self.asked.append(params)
        return self.answers.pop(0)


def test_all_pages_follows_dynamodb_s_last_evaluated_key() -> None:
    key = {"pk": {"S": "a"}}
    listing = _Listing({"Items": [1], "LastEvaluatedKey": key}, {"Items": [2]})
    found = [i for page in all_pages(listing, TableName="t") for i in page["Items"]]
    assert found == [1, 2]
    assert listing.asked == [{"TableName": "t"}, {"TableName": "t", "ExclusiveStartKey": key}]


def test_all_pages_follows_next_token_and_stops_at_an_empty_one() -> None:
    listing = _Listing({"Subnets": [1], "NextToken": "n1"}, {"Subnets": [2], "NextToken": ""})
    found = [s for page in all_pages(listing, Filters=[]) for s in page["Subnets"]]
    assert found == [1, 2]
    assert listing.asked[1] == {"Filters": [], "NextToken": "n1"}


def test_all_pages_refuses_a_page_that_repeats_the_token_it_was_asked_with() -> None:
    listing = _Listing({"NextToken": "same"}, {"NextToken": "same"}, {"NextToken": "same"})
    with pytest.raises(RuntimeError, match="NextToken"):
        list(all_pages(listing))
    assert len(listing.asked) == 2
