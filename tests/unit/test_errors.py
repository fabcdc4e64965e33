"""Error classification and the domain's exceptions."""

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from capacity_launcher.domain.aws_errors import (
    INSUFFICIENT_CAPACITY_CODES,
    SPOT_UNAVAILABLE_CODES,
    THROTTLING_CODES,
    ErrorKind,
    classify,
    is_insufficient_capacity,
    is_launch_template_gone,
    is_throttling,
    may_be_gone_instances,
)
from capacity_launcher.domain.errors import (
    CapacityLauncherError,
    ConfigConflict,
    ConfigValidationError,
    InvalidLaunchRequest,
    LaunchFailed,
    NotFound,
    RequestRejected,
    RequirementsConflict,
    Throttled,
)
from capacity_launcher.domain.field_errors import FieldError, bounded, field_errors, field_path

DESIGN_ICE_CODES = {
    "InsufficientInstanceCapacity",
    "ReservationCapacityExceeded",
    "UnfulfillableCapacity",
    "MaxSpotInstanceCountExceeded",
    "VcpuLimitExceeded",
    "Unsupported",
    "InsufficientFreeAddressesInSubnet",
    "MaxFleetCountExceeded",
}


def test_insufficient_capacity_codes_are_exactly_designs_eight() -> None:
    assert set(INSUFFICIENT_CAPACITY_CODES) == DESIGN_ICE_CODES


@pytest.mark.parametrize("code", sorted(DESIGN_ICE_CODES))
def test_every_ice_code_classifies_as_insufficient_capacity(code: str) -> None:
    assert classify(code) is ErrorKind.INSUFFICIENT_CAPACITY
    assert is_insufficient_capacity(code)
    assert not is_throttling(code)


@pytest.mark.parametrize(
    "code",
    [
        "RequestLimitExceeded",
        "Throttling",
        "ThrottlingException",
        "SlowDown",
        "ProvisionedThroughputExceededException",
        "TooManyRequestsException",
        "RequestThrottled",
    ],
)
def test_throttling_codes_classify_as_throttling(code: str) -> None:
    assert code in THROTTLING_CODES
    assert classify(code) is ErrorKind.THROTTLING
    assert not is_insufficient_capacity(code)


@pytest.mark.parametrize(
    "code",
    [
        "UnauthorizedOperation",
        "InvalidParameterValue",
        "InvalidAMIID.NotFound",
        "LimitExceededException",
        "",
        "insufficientinstancecapacity",
    ],
)
def test_anything_else_is_fatal(code: str) -> None:
    assert classify(code) is ErrorKind.FATAL


def test_no_spot_service_linked_role_makes_spot_unavailable_not_fatal() -> None:
    # Karpenter (pkg/errors) treats it so: spot is unavailable for the account, not an error.
    code = "AuthFailure.ServiceLinkedRoleCreationNotPermitted"
    assert {code} == SPOT_UNAVAILABLE_CODES
    assert classify(code) is ErrorKind.SPOT_UNAVAILABLE


def test_code_sets_do_not_overlap() -> None:
    assert not INSUFFICIENT_CAPACITY_CODES & THROTTLING_CODES


def test_field_error_reads_field_then_rule() -> None:
    error = FieldError("spec.capacityReservationSpec", "cannot be empty")

    assert str(error) == "spec.capacityReservationSpec: cannot be empty"
    assert error.to_dict() == {"field": "spec.capacityReservationSpec", "rule": "cannot be empty"}
    with pytest.raises(AttributeError):
        error.field = "other"  # type: ignore[misc]


def test_validation_errors_carry_their_field_errors_and_read_as_them() -> None:
    errors = [FieldError("a", "is required"), FieldError("b.c", "must be positive")]

    config = ConfigValidationError(errors)
    request = InvalidLaunchRequest("req-1", errors)

    assert config.errors == errors
    assert str(config) == "a: is required; b.c: must be positive"
    assert request.request_id == "req-1"
    assert request.errors == errors
    assert request.code == "InvalidLaunchRequest"
    assert request.message == str(request)


@pytest.mark.parametrize(
    "error",
    [
        ConfigValidationError([]),
        InvalidLaunchRequest(None, []),
        RequestRejected("unknown node pool"),
        RequirementsConflict("x"),
        LaunchFailed("UnauthorizedOperation", "not allowed"),
        Throttled("CreateFleet"),
        NotFound("NodePool", "gpu"),
        ConfigConflict("NodeClass p5 is used by NodePool gpu"),
    ],
)
def test_every_domain_exception_is_a_capacity_launcher_error_with_a_code(
    error: CapacityLauncherError,
) -> None:
    assert isinstance(error, CapacityLauncherError)
    assert error.code
    assert str(error)


def test_requirements_conflict_is_a_rejection_naming_its_keys() -> None:
    conflict = RequirementsConflict("requirements[k]: no", keys=["k"])

    assert isinstance(conflict, RequestRejected)
    assert conflict.reason == "requirements[k]: no"
    assert conflict.keys == ("k",)
    assert conflict.code == "RequirementsConflict"


def test_request_rejected_defaults_its_code() -> None:
    assert RequestRejected("unknown node pool gpu").code == "Rejected"
    assert RequestRejected("too big", code="ExceedsLimits").code == "ExceedsLimits"


def test_launch_failed_keeps_ec2_code_and_message_apart() -> None:
    failed = LaunchFailed("InvalidAMIID.NotFound", "The image id does not exist")

    assert failed.code == "InvalidAMIID.NotFound"
    assert failed.message == "The image id does not exist"
    assert "InvalidAMIID.NotFound" in str(failed)


def test_throttled_names_operation_and_code() -> None:
    throttled = Throttled("CreateFleet", "RequestLimitExceeded")

    assert (throttled.operation, throttled.code) == ("CreateFleet", "RequestLimitExceeded")
    assert "CreateFleet" in str(throttled)


def test_not_found_names_kind_and_name() -> None:
    missing = NotFound("NodePool", "gpu-training")

    assert (missing.kind, missing.name) == ("NodePool", "gpu-training")
    assert str(missing) == "NodePool 'gpu-training' not found"


@pytest.mark.parametrize(
    ("loc", "expected"),
    [
        (("spec", "capacityReservationSpec"), "spec.capacityReservationSpec"),
        (("spec", "requirements", 0, "key"), "spec.requirements[0].key"),
        (("spec", "limits", "nvidia.com/gpu"), "spec.limits[nvidia.com/gpu]"),
        (("tags", "aws:x", "[key]"), "tags[aws:x]"),
        ((), "body"),
    ],
)
def test_field_path_reads_like_the_document(loc: tuple[int | str, ...], expected: str) -> None:
    assert field_path(loc) == expected


class _Sample(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    size: int

    @field_validator("size")
    @classmethod
    def _positive(cls, size: int) -> int:
        if size <= 0:
            raise ValueError("must be positive")
        return size


def test_field_errors_translate_pydantic_messages_into_rules() -> None:
    with pytest.raises(ValidationError) as caught:
        _Sample.model_validate({"size": 0, "extra": 1})

    errors = field_errors(caught.value)

    assert FieldError("name", "is required") in errors
    assert FieldError("size", "must be positive") in errors
    assert FieldError("extra", "is not an allowed field") in errors


def test_field_errors_can_root_the_path() -> None:
    with pytest.raises(ValidationError) as caught:
        _Sample.model_validate({"name": "x", "size": "big"})

    (error,) = field_errors(caught.value, root="detail")

    assert error.field == "detail.size"
    assert "integer" in error.rule


def test_bounded_keeps_the_first_errors_and_counts_the_rest() -> None:
    errors = [FieldError(f"f{i}", "is required") for i in range(5)]

    assert bounded(errors, 5) == errors
    assert bounded(errors, 2) == [*errors[:2], FieldError("body", "and 3 more errors")]


@pytest.mark.parametrize("code", ["InternalError", "InternalFailure", "ServiceUnavailable",
                                  "Unavailable", "TransactionConflictException",
                                  "InternalServerErrorException"])  # fmt: skip
def test_service_faults_and_conflicts_are_transient_not_fatal(code: str) -> None:
    assert classify(code) is ErrorKind.TRANSIENT
    assert classify(code).retryable


@pytest.mark.parametrize(
    ("reasons", "kind"),
    [
        (["None", "TransactionConflict"], ErrorKind.TRANSIENT),
        (["ThrottlingError", "None"], ErrorKind.THROTTLING),
        (["ConditionalCheckFailed", "TransactionConflict"], ErrorKind.FATAL),
        (["None", "ConditionalCheckFailed"], ErrorKind.FATAL),
        ([], ErrorKind.FATAL),
    ],
)
def test_a_cancelled_transaction_is_classified_by_its_reasons(
    reasons: list[str], kind: ErrorKind
) -> None:
    assert classify("TransactionCanceledException", reasons) is kind


def test_node_class_refusals_name_the_field() -> None:
    from capacity_launcher.domain.apis.documents import parse_document
    from capacity_launcher.domain.aws_errors import refused_by_aws
    from capacity_launcher.domain.errors import NodeClassRefused, Transient

    klass = parse_document(
        {
            "apiVersion": "capacity-launcher/v1",
            "kind": "NodeClass",
            "metadata": {"name": "gpu"},
            "spec": {
                "imageSsmParameter": "/x",
                "subnetIds": ["subnet-0123456789abcdef0"],
                "securityGroupIds": ["sg-0123456789abcdef0"],
            },
        }
    )
    missing = refused_by_aws("GetParameter", "ParameterNotFound", "no such", klass)
    assert isinstance(missing, NodeClassRefused)
    assert missing.field == "spec.imageSsmParameter"
    assert missing.message.startswith("spec.imageSsmParameter: NodeClass gpu: ")
    denied = refused_by_aws(
        "DescribeSubnets", "UnauthorizedOperation", "no", klass, "spec.subnetIds"
    )
    assert isinstance(denied, NodeClassRefused) and denied.field == "spec.subnetIds"
    assert isinstance(refused_by_aws("DescribeSubnets", "InternalError", "", klass), Transient)


def test_a_launch_template_deleted_under_the_launcher_is_worth_a_retry() -> None:
    # The sync's template lifecycle may delete a template a warm launcher remembers; the retry
    # creates it again under the same name.
    for code in ("InvalidLaunchTemplateName.NotFoundException", "InvalidLaunchTemplateId.NotFound"):
        assert is_launch_template_gone(code)
        assert classify(code) is ErrorKind.TRANSIENT


def test_termination_refusals_that_one_gone_instance_causes() -> None:
    # InvalidInstanceID.NotFound (EC2 forgot it) and UnauthorizedOperation (the tag-scoped
    # policy finds no tag on it): the ids are looked up; other refusals stand.
    assert may_be_gone_instances("InvalidInstanceID.NotFound")
    assert may_be_gone_instances("UnauthorizedOperation")
    assert not may_be_gone_instances("OperationNotPermitted")
    assert classify("UnauthorizedOperation") is ErrorKind.FATAL
