"""How a launch request associated with an OME reservation is counted (docs/ome.md).

A request naming ``capacityReservation: R`` with ``requester: A`` is counted as requester
``capacityreservation/R/A`` (``default`` without a requester). R's CapacityQuota covers every
requester with R's prefix, so each association's use is kept apart and shown by its name. A
quota holding R's prefix may list the associations it admits (``spec.associationRequesters``).
"""

ASSOCIATION_PREFIX = "capacityreservation/"
DEFAULT_ASSOCIATION = "default"


def association_prefix(reservation: str) -> str:
    return f"{ASSOCIATION_PREFIX}{reservation}/"


def association_requester(reservation: str, association: str | None) -> str:
    """The requester a launch request associated with ``reservation`` is counted as."""
    return association_prefix(reservation) + (association or DEFAULT_ASSOCIATION)


def association_of(reservation: str, requester: str) -> str | None:
    """The association name in a requester counted for ``reservation``, else None."""
    prefix = association_prefix(reservation)
    return requester[len(prefix) :] if requester.startswith(prefix) else None


def counted_association(requester: str | None) -> tuple[str, str] | None:
    """(reservation, association) of a requester counted as a reservation's association
    (``capacityreservation/R/A``), else None. A reservation's name is a DNS label: no slash."""
    if requester is None or not requester.startswith(ASSOCIATION_PREFIX):
        return None
    reservation, slash, association = requester[len(ASSOCIATION_PREFIX) :].partition("/")
    return (reservation, association) if reservation and slash and association else None


def prefix_reservation(prefix: str) -> str | None:
    """The reservation whose associations ``prefix`` covers (``capacityreservation/R/``), else
    None."""
    name = prefix.removeprefix(ASSOCIATION_PREFIX).removesuffix("/")
    return name if name and prefix == association_prefix(name) and "/" not in name else None
