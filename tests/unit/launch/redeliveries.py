"""What a killed delivery leaves behind, arranged on a `FakeWorld` after a served request: the
states a redelivery's recovery step starts from (tests/unit/launch)."""

from __future__ import annotations

from dataclasses import replace

from tests.fakes.world import FakeWorld


def killed_after_intent(world: FakeWorld, request_id: str, pool: str = "default") -> None:
    """The request's delivery wrote its one intent and died before CreateFleet: the intent
    pending, its lease open, no record, nothing launched (EC2 forgets what it launched)."""
    (intent,) = world.records.intents.values()
    world.records.intents[intent.token] = replace(intent, state="pending", instance_ids=())
    del world.records.records[request_id]
    world.fleet = type(world.fleet)(world.templates, world.subnets)
    lease_open(world, request_id, pool)


def lease_open(world: FakeWorld, request_id: str, pool: str = "default") -> None:
    """The request's lease in `pool` open again, holding no member."""
    lease = world.leases.leases[(pool, request_id)]
    world.leases.leases[(pool, request_id)] = replace(lease, settled=False)
    world.leases.members.clear()
