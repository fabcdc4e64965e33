"""The service's configuration: the environment, read once per container into one model.

A plain pydantic model that fills each field not given from its environment variable (the field's
name, any case), as pydantic-settings would: that package alone cost a cold start ~60 ms of CPU."""

import os
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    state_table_name: str
    unavailable_offerings_table_name: str
    idempotency_table_name: str
    event_bus_name: str
    ice_ttl_seconds: int = Field(default=180, ge=1, le=86_400)
    # Longer than the launch queue's whole retry window (maxReceiveCount x visibility timeout).
    idempotency_ttl_seconds: int = Field(default=86_400, ge=3_600)
    limit_lease_seconds: int = Field(default=900, ge=60)
    max_launch_attempts: int = Field(default=4, ge=1, le=10)
    utilization_high_threshold: float = Field(default=0.9, gt=0, le=1)
    expiring_horizon_hours: int = Field(default=72, ge=1)
    # Capacity Block Expiring: minutes before a block's end (EC2 terminates at 30 minutes before).
    block_expiring_minutes: int = Field(default=60, ge=31, le=1440)
    # Capacity Reservation Underutilized: utilization below this at every look for a whole period
    # (domain/capacity/idle_reservations.py).
    idle_utilization_threshold: float = Field(default=0.5, gt=0, le=1)
    idle_period_hours: float = Field(default=3.0, ge=0.25, le=24 * 14)
    # A warm container trusts its copy of the ICE cache for this long before reading DynamoDB again.
    ice_local_copy_seconds: float = Field(default=5.0, ge=0, le=60)
    # History (request records, intents, terminated instances' items) expires after this long.
    record_retention_days: int = Field(default=30, ge=2, le=3650)
    # How long a launcher's claim on an offering (single flight) holds others back if it dies.
    ice_claim_seconds: int = Field(default=20, ge=1, le=300)
    # A warm container trusts its copy of NodePools and NodeClasses for this long.
    config_cache_seconds: float = Field(default=10.0, ge=0, le=300)
    # The deployment's identity (template.yaml: AWS::StackName), tagged on everything it makes:
    # a stack adopts, sweeps and terminates only what carries its name (docs/contracts.md: Tags).
    stack_name: str | None = Field(default=None, min_length=1, max_length=128)
    # Whether resources made before they carried a stack (no capacity-launcher:stack tag) are
    # this stack's too (docs/operations.md: Two deployments in one account).
    claim_untagged_resources: bool = False
    # The launch queue, for the sync: static NodePools' launches (docs/static-capacity.md).
    launch_queue_url: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_environment(cls, given: Any) -> Any:
        """Every field not given, from the environment variable of its name (case-insensitive)."""
        if not isinstance(given, dict):
            return given
        environment = {k.lower(): v for k, v in os.environ.items()}
        found = {n: environment[n] for n in cls.model_fields if n in environment}
        return {**found, **given}


def retention_seconds(settings: Settings) -> int:
    return settings.record_retention_days * 24 * 3600


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings.model_validate({})  # every value from the environment
