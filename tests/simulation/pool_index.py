"""The NodePools' weight-ordered index (issue 38) against the partition it copies, every step.

Requests naming no pool read the index a page at a time (docs/architecture.md, *Configuration
reads*), so a copy missing, stale or left behind would send one elsewhere than the stored pools
do. The invariant (docs/simulation.md): **the NodePools' index says what the pools are**: while
the generation item says the index is complete (`indexed` equal to `version`), each stored pool
has one copy, under its weight's sort key, of its stored document, and there is no other copy;
judged on what moto stores (no call), after every step's applies, deletes and faults.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from capacity_launcher.adapters.config_items import (
    POOL_INDEX_PK,
    POOL_INDEXED,
    POOL_SET_KEY,
    pool_index_key,
)

if TYPE_CHECKING:
    from tests.simulation.invariants import Invariants

INDEX_HOLDS = "the NodePools' index says what the pools are"


def index_holds(invariants: Invariants) -> None:
    world = invariants.world
    generation = world.partition(POOL_SET_KEY[0]).get(POOL_SET_KEY[1], {})
    if POOL_INDEXED not in generation or generation[POOL_INDEXED] != generation.get("version"):
        return  # not complete: readers list the partition (its next apply writes it)
    invariants.checks[INDEX_HOLDS] += 1
    pools = world.partition("NodePool")
    wanted = {pool_index_key({"sk": name, **item}): name for name, item in pools.items()}
    wanted.pop(None, None)  # a body without a name and weight is never chosen
    copies = world.partition(POOL_INDEX_PK)
    for sort_key, copy in sorted(copies.items()):
        name = wanted.get(sort_key)
        if name is None:
            invariants._violate(INDEX_HOLDS, f"copy {sort_key} of no stored pool at this weight")
        elif copy.get("document") != pools[name].get("document"):
            invariants._violate(INDEX_HOLDS, f"copy {sort_key} is not pool {name}'s document")
    for sort_key, name in sorted(wanted.items()):
        if sort_key not in copies:
            invariants._violate(INDEX_HOLDS, f"pool {name} has no copy at {sort_key}")
