"""EC2 errors this extension raises, with the codes AWS uses."""

from moto.ec2.exceptions import EC2ClientError


class InsufficientInstanceCapacity(EC2ClientError):
    code = "InsufficientInstanceCapacity"

    def __init__(self, instance_type: str, zone: str) -> None:
        super().__init__(
            f"We currently do not have sufficient {instance_type} capacity in the Availability "
            f"Zone you requested ({zone}). Our system will be working on provisioning "
            "additional capacity."
        )


class ReservationCapacityExceeded(EC2ClientError):
    code = "ReservationCapacityExceeded"

    def __init__(self, target: str) -> None:
        super().__init__(
            f"The targeted Capacity Reservation ({target}) does not have enough available "
            "instance capacity to fulfill your request."
        )


class CapacityReservationNotFound(EC2ClientError):
    code = "InvalidCapacityReservationId.NotFound"

    def __init__(self, reservation_id: str) -> None:
        super().__init__(f"The capacity reservation ID '{reservation_id}' does not exist")


class CapacityReservationIdMalformed(EC2ClientError):
    code = "InvalidCapacityReservationId.Malformed"

    def __init__(self, reservation_id: str) -> None:
        super().__init__(f'Invalid id: "{reservation_id}" (expecting "cr-...")')


class InvalidParameterValue(EC2ClientError):
    code = "InvalidParameterValue"


class InvalidParameterCombination(EC2ClientError):
    code = "InvalidParameterCombination"


class IncorrectState(EC2ClientError):
    code = "IncorrectState"


class UnsupportedOperation(EC2ClientError):
    code = "UnsupportedOperation"


class MissingParameter(EC2ClientError):
    code = "MissingParameter"


class IdempotentParameterMismatch(EC2ClientError):
    code = "IdempotentParameterMismatch"

    def __init__(self, client_token: str) -> None:
        super().__init__(
            f"The client token '{client_token}' was already used with different parameters."
        )


class InvalidNextToken(EC2ClientError):
    code = "InvalidNextToken"

    def __init__(self) -> None:
        super().__init__("The specified NextToken is not valid.")


# moto finds an error's service from its module name, and reads "moto_capacity" as a moto service.
for _error in EC2ClientError.__subclasses__():
    if _error.__module__ == __name__:
        _error.__module__ = "capacity_errors"


class InvalidIamInstanceProfile(EC2ClientError):
    """A launch template's IamInstanceProfile names a profile IAM does not have."""

    code = "InvalidParameterValue"

    def __init__(self, profile: str) -> None:
        super().__init__(
            f"Value ({profile}) for parameter iamInstanceProfile.name is invalid. "
            "Invalid IAM Instance Profile name"
        )
