"""The tests' process makes each new container's clients from what does not change between them
(tests/support/process_caches.py, open for the whole session): one model and one client class
per service, botocore's derived names and checks memoized; each client's handlers, events and
answers stay its own."""

from __future__ import annotations

import inspect
from typing import Any

import boto3
import botocore.useragent
from botocore.compat import accepts_kwargs
from botocore.hooks import EventAliaser, HierarchicalEmitter
from botocore.utils import EVENT_ALIASES

from tests.support.cloud import REGION, Cloud
from tests.support.process_caches import botocore_memos


def _client(service: str) -> Any:
    """A client as a new container makes it: its own session."""
    return boto3.Session(region_name=REGION).client(service)


def test_two_containers_clients_share_the_services_model_and_class_but_not_their_handlers(
    cloud: Cloud,
) -> None:
    # Given two containers' EC2 clients, each from its own session
    first, second = _client("ec2"), _client("ec2")
    # Then they read one model of the service, and are of one class
    assert first.meta.service_model is second.meta.service_model
    assert type(first) is type(second)
    # and a handler one container registers is called for its calls only
    seen: list[str] = []
    first.meta.events.register("before-call.ec2.DescribeSubnets", lambda **_: seen.append("1"))
    second.describe_subnets()
    assert seen == []
    first.describe_subnets()
    assert seen == ["1"]
    # and each answers as before, with the methods botocore adds to every client class
    assert first.describe_subnets()["Subnets"] == second.describe_subnets()["Subnets"]
    assert callable(second.generate_presigned_url)


def test_a_client_whose_session_adds_to_its_class_gets_a_class_of_its_own(cloud: Cloud) -> None:
    # Given a session whose handler adds a method to the EC2 client class
    session = boto3.Session(region_name=REGION)

    def add_greeting(class_attributes: dict[str, Any], **_: Any) -> None:
        class_attributes["greeting"] = lambda self: "hello"

    session.events.register("creating-client-class.ec2", add_greeting)
    # When it and another session make EC2 clients
    added, plain = session.client("ec2"), _client("ec2")
    # Then only its own client has the method
    assert added.greeting() == "hello"
    assert not hasattr(plain, "greeting")


def test_the_memos_answer_as_botocore_does() -> None:
    with botocore_memos():
        # Event names, aliased alike by every emitter: one memo for them all
        first = EventAliaser(HierarchicalEmitter())
        second = EventAliaser(HierarchicalEmitter())
        name = "before-call.cloudwatch-events.PutEvents"
        assert first._alias_event_name(name) == "before-call.eventbridge.PutEvents"
        assert second._alias_name_cache[name] == "before-call.eventbridge.PutEvents"
        # but an emitter with aliases of its own keeps its own memo
        own = EventAliaser(HierarchicalEmitter(), {"cloudwatch-events": "mine"})
        assert own._alias_event_name(name) == "before-call.mine.PutEvents"
        assert first._alias_event_name(name) == "before-call.eventbridge.PutEvents"
        assert EventAliaser(HierarchicalEmitter())._event_aliases == EVENT_ALIASES
        # Whether handlers take **kwargs: by their code, and each closure checked alike
        for handler in _handlers():
            assert bool(botocore.hooks.accepts_kwargs(handler)) == bool(accepts_kwargs(handler))
        # A user-agent component's text
        build = botocore.useragent.sanitize_user_agent_string_component
        assert build("Boto3 (a b)#1", allow_hash=True) == "Boto3--a-b-#1"
        assert build("Boto3 (a b)#1", allow_hash=False) == "Boto3--a-b--1"


def _handlers() -> list[Any]:
    def with_kwargs(**kwargs: Any) -> None: ...

    def without(event_name: str) -> None: ...

    def declared(**kwargs: Any) -> None: ...

    declared.__signature__ = inspect.Signature()  # type: ignore[attr-defined]

    class Handler:
        def method(self, **kwargs: Any) -> None: ...

        def __call__(self, event_name: str) -> None: ...

    return [with_kwargs, without, declared, Handler().method, Handler(), with_kwargs, without]
