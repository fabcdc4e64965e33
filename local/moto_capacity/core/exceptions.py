"""The error an injected fault raises, in any service."""

from moto.core.exceptions import ServiceException


class InjectedError(ServiceException):
    """A fault injected into any operation; serialised in the protocol of the service called."""


# moto finds an error's service from its module name, and reads "moto_capacity" as a moto service.
InjectedError.__module__ = "capacity_errors"
