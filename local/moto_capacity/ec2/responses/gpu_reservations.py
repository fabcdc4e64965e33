"""EC2 wire format for Capacity Blocks and interruptible reservation allocations.

Behaviour lives in `capacity_blocks` and `interruptible`; these methods read parameters and
shape answers. `ec2.hooks` copies them onto moto's `EC2Response`.
"""

from moto.core.responses import ActionResult
from moto.ec2.responses._base_response import EC2BaseResponse
from moto.ec2.utils import convert_tag_spec

from moto_capacity.ec2.exceptions import MissingParameter
from moto_capacity.ec2.models import block_extensions, capacity_blocks, interruptible
from moto_capacity.ec2.models.backend import capacity_backend

from .capacity_reservations import PLATFORMS, _one_of
from .paging import page


class GpuReservationResponse(EC2BaseResponse):
    """DescribeCapacityBlockOfferings, PurchaseCapacityBlock, DescribeCapacityBlocks,
    DescribeCapacityBlockStatus, the extension actions (DescribeCapacityBlockExtensionOfferings,
    PurchaseCapacityBlockExtension, DescribeCapacityBlockExtensionHistory) and the interruptible
    allocation actions."""

    def _filters(self) -> dict[str, list[str]]:
        # moto types the filters as str values; they are lists of values.
        return dict(self._filters_from_querystring())  # type: ignore[arg-type]

    def _int_param(self, name: str) -> int | None:
        value = self._get_param(name)
        return None if value is None else int(value)

    def describe_capacity_block_offerings(self) -> ActionResult:
        self.error_on_dryrun()
        found = capacity_blocks.find_offerings(
            capacity_backend(self.ec2_backend),
            self._get_param("InstanceType"),
            self._int_param("InstanceCount"),
            self._int_param("CapacityDurationHours"),
            self._get_param("StartDateRange"),
            self._get_param("EndDateRange"),
        )
        listed, next_token = page(
            [offering.as_answer() for offering in found],
            self._int_param("MaxResults"),
            self._get_param("NextToken"),
        )
        return ActionResult({"CapacityBlockOfferings": listed, "NextToken": next_token})

    def purchase_capacity_block(self) -> ActionResult:
        self.error_on_dryrun()
        block = capacity_blocks.purchase(
            capacity_backend(self.ec2_backend),
            self._get_param("CapacityBlockOfferingId"),
            _one_of("InstancePlatform", self._get_param("InstancePlatform"), PLATFORMS),
            convert_tag_spec(self._get_param("TagSpecifications", [])),
        )
        return ActionResult(
            {"CapacityReservation": block.reservation, "CapacityBlocks": [block.as_answer()]}
        )

    def describe_capacity_blocks(self) -> ActionResult:
        self.error_on_dryrun()
        found = capacity_blocks.describe_blocks(
            capacity_backend(self.ec2_backend),
            self._get_param("CapacityBlockIds", []),
            self._filters(),
        )
        listed, next_token = page(
            [block.as_answer() for block in found],
            self._int_param("MaxResults"),
            self._get_param("NextToken"),
        )
        return ActionResult({"CapacityBlocks": listed, "NextToken": next_token})

    def describe_capacity_block_status(self) -> ActionResult:
        self.error_on_dryrun()
        filters = self._filters()
        wanted = filters.pop("interconnect-status", None)
        found = capacity_blocks.describe_blocks(
            capacity_backend(self.ec2_backend), self._get_param("CapacityBlockIds", []), filters
        )
        statuses = [block.status() for block in found]
        if wanted is not None:
            statuses = [s for s in statuses if s["InterconnectStatus"] in wanted]
        listed, next_token = page(
            statuses, self._int_param("MaxResults"), self._get_param("NextToken")
        )
        return ActionResult({"CapacityBlockStatuses": listed, "NextToken": next_token})

    def describe_capacity_block_extension_offerings(self) -> ActionResult:
        self.error_on_dryrun()
        found = block_extensions.find_offerings(
            capacity_backend(self.ec2_backend),
            self._get_param("CapacityReservationId"),
            self._int_param("CapacityBlockExtensionDurationHours"),
        )
        listed, next_token = page(
            [offering.as_answer() for offering in found],
            self._int_param("MaxResults"),
            self._get_param("NextToken"),
        )
        return ActionResult({"CapacityBlockExtensionOfferings": listed, "NextToken": next_token})

    def purchase_capacity_block_extension(self) -> ActionResult:
        self.error_on_dryrun()
        extension = block_extensions.purchase(
            capacity_backend(self.ec2_backend),
            self._get_param("CapacityBlockExtensionOfferingId"),
            self._get_param("CapacityReservationId"),
        )
        return ActionResult({"CapacityBlockExtensions": [extension.as_answer()]})

    def describe_capacity_block_extension_history(self) -> ActionResult:
        self.error_on_dryrun()
        found = block_extensions.history(
            capacity_backend(self.ec2_backend),
            self._get_param("CapacityReservationIds", []),
            self._filters(),
        )
        listed, next_token = page(
            [extension.as_answer() for extension in found],
            self._int_param("MaxResults"),
            self._get_param("NextToken"),
        )
        return ActionResult({"CapacityBlockExtensions": listed, "NextToken": next_token})

    def create_interruptible_capacity_reservation_allocation(self) -> ActionResult:
        self.error_on_dryrun()
        tags = convert_tag_spec(self._get_param("TagSpecifications", []))
        lent = interruptible.create_allocation(
            capacity_backend(self.ec2_backend),
            self._get_param("CapacityReservationId"),
            int(self._get_param("InstanceCount")),
            self._get_param("ZeroSizePreference"),
            tags.get("capacity-reservation", {}),
        )
        source = (lent.interruption_info or {}).get("SourceCapacityReservationId")
        return ActionResult(
            {
                "SourceCapacityReservationId": source,
                "TargetInstanceCount": lent.total_instance_count,
                "Status": "pending" if lent.state == "pending" else "active",
                "InterruptionType": "adhoc",
            }
        )

    def update_interruptible_capacity_reservation_allocation(self) -> ActionResult:
        self.error_on_dryrun()
        target = self._int_param("TargetInstanceCount")
        if target is None:
            raise MissingParameter("The request must contain the parameter TargetInstanceCount.")
        return ActionResult(
            interruptible.update_allocation(
                capacity_backend(self.ec2_backend),
                self._get_param("CapacityReservationId"),
                target,
                self._get_param("ZeroSizePreference"),
            )
        )
