"""EC2 capacity for moto: Capacity Reservations and groups, finite pools, faults and latency.

Call `install()` once; afterwards `mock_aws()` and moto servers serve it all.
"""

from .control import (
    advance_clock,
    inject_fault,
    register_image,
    reset,
    set_capacity,
    set_consistency,
    set_latency,
    set_transaction_conflicts,
    state,
)
from .registration import install

__all__ = [
    "advance_clock",
    "inject_fault",
    "install",
    "register_image",
    "reset",
    "set_capacity",
    "set_consistency",
    "set_latency",
    "set_transaction_conflicts",
    "state",
]
