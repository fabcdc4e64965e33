"""The reservation lifecycle's settle (every call that may move a reservation makes one) looks
at the reservations changed since the last one and those whose next transition has come due,
not at every reservation (moto_capacity/ec2/models/settling.py)."""

import pickle
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from moto.core import DEFAULT_ACCOUNT_ID
from moto.ec2.models import ec2_backends

import moto_capacity
from moto_capacity.ec2.models import lifecycle
from moto_capacity.ec2.models.backend import capacity_backend


@pytest.fixture
def looked_at(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The id of each reservation settle looks at from now on, in turn."""
    looked: list[str] = []
    advance = lifecycle._advance

    def counted(backend: Any, reservation: Any, now: datetime) -> None:
        looked.append(reservation.id)
        advance(backend, reservation, now)

    monkeypatch.setattr(lifecycle, "_advance", counted)
    return looked


def _state(ec2: Any, rid: str) -> str:
    found = ec2.describe_capacity_reservations(CapacityReservationIds=[rid])
    return str(found["CapacityReservations"][0]["State"])


def test_a_new_reservation_is_looked_at_and_the_settled_ones_are_not(
    ec2: Any, reservation: Any, looked_at: list[str]
) -> None:
    # Given forty reservations, each active and settled
    for _ in range(40):
        reservation()
    looked_at.clear()

    # When one more is made, and then read
    rid = reservation()["CapacityReservationId"]
    assert _state(ec2, rid) == "active"

    # Then only it was looked at, once, when it was made
    assert looked_at == [rid]


def test_a_reservation_waiting_for_its_end_is_looked_at_when_it_comes_or_it_changes(
    ec2: Any, reservation: Any, looked_at: list[str]
) -> None:
    # Given reservations that end a minute after their end date, one ending in a minute
    moto_capacity.set_lifecycle(end_date_lag_seconds=60)
    others = [reservation()["CapacityReservationId"] for _ in range(3)]
    rid = reservation()["CapacityReservationId"]
    end = datetime.now(UTC) + timedelta(seconds=60)
    ec2.modify_capacity_reservation(CapacityReservationId=rid, EndDateType="limited", EndDate=end)
    looked_at.clear()

    # When its end date passes, then it is neither looked at nor ended before its lag is over
    moto_capacity.advance_clock(90)
    assert _state(ec2, rid) == "active"
    assert looked_at == []
    # and a change to it is looked at at once
    ec2.modify_capacity_reservation(CapacityReservationId=rid, InstanceCount=3)
    assert looked_at == [rid]
    # and when the lag is over it expires, the others untouched
    moto_capacity.advance_clock(40)
    assert _state(ec2, rid) == "expired"
    assert looked_at == [rid, rid]
    assert {_state(ec2, other) for other in others} == {"active"}


def test_a_new_lag_looks_at_every_reservation_again(
    ec2: Any, reservation: Any, looked_at: list[str]
) -> None:
    # Given a reservation ending in a minute, EC2 taking ten minutes after that
    moto_capacity.set_lifecycle(end_date_lag_seconds=600)
    rid = reservation()["CapacityReservationId"]
    end = datetime.now(UTC) + timedelta(seconds=60)
    ec2.modify_capacity_reservation(CapacityReservationId=rid, EndDateType="limited", EndDate=end)
    moto_capacity.advance_clock(120)
    assert _state(ec2, rid) == "active"

    # When EC2 takes no time after the end date any more
    moto_capacity.set_lifecycle(end_date_lag_seconds=0)

    # Then the reservation is expired at the next look
    assert _state(ec2, rid) == "expired"


def test_a_copy_by_pickle_keeps_every_reservation_and_settles_them(
    ec2: Any, reservation: Any, looked_at: list[str]
) -> None:
    # Given a backend holding two reservations (a local cloud keeps its backends pickled)
    made = [reservation()["CapacityReservationId"] for _ in range(2)]
    table = capacity_backend(ec2_backends[DEFAULT_ACCOUNT_ID]["us-east-1"]).reservations

    # When its table of reservations is copied by pickle
    copy = pickle.loads(pickle.dumps(table))

    # Then the copy holds them, in order, and its first settle looks at each once
    assert list(copy) == made
    looked_at.clear()
    lifecycle.settle(SimpleNamespace(reservations=copy, interruptions=[]))
    assert looked_at == made
