"""HTTP control endpoints under /moto-capacity/, served by the moto server next to AWS APIs."""

import functools
import json
from collections.abc import Callable, Iterable
from typing import Any

from werkzeug.wrappers import Request, Response

from . import models as control

PREFIX = "/moto-capacity"


def _set_capacity(body: dict[str, Any]) -> None:
    control.set_capacity(
        body["region"], body["instanceType"], body["zone"], body["capacityType"], body["count"]
    )


def _inject_fault(body: dict[str, Any]) -> None:
    control.inject_fault(
        body["operation"],
        body["code"],
        message=body.get("message") or "",
        times=body.get("times"),
        rate=body.get("rate"),
        seed=body.get("seed"),
        cancellation_reasons=body.get("cancellationReasons"),
        scope=body.get("scope") or "call",
    )


def _set_transaction_conflicts(body: dict[str, Any]) -> None:
    control.set_transaction_conflicts(body["rate"], body.get("seed"))


def _set_latency(body: dict[str, Any]) -> None:
    control.set_latency(body["operation"], body["seconds"])


def _set_consistency(body: dict[str, Any]) -> None:
    known = {"instanceVisibilitySeconds", "reservationPendingSeconds"}
    if not known & body.keys() or body.keys() - known:
        raise ValueError(f"the body takes {sorted(known)} (at least one), got {sorted(body)}")
    control.set_consistency(
        body.get("instanceVisibilitySeconds"), body.get("reservationPendingSeconds")
    )


def _set_status_checks(body: dict[str, Any]) -> None:
    if set(body) != {"initializingSeconds"}:
        raise ValueError(f"the body takes ['initializingSeconds'], got {sorted(body)}")
    control.set_status_checks(body["initializingSeconds"])


def _register_image(body: dict[str, Any]) -> None:
    control.register_image(
        body["region"], body["platformDetails"], body.get("name"), body.get("accountId")
    )


def _advance_clock(body: dict[str, Any]) -> None:
    control.advance_clock(body["advanceSeconds"])


def _set_lifecycle(body: dict[str, Any]) -> None:
    known = {"assessmentSeconds", "paymentPendingSeconds", "endDateLagSeconds"}
    if not known & body.keys() or body.keys() - known:
        raise ValueError(f"the body takes {sorted(known)} (at least one), got {sorted(body)}")
    control.set_lifecycle(
        body.get("assessmentSeconds"),
        body.get("paymentPendingSeconds"),
        body.get("endDateLagSeconds"),
    )


def _set_reservation_state(body: dict[str, Any]) -> None:
    control.set_reservation_state(body["capacityReservationId"], body["state"])


def _interrupt(body: dict[str, Any]) -> None:
    control.interrupt(body["capacityReservationId"], body["instanceCount"])


def _set_launch_template_quota(body: dict[str, Any]) -> None:
    control.set_launch_template_quota(body["launchTemplateQuota"])


def _set_termination_scope(body: dict[str, Any]) -> None:
    control.set_termination_scope(body.get("tagKey"), body.get("tagValue"))


def _reset(_: dict[str, Any]) -> None:
    control.reset()


def _nothing(_: dict[str, Any]) -> None:
    return None


ROUTES: dict[tuple[str, str], Callable[[dict[str, Any]], None]] = {
    ("POST", f"{PREFIX}/capacity"): _set_capacity,
    ("POST", f"{PREFIX}/faults"): _inject_fault,
    ("POST", f"{PREFIX}/latency"): _set_latency,
    ("POST", f"{PREFIX}/consistency"): _set_consistency,
    ("POST", f"{PREFIX}/clock"): _advance_clock,
    ("POST", f"{PREFIX}/status-checks"): _set_status_checks,
    ("POST", f"{PREFIX}/images"): _register_image,
    ("POST", f"{PREFIX}/transaction-conflicts"): _set_transaction_conflicts,
    ("POST", f"{PREFIX}/lifecycle"): _set_lifecycle,
    ("POST", f"{PREFIX}/reservation-state"): _set_reservation_state,
    ("POST", f"{PREFIX}/interruptions"): _interrupt,
    ("POST", f"{PREFIX}/launch-template-quota"): _set_launch_template_quota,
    ("POST", f"{PREFIX}/termination-scope"): _set_termination_scope,
    ("POST", f"{PREFIX}/reset"): _reset,
    ("GET", f"{PREFIX}/state"): _nothing,
}


def _json(status: int, payload: object) -> Response:
    return Response(json.dumps(payload), status=status, mimetype="application/json")


def control_app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    """Every route answers with the state after it ran; bad input is a 400 naming the problem."""
    request = Request(environ)
    action = ROUTES.get((request.method, request.path.rstrip("/")))
    if action is None:
        response = _json(404, {"error": f"no route {request.method} {request.path}"})
        return response(environ, start_response)
    try:
        body = request.get_json(silent=True) or {}
        if not isinstance(body, dict):
            raise ValueError("the body must be a JSON object")
        action(body)
        response = _json(200, control.state())
    except KeyError as missing:
        response = _json(400, {"error": f"missing field {missing}"})
    except (TypeError, ValueError) as error:
        response = _json(400, {"error": str(error)})
    return response(environ, start_response)


def serving_control_api(original: Callable[..., Any]) -> Callable[..., Any]:
    """Wraps moto's DomainDispatcherApplication.__call__: /moto-capacity/ paths come here."""

    @functools.wraps(original)
    def dispatch(self: Any, environ: dict[str, Any], start_response: Any) -> Any:
        if environ.get("PATH_INFO", "").startswith(PREFIX):
            return control_app(environ, start_response)
        return original(self, environ, start_response)

    return dispatch
