"""This deployment's launch templates as the sync's template lifecycle lists and deletes them
(service/template_sweep.py decides which), and when a launcher last made or found one."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from capacity_launcher.adapters.aws import aws_call, client, error_code, error_message
from capacity_launcher.domain.aws_errors import is_launch_template_gone, is_refused_token
from capacity_launcher.domain.capacity.template_lifecycle import ManagedTemplate
from capacity_launcher.domain.errors import (
    LaunchFailed,
)
from capacity_launcher.domain.records.tags import (
    MANAGED,
    NODE_CLASS,
    RESERVATION_TARGET,
    TEMPLATE_BASIS,
    TEMPLATE_USED_AT,
    Ownership,
)
from capacity_launcher.observability import logger

# DescribeLaunchTemplates answers at most 200 a page.
_PAGE_SIZE = 200


class TemplateInventory:
    """This deployment's launch templates as the sync's lifecycle sees them: listed a bounded
    number of pages a run (continuing where the last run stopped), deleted one by one. Another
    deployment's (tagged with another stack) are never listed, so never deleted."""

    def __init__(
        self,
        ec2: Any | None = None,
        pages_per_run: int = 5,
        page_size: int = _PAGE_SIZE,
        ownership: Ownership | None = None,
    ) -> None:
        self._ec2 = ec2 or client("ec2")
        self._pages_per_run = pages_per_run
        self._page_size = page_size
        self._ownership = ownership or Ownership()
        self._next_token: str | None = None

    def managed(self) -> list[ManagedTemplate]:
        """Up to `pages_per_run` pages of templates tagged managed; the next call goes on from
        there, and starts over after the last page, or when EC2 refuses the token it kept (an
        expired one: kept, it would fail every later run)."""
        found: list[ManagedTemplate] = []
        for _ in range(self._pages_per_run):
            with aws_call("DescribeLaunchTemplates", fatal=LaunchFailed):
                page = self._page_or_first(self._next_token)
            found += [
                _managed(raw)
                for raw in page.get("LaunchTemplates", [])
                if self._ownership.owns(_tags(raw))
            ]
            self._next_token = page.get("NextToken") or None
            if self._next_token is None:
                break
        return found

    def _page_or_first(self, token: str | None) -> dict[str, Any]:
        """The page after `token`; the first page when EC2 refuses the token."""
        try:
            return self._page(token)
        except ClientError as error:
            if token is None or not is_refused_token(error_code(error), error_message(error)):
                raise
            logger.warning(
                "launch template listing's token refused; listing from the first page",
                extra={"code": error_code(error), "reason": error_message(error)},
            )
            self._next_token = None
            return self._page(None)

    def delete(self, name: str) -> bool:
        """Deletes a template; False when it was gone already."""
        with aws_call("DeleteLaunchTemplate", fatal=LaunchFailed):
            try:
                self._ec2.delete_launch_template(LaunchTemplateName=name)
            except ClientError as error:
                if is_launch_template_gone(error_code(error)):
                    return False
                raise
        return True

    def _page(self, token: str | None) -> dict[str, Any]:
        request: dict[str, Any] = {
            "Filters": [{"Name": f"tag:{MANAGED}", "Values": ["true"]}],
            "MaxResults": self._page_size,
        }
        if token:
            request["NextToken"] = token
        return dict(self._ec2.describe_launch_templates(**request))


def _tags(raw: Mapping[str, Any]) -> dict[str, str]:
    return {t["Key"]: t.get("Value", "") for t in raw.get("Tags", [])}


def _managed(raw: Mapping[str, Any]) -> ManagedTemplate:
    tags = _tags(raw)
    return ManagedTemplate(
        name=str(raw["LaunchTemplateName"]),
        created_at=raw["CreateTime"],
        node_class=tags.get(NODE_CLASS),
        basis=tags.get(TEMPLATE_BASIS),
        target=tags.get(RESERVATION_TARGET),
        used_at=_used_at(tags),
    )


def _used_at(tags: Mapping[str, str]) -> datetime | None:
    """A template's TEMPLATE_USED_AT mark; None without one (or one not a time)."""
    try:
        used = datetime.fromisoformat(tags[TEMPLATE_USED_AT])
    except (KeyError, ValueError):
        return None
    return used if used.tzinfo else used.replace(tzinfo=UTC)


def last_used(raw: Mapping[str, Any]) -> datetime:
    """When a launcher last made or found a template EC2 lists (its creation, or its mark)."""
    created: datetime = raw["CreateTime"]
    created = created if created.tzinfo else created.replace(tzinfo=UTC)
    used = _used_at(_tags(raw))
    return max(created, used) if used else created
