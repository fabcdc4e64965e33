"""The order NodePools are tried in.

Karpenter tries NodePools by weight, highest first; equal weights here go alphabetically, so the
order is total and every launcher computes the same one. A store may hand the pools over a page
at a time in that order (the NodePools' weight-ordered index, adapters/pool_index.py, keyed by
`order_key`); the service reads those pages only as far as a request asks
(service/pool_listing.py: issue 38, items read flat in the pools).
"""

from __future__ import annotations

from typing import Protocol

# Karpenter's bounds on spec.weight (NodePoolSpec.weight: 0 to 100).
MAX_WEIGHT = 100


class _Spec(Protocol):
    @property
    def weight(self) -> int: ...


class _Metadata(Protocol):
    @property
    def name(self) -> str: ...


class Weighted(Protocol):
    """What the order reads of a NodePool (config.py's; not imported: it imports this)."""

    @property
    def spec(self) -> _Spec: ...

    @property
    def metadata(self) -> _Metadata: ...


def weight_order(pool: Weighted) -> tuple[int, str]:
    """A pool's place in the order pools are tried in: higher weight first, then by name."""
    return (-pool.spec.weight, pool.metadata.name)


def order_key(weight: int, name: str) -> str:
    """The same order as a string (an index's sort key): the weight's complement, zero-padded,
    then the name (DynamoDB sorts strings by their UTF-8 bytes, which keeps code-point order)."""
    return f"{MAX_WEIGHT - weight:03d}#{name}"
