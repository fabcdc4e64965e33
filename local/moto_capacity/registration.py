"""`install()`: every hook into moto, service by service, then the controls (faults, latency and
counters on every operation; the /moto-capacity/ endpoints on the server). Each hook is applied
once, however often install() runs."""

import threading

from moto import backends
from moto.core import responses, serialize
from moto.core.base_backend import BaseBackend
from moto.core.responses import BaseResponse
from moto.moto_server.werkzeug_app import DomainDispatcherApplication

from .controls.dispatch import controlled
from .controls.responses import serving_control_api
from .core import backend_urls, module_names
from .core.action_names import listed_once
from .core.patching import hook, hook_property
from .core.picking import reading_dicts_directly, remembering, walking_dicts_by_their_keys
from .core.request_ids import enriching_only_bodies_with_an_id
from .core.xml_bodies import writing_xml_directly
from .dynamodb import hooks as dynamodb_hooks
from .ec2 import hooks as ec2_hooks
from .events import hooks as events_hooks
from .kms import hooks as kms_hooks
from .resourcegroups import hooks as resourcegroups_hooks
from .sqs import hooks as sqs_hooks

_INSTALL_LOCK = threading.Lock()


def install() -> None:
    """Teach moto capacity; safe to call any number of times, from any thread."""
    with _INSTALL_LOCK:
        ec2_hooks.install()
        resourcegroups_hooks.install()
        dynamodb_hooks.install()
        sqs_hooks.install()
        events_hooks.install()
        kms_hooks.install()
        hook(BaseResponse, "call_action", controlled)
        hook(responses, "XFormedAttributePicker", remembering)
        hook(serialize.ResponseSerializer, "get_value", reading_dicts_directly)
        hook(serialize.ResponseSerializer, "_serialize_type_structure", walking_dicts_by_their_keys)
        hook(serialize.EC2Serializer, "_serialize_body", writing_xml_directly)
        hook(responses, "method_names_from_class", listed_once)
        hook(backends, "list_of_moto_modules", module_names.listed_once)
        hook(BaseResponse, "_enrich_response", enriching_only_bodies_with_an_id)
        hook_property(BaseBackend, "urls", backend_urls.built_once)
        hook(DomainDispatcherApplication, "__call__", serving_control_api)
