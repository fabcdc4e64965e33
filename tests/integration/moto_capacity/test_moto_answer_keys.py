"""moto's answers with the extension's picker (moto_capacity/core/picking.py): byte for byte the
answers moto's own picker makes, and the keys of each member derived once, not per value."""

import inspect
import os
from collections.abc import Callable
from typing import Any

import pytest
from moto.core import responses, serialize

from moto_capacity.core import picking

TABLE = "answers"


def _item(i: int) -> dict[str, Any]:
    """One of every attribute type DynamoDB answers with."""
    return {
        "pk": {"S": f"item-{i:04d}"},
        "sk": {"S": "answer"},
        "number": {"N": str(i)},
        "blob": {"B": bytes([i % 256, 1, 2])},
        "strings": {"SS": ["a", f"s{i}"]},
        "numbers": {"NS": ["1", str(i + 2)]},
        "blobs": {"BS": [b"x", bytes([i % 256])]},
        "map": {"M": {"nested": {"L": [{"S": "deep"}, {"NULL": True}, {"BOOL": i % 2 == 0}]}}},
    }


@pytest.fixture
def dynamodb(state_table: Callable[..., Any]) -> Any:
    return state_table(TABLE)


@pytest.fixture
def raw_answers() -> Callable[[Any], list[bytes]]:
    """The bodies a client received, in order, for the calls made since `raw_answers(client)`."""
    bodies: list[bytes] = []

    def keep(http_response: Any, **_: Any) -> None:
        bodies.append(http_response.content)

    def start(client: Any) -> list[bytes]:
        client.meta.events.register("after-call", keep)
        return bodies

    return start


def _with_mo_tos_picker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(responses, "XFormedAttributePicker", serialize.XFormedAttributePicker)


def test_the_extension_answers_a_scan_with_the_bytes_moto_answers_it_with(
    dynamodb: Any,
    raw_answers: Callable[[Any], list[bytes]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given items of every attribute type
    for i in range(5):
        dynamodb.put_item(TableName=TABLE, Item=_item(i))
    bodies = raw_answers(dynamodb)
    # When the same reads are answered by the extension's picker, then by moto's own
    assert responses.XFormedAttributePicker is picking.RememberingAttributePicker
    reads: list[Callable[[], Any]] = [
        lambda: dynamodb.scan(TableName=TABLE),
        lambda: dynamodb.get_item(
            TableName=TABLE, Key={"pk": {"S": "item-0003"}, "sk": {"S": "answer"}}
        ),
        lambda: dynamodb.describe_table(TableName=TABLE),
        lambda: dynamodb.query(
            TableName=TABLE,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": "item-0001"}},
        ),
    ]
    for read in reads:
        read()
    _with_mo_tos_picker(monkeypatch)
    for read in reads:
        read()
    # Then every answer is the same, byte for byte
    ours, motos = bodies[: len(reads)], bodies[len(reads) :]
    assert len(ours) == len(motos) == len(reads)
    assert ours == motos


def test_the_extension_answers_ec2_as_moto_does(
    ec2: Any, linux_ami: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given instances, tagged, in a reservation (objects of moto's classes, not dicts)
    ec2.create_capacity_reservation(
        InstanceType="m5.large",
        InstancePlatform="Linux/UNIX",
        AvailabilityZone="us-east-1a",
        InstanceCount=2,
    )
    ec2.run_instances(
        ImageId=linux_ami,
        InstanceType="m5.large",
        MinCount=2,
        MaxCount=2,
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": "k", "Value": "v"}]}],
    )

    def reads() -> list[Any]:
        answers = [
            ec2.describe_instances(),
            ec2.describe_capacity_reservations(),
            ec2.describe_subnets(),
            ec2.describe_images(ImageIds=[linux_ami]),
        ]
        for answer in answers:
            answer.pop("ResponseMetadata")
        return answers

    # When the extension's picker answers, then moto's own
    ours = reads()
    _with_mo_tos_picker(monkeypatch)
    motos = reads()
    # Then the answers are the same
    assert ours == motos


def test_a_large_scan_asks_for_each_members_keys_once(
    dynamodb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a table of 200 items, scanned once
    for i in range(200):
        dynamodb.put_item(TableName=TABLE, Item=_item(i))
    dynamodb.scan(TableName=TABLE, Limit=1)
    asked: list[str] = []
    picked: list[str] = []
    original = serialize.NoAlias.has_alias

    def counted(self: Any, key: str) -> bool:
        asked.append(key)
        return original(self, key)

    class CountedContext(serialize.AttributePickerContext):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            picked.append(self.key)

    monkeypatch.setattr(serialize.NoAlias, "has_alias", counted)
    monkeypatch.setattr(serialize, "AttributePickerContext", CountedContext)
    # When it is scanned whole
    items = dynamodb.scan(TableName=TABLE)["Items"]
    # Then every item is answered, no member's keys were derived again for it, and the items'
    # values (plain dicts) were read without a picker's context each
    assert len(items) == 200
    assert asked == []
    assert picked == []


def test_a_large_scan_reads_only_the_members_its_items_hold(
    dynamodb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a table of 200 items of 8 attribute values each (a structure of 10 members each),
    # scanned once
    for i in range(200):
        dynamodb.put_item(TableName=TABLE, Item=_item(i))
    dynamodb.scan(TableName=TABLE, Limit=1)
    read: list[str] = []
    original = serialize.ResponseSerializer.get_value

    def counted(self: Any, value: Any, key: str, shape: Any) -> Any:
        read.append(key)
        return original(self, value, key, shape)

    monkeypatch.setattr(serialize.ResponseSerializer, "get_value", counted)
    # When it is scanned whole
    items = dynamodb.scan(TableName=TABLE)["Items"]
    # Then every item is answered, and no member an item does not hold was asked for (moto
    # asks each of an attribute value's 10 members: 16,000 and more)
    assert len(items) == 200
    assert items[7] == _item(7)
    assert len(read) < 200 * 8


def test_the_actions_a_response_class_answers_are_listed_once_and_again_when_it_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from moto.ec2.responses import EC2Response

    listed: list[object] = []
    original = inspect.getmembers

    def counted(*args: Any, **kwargs: Any) -> Any:
        listed.append(args[0])
        return original(*args, **kwargs)

    names = responses.method_names_from_class(EC2Response)
    monkeypatch.setattr(inspect, "getmembers", counted)
    assert responses.method_names_from_class(EC2Response) == names
    assert listed == []
    monkeypatch.setattr(EC2Response, "an_action_added_later", lambda self: None, raising=False)
    assert "an_action_added_later" in responses.method_names_from_class(EC2Response)
    assert listed == [EC2Response]


def test_motos_service_folders_are_listed_once_a_process(monkeypatch: pytest.MonkeyPatch) -> None:
    # moto's server asks for them on every request (DomainDispatcherApplication); moto alone
    # asks the file system about each of its 180 entries every time.
    from moto import backends

    names = list(backends.list_of_moto_modules())
    asked: list[str] = []
    original = os.path.isdir

    def counted(path: Any) -> bool:
        asked.append(str(path))
        return original(path)

    monkeypatch.setattr(os.path, "isdir", counted)
    assert list(backends.list_of_moto_modules()) == names
    assert {"ec2", "sqs", "dynamodb"} <= set(names)
    assert "sqs.us-east-1.amazonaws.com" not in backends.list_of_moto_modules()
    assert asked == []


def test_a_backends_url_table_is_built_once_for_what_it_is_built_from(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # moto's stubber asks the service's backend for its table on every request it mocks; moto
    # alone formats each pattern for each URL base, and rewrites it for China, every time.
    from moto.core import base_backend
    from moto.dynamodb import urls
    from moto.dynamodb.models import dynamodb_backends

    backend = dynamodb_backends["123456789012"]["us-east-1"]
    table = backend.urls
    assert table["https?://dynamodb\\.(.+)\\.amazonaws\\.com/"] == urls.DynamoHandler.dispatch
    rewritten: list[str] = []
    original = base_backend.re.sub

    def counted(pattern: Any, replacement: Any, text: str, *args: Any) -> str:
        rewritten.append(text)
        return original(pattern, replacement, text, *args)

    monkeypatch.setattr(base_backend.re, "sub", counted)
    # Then the same table is answered again without building it, each caller its own copy
    again = backend.urls
    assert again == table
    assert rewritten == []
    again.clear()
    assert dynamodb_backends["123456789012"]["eu-west-1"].urls == table
    # and a pattern added to the service's URL module is in the next table
    monkeypatch.setitem(urls.url_paths, "{0}/added$", urls.DynamoHandler.dispatch)
    added = backend.urls
    assert "https?://dynamodb\\.(.+)\\.amazonaws\\.com/added$" in added
    assert rewritten != []
    assert set(added) - set(table) == {
        "https?://dynamodb\\.(.+)\\.amazonaws\\.com/added$",
        "https?://dynamodb\\.(.+)\\.amazonaws.com.cn/added$",
        "https?://(.+)\\.ddb\\.(.+)\\.amazonaws\\.com/added$",
        "https?://(.+)\\.ddb\\.(.+)\\.amazonaws.com.cn/added$",
    }
