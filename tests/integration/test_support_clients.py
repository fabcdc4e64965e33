"""The tests' process makes each new container's clients from what does not change between them
(tests/support/process_caches.py, open for the whole session): one model and one client class
per service, botocore's derived names and checks memoized; each client's handlers, events and
answers stay its own."""

from __future__ import annotations

import inspect
from typing import Any

import boto3
import botocore.auth
import botocore.context
import botocore.exceptions
import botocore.useragent
import pytest
from botocore.awsrequest import AWSRequest
from botocore.compat import accepts_kwargs
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.hooks import EventAliaser, HierarchicalEmitter
from botocore.utils import EVENT_ALIASES

from tests.support.cloud import REGION, Cloud
from tests.support.process_caches import botocore_memos, lambdas_signer
from tests.support.signatures import PLACEHOLDER_SIGNATURE


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


def test_a_clients_user_agent_is_built_once_for_its_setup_and_the_calls_features() -> None:
    build = botocore.useragent.UserAgentString.to_string  # botocore's own
    session = botocore.useragent.UserAgentString.from_environment()
    agents = [
        session,
        session.with_client_config(Config(retries={"mode": "standard"})),
        session.with_client_config(Config(retries={"mode": "adaptive"}, user_agent_appid="app")),
        session.with_client_config(Config(user_agent_extra="extra/1")),
        session.with_client_config(Config(user_agent="mine")),
    ]
    agents[1].set_client_features({"A"})
    with botocore_memos():
        for agent in agents:
            # Then each answers botocore's own text, built once (the same text object again)
            assert agent.to_string() == build(agent)
            assert agent.to_string() is agent.to_string()
            # and the call's context features are in it, as botocore adds them
            with botocore.context.start_as_current_context():
                botocore.useragent.register_feature_id("WAITER")
                assert agent.to_string() == build(agent)
        # and every setup has its own
        assert len({agent.to_string() for agent in agents}) == len(agents)


def test_the_tests_calls_are_signed_by_botocores_own_signer_as_in_lambda() -> None:
    request = AWSRequest(method="POST", url="https://dynamodb.us-east-1.amazonaws.com/", data=b"{}")
    credentials = Credentials("AKIAIOSFODNN7EXAMPLE", "secret")
    before = botocore.auth.AUTH_TYPE_MAPS["v4"]  # the session's own (open for every test)
    with lambdas_signer():
        signer = botocore.auth.AUTH_TYPE_MAPS["v4"](credentials, "dynamodb", REGION)
        assert type(signer) is botocore.auth.SigV4Auth
        signer.add_auth(request)
        assert request.headers["Authorization"].startswith(
            f"AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/{request.context['timestamp'][:8]}"
            f"/{REGION}/dynamodb/aws4_request"
        )
    # and the signer before is back once it is closed
    assert botocore.auth.AUTH_TYPE_MAPS["v4"] is before


def _handlers() -> list[Any]:
    def with_kwargs(**kwargs: Any) -> None: ...

    def without(event_name: str) -> None: ...

    def declared(**kwargs: Any) -> None: ...

    declared.__signature__ = inspect.Signature()  # type: ignore[attr-defined]

    class Handler:
        def method(self, **kwargs: Any) -> None: ...

        def __call__(self, event_name: str) -> None: ...

    return [with_kwargs, without, declared, Handler().method, Handler(), with_kwargs, without]


def test_under_placeholder_signatures_v4_writes_the_scope_and_no_signature_s3_signs() -> None:
    # Given the session's signers (support/signatures, open for every test)
    credentials = Credentials("AKIAIOSFODNN7EXAMPLE", "secret", "token-1")
    v4 = botocore.auth.AUTH_TYPE_MAPS["v4"](credentials, "dynamodb", REGION)
    request = AWSRequest(method="POST", url="https://dynamodb.us-east-1.amazonaws.com/", data=b"{}")
    request.headers["Authorization"] = "left from an earlier attempt"
    # When a request is signed for DynamoDB
    v4.add_auth(request)
    # Then it carries what moto reads (the access key and the scope), the date and the session
    # token, and a placeholder where the signature would be
    stamp = request.context["timestamp"]
    assert request.headers["X-Amz-Date"] == stamp
    assert request.headers["X-Amz-Security-Token"] == "token-1"
    assert request.headers["Authorization"] == (
        f"AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/{stamp[:8]}/{REGION}/dynamodb/"
        f"aws4_request, SignedHeaders=host;x-amz-date, Signature={PLACEHOLDER_SIGNATURE}"
    )
    # and S3's signer, a subclass, signs for real
    s3 = botocore.auth.AUTH_TYPE_MAPS["s3v4"](credentials, "s3", REGION)
    put = AWSRequest(method="PUT", url="https://b.s3.us-east-1.amazonaws.com/k", data=b"x")
    s3.add_auth(put)
    signature = put.headers["Authorization"].rsplit("Signature=", 1)[1]
    assert len(signature) == 64 and signature != PLACEHOLDER_SIGNATURE
    # and without credentials a request is refused, as botocore refuses it
    with pytest.raises(botocore.exceptions.NoCredentialsError):
        botocore.auth.AUTH_TYPE_MAPS["v4"](None, "dynamodb", REGION).add_auth(request)
