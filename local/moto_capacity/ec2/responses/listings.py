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
`ec2.hooks` copies these methods onto moto's `EC2Response`.
"""

from moto.core.responses import ActionResult
from moto.ec2.exceptions import MalformedAMIIdError
from moto.ec2.responses.amis import AmisResponse
from moto.ec2.responses.instances import InstanceResponse
from moto.ec2.responses.launch_templates import LaunchTemplates

from moto_capacity.ec2.exceptions import InvalidParameterValue
from moto_capacity.ec2.models.launches import malformed_image
from moto_capacity.ec2.responses.paging import page

MAX_INSTANCE_TYPES = 100
MAX_LAUNCH_TEMPLATES_PAGE = 200


class StrictListingResponse(InstanceResponse, LaunchTemplates, AmisResponse):
    def describe_instance_types(self) -> ActionResult:
        names = self._get_param("InstanceTypes", [])
        if len(names) > MAX_INSTANCE_TYPES:
            raise InvalidParameterValue(
                f"The parameter InstanceTypes must contain at most {MAX_INSTANCE_TYPES} values; "
                f"{len(names)} were given."
            )
        return InstanceResponse.describe_instance_types(self)

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
