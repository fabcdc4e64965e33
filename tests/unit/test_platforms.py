"""Issue 12.5: an image's reservation platform, from its billing fields (pure domain)."""

from __future__ import annotations

import pytest

from capacity_launcher.domain.capacity.platforms import (
    LINUX,
    platform_mismatches,
    reservation_platform,
)
from capacity_launcher.domain.capacity.reservations import ReservationSnapshot


@pytest.mark.parametrize(
    ("details", "usage", "expected"),
    [
        ("Linux/UNIX", "RunInstances", LINUX),
        ("Red Hat Enterprise Linux", "RunInstances:0010", "Red Hat Enterprise Linux"),
        ("Red Hat Enterprise Linux with HA", "RunInstances:1010", "RHEL with HA"),
        ("SUSE Linux", "RunInstances:000g", "SUSE Linux"),
        ("Ubuntu Pro", "RunInstances:0g00", "Ubuntu Pro"),
        ("Windows", "RunInstances:0002", "Windows"),
        ("Windows with SQL Server Web", "RunInstances:0202", "Windows with SQL Server Web"),
        ("Red Hat Enterprise Linux", None, "Red Hat Enterprise Linux"),
        (None, None, None),
        ("Something new", "RunInstances:9999", None),
    ],
)
def test_reservation_platform_follows_the_billing_code(
    details: str | None, usage: str | None, expected: str | None
) -> None:
    assert reservation_platform(details, usage) == expected


def _reservation(reservation_id: str, platform: str) -> ReservationSnapshot:
    return ReservationSnapshot(
        reservation_id, "m5.large", "us-east-1a", "active", 1, 1, platform=platform
    )


def test_only_named_reservations_of_another_platform_are_mismatches() -> None:
    reservations = [
        _reservation("cr-named-linux", LINUX),
        _reservation("cr-named-rhel", "Red Hat Enterprise Linux"),
        _reservation("cr-tagged-linux", LINUX),
    ]

    found = platform_mismatches(
        reservations, "Red Hat Enterprise Linux", {"cr-named-linux", "cr-named-rhel"}
    )

    assert [(m.reservation_id, m.reservation_platform) for m in found] == [
        ("cr-named-linux", LINUX)
    ]
