"""Settings come from the environment (the template's variables), any field given overrides it."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from capacity_launcher.settings import Settings, get_settings

REQUIRED = {
    "STATE_TABLE_NAME": "state",
    "UNAVAILABLE_OFFERINGS_TABLE_NAME": "ice",
    "IDEMPOTENCY_TABLE_NAME": "idem",
    "EVENT_BUS_NAME": "bus",
}


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in Settings.model_fields:
        monkeypatch.delenv(name.upper(), raising=False)
    for name, value in REQUIRED.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    yield monkeypatch
    get_settings.cache_clear()


def test_each_field_is_read_from_its_environment_variable(environment):
    environment.setenv("ICE_TTL_SECONDS", "240")
    environment.setenv("config_cache_seconds", "2.5")  # any case, as pydantic-settings reads
    settings = get_settings()
    assert settings.state_table_name == "state"
    assert settings.event_bus_name == "bus"
    assert settings.ice_ttl_seconds == 240
    assert settings.config_cache_seconds == 2.5
    assert settings.record_retention_days == 30  # the default when unset


def test_a_field_given_wins_over_the_environment_and_the_rest_still_come_from_it(environment):
    environment.setenv("ICE_TTL_SECONDS", "240")
    settings = Settings(
        state_table_name="other",
        unavailable_offerings_table_name="ice2",
        idempotency_table_name="idem2",
        event_bus_name="bus2",
        limit_lease_seconds=600,
    )
    assert (settings.state_table_name, settings.limit_lease_seconds) == ("other", 600)
    assert settings.ice_ttl_seconds == 240


def test_a_missing_or_bad_variable_is_an_error_naming_the_field_and_the_rule(environment):
    environment.delenv("EVENT_BUS_NAME")
    environment.setenv("ICE_TTL_SECONDS", "0")
    with pytest.raises(ValidationError) as raised:
        get_settings()
    problems = {e["loc"][0]: e["type"] for e in raised.value.errors()}
    assert problems == {"event_bus_name": "missing", "ice_ttl_seconds": "greater_than_equal"}
