"""What the service remembers of each instance it launched (or adopted): one typed record.

The launcher writes one per instance; instance events release it exactly once; the sync's
reconciliation reads them and adopts instances a crashed worker never recorded.
adapters/instance_records.py maps it to and from its DynamoDB item.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from capacity_launcher.domain.quantities import Resources

RUNNING = "running"
# Recorded on an instance EC2 warned it will terminate (an interruptible reservation shrinks).
INTERRUPTED = "interrupted"


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

    @property
    def resources(self) -> Resources:
        """What it counts against its pool's limits."""
        return Resources(cpu=self.cpu, memory_mib=self.memory_mib, gpu=self.gpu, instances=1)
