"""What the service remembers of each instance it launched (or adopted): one typed record.

The launcher writes one per instance; instance events release it exactly once; the sync's
reconciliation reads them and adopts instances a crashed worker never recorded.
adapters/instance_records.py maps it to and from its DynamoDB item.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Protocol, Self

from capacity_launcher.domain.quantities import Resources

RUNNING = "running"
# Recorded on an instance EC2 warned it will terminate (an interruptible reservation shrinks).
INTERRUPTED = "interrupted"


class Placed(Protocol):
    """Where an instance runs, as a fleet's answer (InstanceLanding) or EC2's description of a
    managed instance (ManagedInstance) spell it."""

    @property
    def instance_id(self) -> str: ...
    @property
    def instance_type(self) -> str: ...
    @property
    def zone(self) -> str | None: ...
    @property
    def capacity_type(self) -> str: ...
    @property
    def capacity_reservation_id(self) -> str | None: ...


@dataclass(frozen=True)
class InstanceRecord:
    instance_id: str
    instance_type: str
    capacity_type: str
    request_id: str | None = None
    node_pool: str | None = None
    node_class: str | None = None
    requester: str | None = None
    zone: str | None = None
    capacity_reservation_id: str | None = None
    # The size it counts against its pool's limits (zero when its type was not known).
    cpu: Decimal = Decimal(0)
    memory_mib: int = 0
    gpu: int = 0
    state: str = RUNNING
    launched_at: str | None = None
    # Set when reconciliation recorded it for a worker that crashed before recording it.
    adopted_at: str | None = None
    # Set by the stop or termination that released its usage (cleared when it starts again).
    released_at: str | None = None
    # The request's own tags (not the NodeClass's): what its instances carry besides ours, so the
    # sync's reconciliation can put them back on an instance a shared fleet left without them.
    request_tags: dict[str, str] = field(default_factory=dict)
    # Its request's priority at launch (the PriorityClass's value, else its quota's, else 0), so
    # a waiting request's preemption can choose among instances (issue 37). None: not recorded.
    priority: int | None = None
    # Its request's `capacityBlockEnd` opt-in and what a replacement repeats of the request
    # (domain/capacity/request_block_ends.py): set only for a request that opted in.
    block_end: dict[str, Any] | None = None

    @classmethod
    def placed(cls, where: Placed, resources: Resources, **owner: Any) -> Self:
        """The record of an instance placed `where`, counted for `resources`; `owner`: its
        request, pool, class and requester, and its times."""
        return cls(
            instance_id=where.instance_id,
            instance_type=where.instance_type,
            zone=where.zone,
            capacity_type=where.capacity_type,
            capacity_reservation_id=where.capacity_reservation_id,
            cpu=resources.cpu,
            memory_mib=resources.memory_mib,
            gpu=resources.gpu,
            **owner,
        )

    @property
    def resources(self) -> Resources:
        """What it counts against its pool's limits."""
        return Resources(cpu=self.cpu, memory_mib=self.memory_mib, gpu=self.gpu, instances=1)
