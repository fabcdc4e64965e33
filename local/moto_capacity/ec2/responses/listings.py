"""Listings as strict as EC2's: the limits and paging moto leaves out.

- DescribeInstanceTypes takes at most 100 `InstanceTypes` (EC2 API Reference,
  https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeInstanceTypes.html); moto
  answers any number.
- DescribeLaunchTemplates pages: `MaxResults` 1 to 200, the rest after the `NextToken` it answers
  (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeLaunchTemplates.html); moto
  cuts the listing at `MaxResults` (15 when absent) and never answers a token.
- DescribeImages refuses an id that is not `ami-` and 8 or 17 hexadecimal digits as
  `InvalidAMIID.Malformed` (Error codes for the Amazon EC2 API,
  https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html); moto answers
  `InvalidAMIID.NotFound` for any id it does not have.
- DescribeInstanceTypes answers moto's catalogue, a class attribute no backend changes: the same
  request gets the same answer, so each distinct request's serialized answer is kept and given
  again (serializing the region's 1,395 types took 1.5 s of CPU a call; a sync lists them all).
  DescribeInstanceTypeOfferings likewise: moto answers it from a module table no backend changes
  (each cold launcher and each sync's resolution lists two zones' offerings: 24 ms a call).
  A request whose answer is kept is not worked out by moto again either (moto filters the
  region's offerings table on each call: a third of an offerings call); one whose answer is not
  kept yet is, in the call, so that moto's refusals are raised as moto raises them.
  `serialize_catalogue_ahead()` serializes the whole listing's answer before any call (the
  simulation's fork server, before it forks its runs: tests/simulation/fork_server.py).
`ec2.hooks` copies these methods onto moto's `EC2Response`.
"""

from collections.abc import Callable
from typing import Any

from moto import settings
from moto.core.common_types import TYPE_RESPONSE
from moto.core.request import determine_request_protocol
from moto.core.responses import ActionContext, ActionResult
from moto.core.serialize import get_serializer_class
from moto.core.utils import get_service_model
from moto.ec2.exceptions import MalformedAMIIdError
from moto.ec2.models import EC2Backend
from moto.ec2.models import instance_types as moto_instance_types
from moto.ec2.responses import EC2Response
from moto.ec2.responses.amis import AmisResponse
from moto.ec2.responses.instances import InstanceResponse
from moto.ec2.responses.launch_templates import LaunchTemplates

from moto_capacity.core import request_ids
from moto_capacity.ec2.exceptions import InvalidParameterValue
from moto_capacity.ec2.models.launches import malformed_image
from moto_capacity.ec2.responses.paging import page

MAX_INSTANCE_TYPES = 100
MAX_LAUNCH_TEMPLATES_PAGE = 200
# DescribeInstanceTypes' serialized answers, by what the request asked (names, filters).
_CATALOGUE_ANSWERS: dict[tuple[Any, ...], TYPE_RESPONSE] = {}
# moto's own offerings tables, by (location type, region), as it loaded them.
_MOTO_OFFERINGS: dict[tuple[str, str], object] = {
    (location_type, region): table
    for location_type, regions in moto_instance_types.INSTANCE_TYPE_OFFERINGS.items()
    for region, table in regions.items()
}


class CatalogueAnswer(ActionResult):
    """An answer drawn from moto's static catalogue: serialized once per distinct request (and
    response format), a copy of it given each time after. `later`: how moto works the answer
    out, for a request whose answer is kept (called only if, after all, it is not)."""

    def __init__(
        self,
        request: tuple[Any, ...],
        result: object = None,
        *,
        later: Callable[[], ActionResult] | None = None,
    ) -> None:
        super().__init__(result)
        self._request = request
        self._later = later

    @property
    def result(self) -> object:
        if self._later is not None:
            self._result, self._later = self._later().result, None
        return self._result

    def execute_result(self, context: ActionContext) -> TYPE_RESPONSE:
        key = _answer_key(self._request, context.serializer_class, context.operation_model.name)
        answer = _CATALOGUE_ANSWERS.get(key)
        if answer is None:
            answer = _CATALOGUE_ANSWERS[key] = super().execute_result(context)
            request_ids.kept(answer[2])
        status, headers, body = answer
        return status, dict(headers), body


def _answer_key(request: tuple[Any, ...], serializer: type, operation: str) -> tuple[Any, ...]:
    return (request, serializer, operation, settings.PRETTIFY_RESPONSES)


# What botocore's EC2 client sends: a form, answered in moto's `ec2` protocol.
_FORM = "application/x-www-form-urlencoded; charset=utf-8"


def serialize_catalogue_ahead() -> TYPE_RESPONSE:
    """The answer to DescribeInstanceTypes with no names and no filters (every type: what a sync
    lists), serialized now and kept, as the first such call would keep it; no backend made.
    Returns it (status, headers, body) as such a call answers it."""
    service_model = get_service_model("ec2")
    operation_model = service_model.operation_model("DescribeInstanceTypes")
    serializer = get_serializer_class("ec2", determine_request_protocol(service_model, _FORM))
    # Only the response class's attributes are read (its response transformers).
    response = EC2Response.__new__(EC2Response)
    context = ActionContext(service_model, operation_model, serializer, response)
    answer = CatalogueAnswer(((), ()), {"InstanceTypes": EC2Backend.instance_types})
    return answer.execute_result(context)


class StrictListingResponse(InstanceResponse, LaunchTemplates, AmisResponse):
    def describe_instance_types(self) -> ActionResult:
        names = self._get_param("InstanceTypes", [])
        if len(names) > MAX_INSTANCE_TYPES:
            raise InvalidParameterValue(
                f"The parameter InstanceTypes must contain at most {MAX_INSTANCE_TYPES} values; "
                f"{len(names)} were given."
            )
        if self.ec2_backend.instance_types is not type(self.ec2_backend).instance_types:
            # a backend given its own catalogue: answered as moto does
            return InstanceResponse.describe_instance_types(self)
        filters = self._filters_from_querystring()
        request = (
            tuple(names),
            tuple(sorted((name, tuple(values)) for name, values in filters.items())),
        )
        return self._catalogue(request, lambda: InstanceResponse.describe_instance_types(self))

    def describe_instance_type_offerings(self) -> ActionResult:
        location_type = self._get_param("LocationType") or "region"
        region = self.ec2_backend.region_name
        table = moto_instance_types.INSTANCE_TYPE_OFFERINGS.get(location_type, {}).get(region)
        if table is None or table is not _MOTO_OFFERINGS.get((location_type, region)):
            # a table put in place of moto's: answered as moto does
            return InstanceResponse.describe_instance_type_offerings(self)
        filters = self._filters_from_querystring()
        request = (
            "offerings",
            region,
            location_type,
            tuple(sorted((name, tuple(values)) for name, values in filters.items())),
        )
        return self._catalogue(
            request, lambda: InstanceResponse.describe_instance_type_offerings(self)
        )

    def _catalogue(
        self, request: tuple[Any, ...], answer: Callable[[], ActionResult]
    ) -> CatalogueAnswer:
        """moto's answer to a catalogue request: worked out now (moto's refusals raised as it
        raises them), unless an answer to it is kept, in the format this call answers in."""
        service_model = get_service_model(self.boto3_service_name)
        protocol = self.determine_response_protocol(service_model)
        serializer = get_serializer_class(service_model.service_name, protocol)
        if _answer_key(request, serializer, self._get_action()) in _CATALOGUE_ANSWERS:
            return CatalogueAnswer(request, later=answer)
        return CatalogueAnswer(request, answer().result)

    def describe_launch_templates(self) -> ActionResult:
        self.error_on_dryrun()
        max_results = self._get_int_param("MaxResults")
        if max_results is not None and not 1 <= max_results <= MAX_LAUNCH_TEMPLATES_PAGE:
            raise InvalidParameterValue(
                f"Value ({max_results}) for parameter MaxResults is invalid. "
                f"Expecting a value between 1 and {MAX_LAUNCH_TEMPLATES_PAGE}."
            )
        next_token = self._get_param("NextToken")
        # moto's answer of every template (its own cut at MaxResults lifted), then one page.
        everything = str(1 << 30)
        self.querystring["MaxResults"] = [everything]
        self.params["MaxResults"] = everything
        answer = LaunchTemplates.describe_launch_templates(self)
        result: dict[str, object] = answer.result  # type: ignore[assignment]
        listed, next_token = page(
            list(result["LaunchTemplates"]),  # type: ignore[call-overload]
            max_results,
            next_token,
        )
        result["LaunchTemplates"] = listed
        if next_token is not None:
            result["NextToken"] = next_token
        return answer

    def describe_images(self) -> ActionResult:
        malformed = [i for i in self._get_param("ImageIds", []) if malformed_image(i)]
        if malformed:
            raise MalformedAMIIdError(malformed)
        return AmisResponse.describe_images(self)
