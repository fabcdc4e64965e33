"""Every moto operation passes the controls: the latency set for it, then its injected fault (if
one fires), then moto, one request at a time per service; each call is counted.

An injected fault is serialised in the protocol of the service called (query/XML for EC2, JSON
`__type` for DynamoDB and EventBridge, JSON with the query-error header for SQS), so botocore
raises `ClientError` with exactly that code.
"""

import functools
import time
from collections.abc import Callable
from typing import Any

from moto.core.responses import ActionResult
from werkzeug.exceptions import HTTPException

from moto_capacity.core.exceptions import InjectedError
from moto_capacity.core.locks import SERVICE_LOCKS
from moto_capacity.core.operations import OPERATION_CONTROLS, InjectedFault
from moto_capacity.dynamodb.exceptions import cancelled

# Statuses AWS answers these codes with; anything else is a 400 client error.
SERVER_FAULT_STATUS = {
    "InternalError": 500,
    "InternalFailure": 500,
    "InternalServerError": 500,
    "ServiceUnavailable": 503,
    "Unavailable": 503,
    "RequestLimitExceeded": 503,
}


def _error_response(response: Any, error: HTTPException) -> Any:
    """A moto HTTP error answered exactly as moto's own dispatch answers it."""
    headers = dict(response.response_headers)
    headers.update(dict(error.get_headers() or []))
    headers["status"] = str(error.code)
    headers, body = response._enrich_response(headers, error.description)
    return error.code, headers, body


def _fault_response(response: Any, fault: InjectedFault) -> Any:
    if fault.cancellation_reasons:
        return _error_response(response, cancelled(fault.cancellation_reasons))
    code, message = fault.code, fault.message
    status, headers, body = response.serialized(ActionResult(InjectedError(code, message)))
    status = SERVER_FAULT_STATUS.get(code, status)
    headers["status"] = str(status)
    headers, body = response._enrich_response(headers, body)
    return status, headers, body


def controlled(original: Callable[..., Any]) -> Callable[..., Any]:
    """Wraps moto's BaseResponse.call_action, through which every operation of every service
    passes."""

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
            # other threads may be writing): one request at a time per service, after the latency
            # (`core.locks`; an SQS long poll steps aside while it waits).
            with SERVICE_LOCKS[self.service_name]:
                answer = original(self)
        except Exception:
            OPERATION_CONTROLS.record(operation, failed=True)
            raise
        OPERATION_CONTROLS.record(operation, failed=int(answer[0]) >= 400)
        return answer

    return call_action
