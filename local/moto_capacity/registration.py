"""Hooks the extension into moto: EC2 actions, resource-groups routes, operation controls
and the HTTP control endpoints. Each hook is applied once, however often install() runs."""

import collections
import functools
import threading
import time
from collections.abc import Callable
from typing import Any

from moto.core.responses import ActionResult, BaseResponse
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.table import Table
from moto.dynamodb.responses import DynamoHandler
from moto.ec2.models import EC2Backend
from moto.ec2.models.amis import Ami
from moto.ec2.models.instances import Instance
from moto.ec2.responses import EC2Response
from moto.ec2.utils import EC2_PREFIX_TO_RESOURCE, EC2_RESOURCE_TO_PREFIX
from moto.events.utils import EventTemplateParser
from moto.moto_server.werkzeug_app import DomainDispatcherApplication
from moto.resourcegroups import urls as resource_groups_urls
from moto.resourcegroups.exceptions import BadRequestException
from moto.resourcegroups.models import ResourceGroupsBackend
from moto.resourcegroups.responses import ResourceGroupsResponse
from moto.sqs import models as sqs_models
from moto.sqs.models import SQSBackend
from moto.sqs.responses import SQSResponse
from werkzeug.exceptions import HTTPException

from . import dynamodb_rules, groups, partitions, transactions
from .allocation import place_restarted_instance
from .clock import CLOCK
from .control_api import PREFIX, control_app
from .deliveries import sending_as_caller, stamping_sender, whole_event
from .exceptions import InjectedError
from .gpu_responses import GpuReservationResponse
from .group_responses import GROUP_RESOURCE_PATHS, CapacityReservationGroupResponse
from .models import capacity_backend, existing_capacity_backend
from .operations import OPERATION_CONTROLS
from .platforms import ImageBillingFields
from .responses import CapacityReservationResponse
from .retention import without_expired
from .visibility import EventuallyConsistentInstanceResponse, noting_launches

_MARK = "__moto_capacity__"
_INSTALL_LOCK = threading.Lock()
# Statuses AWS answers these codes with; anything else is a 400 client error.
SERVER_FAULT_STATUS = {
    "InternalError": 500,
    "InternalFailure": 500,
    "InternalServerError": 500,
    "ServiceUnavailable": 503,
    "Unavailable": 503,
    "RequestLimitExceeded": 503,
}


def _hook(owner: Any, name: str, make: Callable[[Any], Any]) -> None:
    """Replace owner.name by make(original), unless this extension already did."""
    original = owner.__dict__.get(name) or getattr(owner, name)
    if getattr(original, _MARK, False):
        return
    replacement = make(original)
    setattr(replacement, _MARK, True)
    setattr(owner, name, replacement)


def _copy_members(source: type, target: type) -> None:
    for name, member in vars(source).items():
        if name.startswith("__"):
            continue
        if getattr(target.__dict__.get(name), _MARK, False):
            continue
        target_member = member.fget if isinstance(member, property) else member
        setattr(target_member, _MARK, True)
        setattr(target, name, member)


def _releasing_slot(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def release_after(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        backend = existing_capacity_backend(self.ec2_backend)
        if backend is not None:
            backend.release_instance(self)
        return result

    return release_after


def _placing_again(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def place_before(self: Any, *args: Any, **kwargs: Any) -> Any:
        backend = existing_capacity_backend(self.ec2_backend)
        if backend is not None and not self.is_running():
            place_restarted_instance(backend, self)
        return original(self, *args, **kwargs)

    return place_before


def _checking_reservations_exist(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def do_resources_exist(self: Any, resource_ids: list[str]) -> Any:
        for reservation_id in [rid for rid in resource_ids if rid.startswith("cr-")]:
            capacity_backend(self).get_reservation(reservation_id)
        return original(self, [rid for rid in resource_ids if not rid.startswith("cr-")])

    return do_resources_exist


def _install_ec2() -> None:
    EC2_RESOURCE_TO_PREFIX["capacity-reservation"] = "cr"
    EC2_PREFIX_TO_RESOURCE["cr"] = "capacity-reservation"
    _copy_members(CapacityReservationResponse, EC2Response)
    _copy_members(GpuReservationResponse, EC2Response)
    _copy_members(EventuallyConsistentInstanceResponse, EC2Response)
    _copy_members(ImageBillingFields, Ami)
    _hook(EC2Backend, "run_instances", noting_launches)
    _hook(Instance, "stop", _releasing_slot)
    _hook(Instance, "terminate", _releasing_slot)
    _hook(Instance, "start", _placing_again)
    _hook(EC2Backend, "do_resources_exist", _checking_reservations_exist)


def _normalising_configuration(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def with_configuration(self: Any, *args: Any, **kwargs: Any) -> Any:
        kwargs["configuration"] = groups.normalised_configuration(kwargs.get("configuration"))
        return original(self, *args, **kwargs)

    return with_configuration


def _protecting_deletion(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def delete_group(self: Any, group_name: str) -> Any:
        group = self.get_group(group_name)
        if groups.is_deletion_protected(group) and groups.members(group):
            raise BadRequestException("The group has deletion-protection and is not empty")
        return original(self, group_name)

    return delete_group


def _install_resource_groups() -> None:
    resource_groups_urls.url_paths.update(GROUP_RESOURCE_PATHS)
    _copy_members(CapacityReservationGroupResponse, ResourceGroupsResponse)
    _hook(ResourceGroupsBackend, "create_group", _normalising_configuration)
    _hook(ResourceGroupsBackend, "put_group_configuration", _normalising_configuration)
    _hook(ResourceGroupsBackend, "delete_group", _protecting_deletion)


def _install_dynamodb() -> None:
    for write in ("put_item", "update_item", "delete_item", "batch_write_item"):
        _hook(DynamoHandler, write, dynamodb_rules.strict)
    _hook(DynamoHandler, "transact_write_items", dynamodb_rules.strict)
    _hook(DynamoDBBackend, "transact_write_items", transactions.touching_only_its_items)
    _hook(Table, "query", partitions.reading_only_its_partition)


def _error_response(response: Any, error: HTTPException) -> Any:
    """A moto HTTP error answered exactly as moto's own dispatch answers it."""
    headers = dict(response.response_headers)
    headers.update(dict(error.get_headers() or []))
    headers["status"] = str(error.code)
    headers, body = response._enrich_response(headers, error.description)
    return error.code, headers, body


def _fault_response(response: Any, fault: Any) -> Any:
    if fault.cancellation_reasons:
        return _error_response(response, dynamodb_rules.cancelled(fault.cancellation_reasons))
    code, message = fault.code, fault.message
    status, headers, body = response.serialized(ActionResult(InjectedError(code, message)))
    status = SERVER_FAULT_STATUS.get(code, status)
    headers["status"] = str(status)
    headers, body = response._enrich_response(headers, body)
    return status, headers, body


_SERVICE_LOCKS: collections.defaultdict[str, threading.RLock] = collections.defaultdict(
    threading.RLock
)


def _controlled(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def call_action(self: Any) -> Any:
        action = self._get_action()
        if not action:
            return original(self)
        operation = f"{self.service_name}:{action}"
        delay = OPERATION_CONTROLS.latency_for(operation)
        if delay:
            time.sleep(delay)
        fault = OPERATION_CONTROLS.fault_for(operation)
        if fault is not None:
            OPERATION_CONTROLS.record(operation, failed=True)
            return _fault_response(self, fault)
        try:
            # moto's backends are not thread-safe (a DynamoDB transaction rolls back items
            # other threads may be writing): one request at a time per service, after the latency.
            with _SERVICE_LOCKS[self.service_name]:
                answer = original(self)
        except Exception:
            OPERATION_CONTROLS.record(operation, failed=True)
            raise
        OPERATION_CONTROLS.record(operation, failed=int(answer[0]) >= 400)
        return answer

    return call_action


def _on_the_clock(original: Callable[..., float]) -> Callable[..., float]:
    """moto's `unix_time`/`unix_time_millis` as SQS reads them, on the emulator's clock."""

    @functools.wraps(original)
    def now(dt: Any = None) -> float:
        return original(dt if dt is not None else CLOCK.now().replace(tzinfo=None))

    return now


def _install_sqs() -> None:
    """SQS's delays (DelaySeconds), visibility timeouts and retention follow the emulator's clock,
    as every other time in the extension: a test or demo that advances the clock sees a delayed
    message arrive, as it would after waiting that long on AWS."""
    _hook(sqs_models, "unix_time", _on_the_clock)
    _hook(sqs_models, "unix_time_millis", _on_the_clock)
    # ... and retention: a message kept past its queue's MessageRetentionPeriod is gone.
    _hook(SQSBackend, "get_queue", without_expired)
    # SenderId is the caller of SendMessage, and a bus rule delivers the whole event.
    _hook(SQSResponse, "send_message", sending_as_caller)
    _hook(SQSResponse, "send_message_batch", sending_as_caller)
    _hook(SQSBackend, "send_message", stamping_sender)
    _hook(EventTemplateParser, "parse", whole_event)


def _serving_control_api(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def dispatch(self: Any, environ: dict[str, Any], start_response: Any) -> Any:
        if environ.get("PATH_INFO", "").startswith(PREFIX):
            return control_app(environ, start_response)
        return original(self, environ, start_response)

    return dispatch


def install() -> None:
    """Teach moto capacity; safe to call any number of times, from any thread."""
    with _INSTALL_LOCK:
        _install_ec2()
        _install_resource_groups()
        _install_dynamodb()
        _install_sqs()
        _hook(BaseResponse, "call_action", _controlled)
        _hook(DomainDispatcherApplication, "__call__", _serving_control_api)
