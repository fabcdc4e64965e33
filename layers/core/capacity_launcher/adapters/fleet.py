"""EC2 Fleet (instant): launching, describing where instances landed, and terminating them.

EC2 is eventually consistent ("Eventual consistency in the Amazon EC2 API"): ids CreateFleet
just returned can be unknown to DescribeInstances, CreateTags and TerminateInstances for a
while. Those calls wait for fresh ids with bounded, jittered backoff, and a description that
never comes falls back to what the CreateFleet answer said.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from functools import partial
from typing import Any, TypeVar

from botocore.exceptions import ClientError, ParamValidationError

from capacity_launcher.adapters.aws import (
    SDK_INVALID_PARAMETER,
    SDK_UNKNOWN_PARAMETER,
    all_pages,
    client,
    error_code,
    error_message,
    members_unknown_to_sdk,
    sdk_refusal,
)
from capacity_launcher.domain.aws_errors import (
    INSTANCE_GONE_STATES,
    classify,
    may_be_gone_instances,
    retryable_error,
)
from capacity_launcher.domain.capacity.fleet import (
    FleetError,
    FleetResult,
    InstanceLanding,
    ManagedInstance,
)
from capacity_launcher.domain.capacity.offerings import ON_DEMAND, RESERVED, SPOT, CapacityType
from capacity_launcher.domain.errors import LaunchFailed
from capacity_launcher.observability import logger

INSTANCE_NOT_FOUND = "InvalidInstanceID.NotFound"
# CreateFleet's Lifecycle (botocore's InstanceLifecycle) of instances in reserved capacity.
RESERVED_LIFECYCLES = frozenset({"capacity-block", "interruptible-capacity-reservation"})
# Waits before each new try on ids EC2 does not know yet: ~8 s in all, then give up.
VISIBILITY_BACKOFF_SECONDS = (0.25, 0.5, 1.0, 2.0, 4.0)
# DescribeInstances takes at most 200 values per filter; CreateTags and TerminateInstances
# 1000 resource ids per call.
_MAX_FILTER_VALUES = 200
_MAX_TAGGED_PER_CALL = 1000
MAX_TERMINATED_PER_CALL = 1000
# Facts kept for instances never described (a long-lived container must not grow without end).
_MAX_REMEMBERED = 10_000
_T = TypeVar("_T")


def _jittered(delay: float) -> float:
    # Equal jitter: workers that launched together do not retry in lockstep.
    return delay / 2 + random.uniform(0, delay / 2)


class Fleet:
    def __init__(self, ec2: Any | None = None, pause: Callable[[float], None] = time.sleep) -> None:
        """`pause`: how the adapter waits between reads (a simulated clock's advance in tests)."""
        self._ec2 = ec2 or client("ec2")
        self._pause = pause
        self._lock = threading.Lock()
        # What CreateFleet said about each instance, until DescribeInstances confirms it.
        self._launched: dict[str, InstanceLanding] = {}

    def create(self, request: Mapping[str, Any]) -> FleetResult:
        """CreateFleet with the exact input given (replayable: same ClientToken, same answer).

        A request the running botocore cannot send (a member or value its model lacks) is a
        LaunchFailed that names the member and the botocore, never an uncaught error."""
        unknown = members_unknown_to_sdk(self._ec2, "CreateFleet", request)
        if unknown:
            detail = f"its model has no {', '.join(unknown)}"
            raise LaunchFailed(SDK_UNKNOWN_PARAMETER, sdk_refusal("CreateFleet", detail))
        try:
            response = self._ec2.create_fleet(**request)
        except ClientError as error:
            raise _domain_error("CreateFleet", error) from error
        except ParamValidationError as error:
            refusal = sdk_refusal("CreateFleet", str(error))
            raise LaunchFailed(SDK_INVALID_PARAMETER, refusal) from error
        launched = [
            landing for group in response.get("Instances", []) for landing in _fleet_facts(group)
        ]
        with self._lock:
            self._launched.update({x.instance_id: x for x in launched})
            while len(self._launched) > _MAX_REMEMBERED:
                del self._launched[next(iter(self._launched))]
        errors = tuple(_fleet_error(e) for e in response.get("Errors", []))
        return FleetResult(tuple(x.instance_id for x in launched), errors, tuple(launched))

    def describe(self, instance_ids: Sequence[str]) -> list[InstanceLanding]:
        """Where each instance is, in the order given; ids EC2 still does not know after the
        backoff are reported from the CreateFleet answer (reservation unknown), or left out."""
        if not instance_ids:
            return []
        found = self._describe_visible(instance_ids)
        for delay in VISIBILITY_BACKOFF_SECONDS:
            missing = [i for i in instance_ids if i not in found]
            if not missing:
                break
            self._pause(_jittered(delay))
            found.update(self._describe_visible(missing))
        with self._lock:
            for instance_id in instance_ids:
                fact = self._launched.pop(instance_id, None)
                if instance_id not in found and fact is not None:
                    logger.warning(
                        "DescribeInstances does not know a launched instance yet; "
                        "using the CreateFleet answer",
                        extra={"instance_id": instance_id},
                    )
                    found[instance_id] = fact
        return [found[i] for i in instance_ids if i in found]

    def _describe_visible(self, instance_ids: Sequence[str]) -> dict[str, InstanceLanding]:
        # A filter, unlike InstanceIds, lists what EC2 knows instead of failing on a fresh id.
        found: dict[str, InstanceLanding] = {}
        try:
            for start in range(0, len(instance_ids), _MAX_FILTER_VALUES):
                chunk = list(instance_ids[start : start + _MAX_FILTER_VALUES])
                pages = all_pages(
                    self._ec2.describe_instances, Filters=[{"Name": "instance-id", "Values": chunk}]
                )
                for page in pages:
                    for reservation in page["Reservations"]:
                        for raw in reservation["Instances"]:
                            found[raw["InstanceId"]] = _landing(raw)
        except ClientError as error:
            raise _domain_error("DescribeInstances", error) from error
        return found

    def terminate(self, instance_ids: Sequence[str], *, fresh: bool = False) -> list[str]:
        """Terminates, at most 1000 ids a call, waiting out EC2's delay on fresh ids; returns the
        ids found gone already (terminated, or forgotten by EC2), which need nothing more.

        One id EC2 no longer has fails a whole call (InvalidInstanceID.NotFound, or, under the
        tag-scoped policy, UnauthorizedOperation): the ids are then described and only those
        still there are terminated. `fresh` ids (CreateFleet just returned them) that EC2 does
        not list are not taken for gone: EC2 may not know them yet. Raises when the refusal
        stands (every id still there, or a fresh one unlisted)."""
        gone: list[str] = []
        for start in range(0, len(instance_ids), MAX_TERMINATED_PER_CALL):
            chunk = list(instance_ids[start : start + MAX_TERMINATED_PER_CALL])
            gone += self._terminate_chunk(chunk, fresh)
        return gone

    def _terminate_chunk(self, instance_ids: list[str], fresh: bool) -> list[str]:
        try:
            self._on_known_instances(
                "TerminateInstances",
                lambda: self._ec2.terminate_instances(InstanceIds=instance_ids),
            )
            return []
        except LaunchFailed as refused:
            if not may_be_gone_instances(refused.code):
                raise
            states = self._states(instance_ids)
            live = [
                i for i in instance_ids if i in states and states[i] not in INSTANCE_GONE_STATES
            ]
            unlisted = [i for i in instance_ids if i not in states]
            if len(live) == len(instance_ids) or (fresh and unlisted):
                raise  # nothing is surely gone: the refusal stands
            gone = [i for i in instance_ids if i not in live]
            logger.info(
                "instances already gone; terminating the others",
                extra={"gone": gone, "instances": live, "code": refused.code},
            )
        if live:
            self._on_known_instances(
                "TerminateInstances", lambda: self._ec2.terminate_instances(InstanceIds=live)
            )
        return gone

    def _states(self, instance_ids: Sequence[str]) -> dict[str, str]:
        """The state DescribeInstances lists for each id it lists (gone ones are not listed)."""
        return {i: x.state for i, x in self._describe_visible(instance_ids).items()}

    def tag(self, instance_ids: Sequence[str], tags: Mapping[str, str]) -> list[str]:
        """Tags, waiting out EC2's delay on fresh ids; the ids left untagged (EC2 refuses a whole
        call while one of its ids is unknown). Those are logged and left with the fleet's tags,
        and the sync's reconciliation tags them from their instance records: a launched group
        is never handed back for it."""
        untagged: list[str] = []
        for start in range(0, len(instance_ids), _MAX_TAGGED_PER_CALL):
            chunk = list(instance_ids[start : start + _MAX_TAGGED_PER_CALL])
            try:
                self._on_known_instances(
                    "CreateTags",
                    partial(
                        self._ec2.create_tags,
                        Resources=chunk,
                        Tags=[{"Key": k, "Value": v} for k, v in sorted(tags.items())],
                    ),
                )
            except LaunchFailed as error:
                if error.code != INSTANCE_NOT_FOUND:
                    raise
                logger.warning(
                    "instances still unknown to EC2; request tags left to the reconciliation",
                    extra={"instance_ids": chunk, "reason": error.reason},
                )
                untagged += chunk
        return untagged

    def _on_known_instances(self, operation: str, call: Callable[[], _T]) -> _T:
        for delay in (*VISIBILITY_BACKOFF_SECONDS, None):
            try:
                return call()
            except ClientError as error:
                if error_code(error) != INSTANCE_NOT_FOUND or delay is None:
                    raise _domain_error(operation, error) from error
            self._pause(_jittered(delay))
        raise AssertionError("unreachable: the last try returns or raises")

    def find_managed(self, tag_filters: Mapping[str, str] | None = None) -> list[ManagedInstance]:
        """Instances tagged `capacity-launcher:managed=true`, terminated ones too (EC2 lists them
        for about an hour: reconciliation then knows they are gone, not described late)."""
        filters = [{"Name": "tag:capacity-launcher:managed", "Values": ["true"]}]
        filters += [{"Name": f"tag:{k}", "Values": [v]} for k, v in (tag_filters or {}).items()]
        try:
            pages = all_pages(self._ec2.describe_instances, Filters=filters)
            return [
                _managed(i) for page in pages for r in page["Reservations"] for i in r["Instances"]
            ]
        except ClientError as error:
            raise _domain_error("DescribeInstances", error) from error


def _fleet_error(raw: Mapping[str, Any]) -> FleetError:
    overrides = raw.get("LaunchTemplateAndOverrides", {}).get("Overrides", {})
    return FleetError(
        code=str(raw.get("ErrorCode", "Unknown")),
        message=str(raw.get("ErrorMessage", "")),
        instance_type=overrides.get("InstanceType"),
        zone=overrides.get("AvailabilityZone"),
        subnet_id=overrides.get("SubnetId"),
    )


def _fleet_facts(group: Mapping[str, Any]) -> list[InstanceLanding]:
    """What one CreateFleet `Instances` entry says: type, zone (from the override), lifecycle.
    It cannot say which reservation, if any, an instance landed in."""
    overrides = group.get("LaunchTemplateAndOverrides", {}).get("Overrides", {})
    lifecycle = group.get("Lifecycle")
    capacity_type: CapacityType = ON_DEMAND
    if lifecycle == "spot":
        capacity_type = SPOT
    elif lifecycle in RESERVED_LIFECYCLES:
        capacity_type = RESERVED
    return [
        InstanceLanding(
            instance_id=instance_id,
            instance_type=str(group.get("InstanceType") or overrides.get("InstanceType", "")),
            zone=str(overrides.get("AvailabilityZone", "")),
            capacity_type=capacity_type,
            capacity_reservation_id=None,
            state="pending",
        )
        for instance_id in group.get("InstanceIds", [])
    ]


def _capacity_type(raw: Mapping[str, Any]) -> CapacityType:
    """How a described instance runs: spot, in a reservation, or on demand."""
    if raw.get("InstanceLifecycle") == "spot":
        return SPOT
    if raw.get("CapacityReservationId"):
        return RESERVED
    return ON_DEMAND


def _landing(raw: Mapping[str, Any]) -> InstanceLanding:
    return InstanceLanding(
        instance_id=raw["InstanceId"],
        instance_type=raw["InstanceType"],
        zone=raw.get("Placement", {}).get("AvailabilityZone", ""),
        capacity_type=_capacity_type(raw),
        capacity_reservation_id=raw.get("CapacityReservationId"),
        state=raw.get("State", {}).get("Name", "pending"),
    )


def _managed(raw: Mapping[str, Any]) -> ManagedInstance:
    launched_at = raw.get("LaunchTime")
    return ManagedInstance(
        instance_id=raw["InstanceId"],
        instance_type=raw["InstanceType"],
        state=raw.get("State", {}).get("Name"),
        zone=raw.get("Placement", {}).get("AvailabilityZone"),
        capacity_type=_capacity_type(raw),
        capacity_reservation_id=raw.get("CapacityReservationId"),
        launched_at=launched_at if isinstance(launched_at, datetime) else None,
        tags={t["Key"]: t["Value"] for t in raw.get("Tags", [])},
    )


def _domain_error(operation: str, error: ClientError) -> Exception:
    code = error_code(error)
    kind = classify(code)
    if kind.retryable:
        return retryable_error(operation, code, kind)
    return LaunchFailed(code, error_message(error))
