"""EC2's paginated listings: a page of `MaxResults` items from where `NextToken` says, and the
token of the page after it (None after the last). A token EC2 did not hand out is refused."""

from typing import Any

from moto_capacity.ec2.exceptions import InvalidNextToken


def page(
    items: list[Any], max_results: int | None, next_token: str | None
) -> tuple[list[Any], str | None]:
    try:
        start = int(next_token) if next_token else 0
    except ValueError:
        raise InvalidNextToken() from None
    if start < 0 or start > len(items):
        raise InvalidNextToken()
    end = len(items) if not max_results else start + max_results
    return items[start:end], (str(end) if end < len(items) else None)
