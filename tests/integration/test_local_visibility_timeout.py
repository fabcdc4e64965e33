"""Issue 34, item 6: `local up --visibility-timeout 5` (docs/local-cloud.md) shortened the launch
queue's visibility below the launcher's 120 s timeout, which Lambda refuses for an SQS event
source. The idempotency claim a killed delivery leaves is held for its invocation's remaining
time, so every redelivery found it in progress until the message was dead-lettered without a
record. The launcher's local timeout now follows the queue's visibility, and `local up` says so."""

from __future__ import annotations

from tests.support.cloud import cloud_of, harness_options

LAUNCHER = "LauncherFunction"


def test_a_visibility_timeout_below_the_launchers_timeout_bounds_its_claims() -> None:
    options = harness_options(
        wire_functions=True,
        visibility_timeout_seconds=5,
        schedules=False,
        instance_events=False,
        port=0,  # any free port: 4566 may be another program's (or a parallel test's)
    )
    with cloud_of(options, capture_events=False) as cloud:
        launcher = cloud.local.functions[LAUNCHER]
        # Then the launcher runs within the queue's visibility (its context counts the remaining
        # time from it): a claim it takes, held for that time, lapses by the time a killed
        # delivery's message returns
        assert launcher.timeout_seconds == 5
        # and the change is said (`local up` prints it)
        [note] = cloud.local.adjustments
        assert f"{LAUNCHER}'s timeout lowered from 120 s" in note
        assert "visibility timeout, 5 s" in note
        # while the other functions keep the template's
        others = {f.timeout_seconds for n, f in cloud.local.functions.items() if n != LAUNCHER}
        assert 5 not in others


def test_a_visibility_timeout_the_launcher_fits_in_changes_nothing() -> None:
    options = harness_options(
        wire_functions=True,
        visibility_timeout_seconds=600,
        schedules=False,
        instance_events=False,
        port=0,
    )
    with cloud_of(options, capture_events=False) as cloud:
        assert cloud.local.functions[LAUNCHER].timeout_seconds == 120
        assert cloud.local.adjustments == []
