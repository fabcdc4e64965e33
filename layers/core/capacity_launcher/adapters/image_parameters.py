"""The image id a NodeClass's `imageSsmParameter` (or `arm64ImageSsmParameter`, or one of its
`acceleratedImageSsmParameters`) names, read with
Powertools parameters and kept by a warm container for IMAGE_PARAMETER_TTL_SECONDS (it was read
on every launch attempt).

The launcher's role may read only AWS's public parameters (`/aws/service/*`, template.yaml);
any other name is refused by IAM and fails the request naming `spec.imageSsmParameter`.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from capacity_launcher.adapters.aws import client, domain_error
from capacity_launcher.domain.apis.config import NodeClass

if TYPE_CHECKING:  # pragma: no cover - typing only
    from aws_lambda_powertools.utilities.parameters import SSMProvider

# AWS updates a "recommended"/"latest" image parameter on releases, days apart: minutes of
# staleness cost nothing, and a burst of launches reads SSM once.
IMAGE_PARAMETER_TTL_SECONDS = 300
_FIELD = "spec.imageSsmParameter"
ARM64_FIELD = "spec.arm64ImageSsmParameter"
ACCELERATED_FIELD = "spec.acceleratedImageSsmParameters"


class ImageParameters:
    def __init__(self, ssm: Any | None = None, max_age: int = IMAGE_PARAMETER_TTL_SECONDS) -> None:
        self._ssm = ssm
        self._max_age = max_age
        self._provider: SSMProvider | None = None
        self._lock = threading.Lock()

    def image_id(self, node_class: NodeClass) -> str:
        """The parameter's value; Throttled/Transient, or NodeClassRefused naming the field."""
        name = node_class.spec.image_ssm_parameter
        assert name is not None
        return self._read(name, node_class, _FIELD)

    def arm64_image_id(self, node_class: NodeClass) -> str | None:
        """`arm64ImageSsmParameter`'s value (None when the class has none), read and cached
        the same way."""
        name = node_class.spec.arm64_image_ssm_parameter
        return None if name is None else self._read(name, node_class, ARM64_FIELD)

    def accelerated_image_id(self, node_class: NodeClass, index: int) -> str:
        """The value of the class's `index`th accelerated image parameter, read and cached the
        same way; the refusal names `spec.acceleratedImageSsmParameters[index]`."""
        accelerated = node_class.spec.accelerated_image_ssm_parameters or []
        name = accelerated[index].ssm_parameter
        return self._read(name, node_class, f"{ACCELERATED_FIELD}[{index}]")

    def _read(self, name: str, node_class: NodeClass, field: str) -> str:
        provider = self._parameters()
        from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError

        try:
            value = provider.get(name, max_age=self._max_age)
        except GetParameterError as error:
            # Powertools wraps every error inside its handler: the ClientError is the context.
            cause = error.__context__
            if not isinstance(cause, ClientError):
                raise
            refused = domain_error("GetParameter", cause, node_class=node_class, field=field)
            raise (refused or cause) from cause
        return str(value)

    def _parameters(self) -> SSMProvider:
        # On first use: a container whose NodeClasses name image ids never imports or makes one.
        with self._lock:
            if self._provider is None:
                from aws_lambda_powertools.utilities.parameters import SSMProvider

                self._provider = SSMProvider(boto3_client=self._ssm or client("ssm"))
            return self._provider
