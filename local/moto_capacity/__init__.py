"""EC2 capacity for moto: Capacity Reservations and groups, Capacity Blocks, future-dated and
interruptible reservations, finite pools, faults and latency.

Call `install()` once; afterwards `mock_aws()` and moto servers serve it all.
"""

from .controls.models import (
    advance_clock,
    inject_fault,
    instance_states,
    interrupt,
    register_image,
    reset,
    set_capacity,
    set_consistency,
    set_latency,
    set_launch_template_quota,
    set_lifecycle,
    set_reservation_state,
    set_status_checks,
    set_termination_scope,
    set_transaction_conflicts,
    state,
)
from .registration import install

__all__ = [
    "advance_clock",
    "inject_fault",
    "install",
    "instance_states",
    "interrupt",
    "register_image",
    "reset",
    "set_capacity",
    "set_consistency",
    "set_latency",
    "set_launch_template_quota",
    "set_lifecycle",
    "set_reservation_state",
    "set_status_checks",
    "set_termination_scope",
    "set_transaction_conflicts",
    "state",
]
