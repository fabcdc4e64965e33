"""A resource's tags looked up by its id, not found by matching every tag of the Region.

moto's `TaggedEC2Resource.get_tags` (each instance's `Tags` in every DescribeInstances, each
reservation's, each image's) asks `describe_tags` with a `resource-id` filter, which compiles
the id into a pattern and matches it against every tag of every resource: answering 2,000
tagged instances took 4 million matches. The pattern (fnmatch's, anchored at both ends) matches
exactly the id itself when the id has none of fnmatch's special characters (`*`, `?`, `[`),
which EC2's ids never have; the tags are then that one resource's, in the order they were set,
given here in the form `describe_tags` gives them. An id with such a character is asked as moto
asks.
"""

import functools
from collections.abc import Callable
from typing import Any

from moto.ec2.utils import EC2_PREFIX_TO_RESOURCE, get_prefix

_PATTERN_CHARACTERS = frozenset("*?[")


def looked_up_by_id(original: Callable[[Any], list[dict[str, str]]]) -> Callable[..., Any]:
    """The hook's replacement for `TaggedEC2Resource.get_tags`."""

    @functools.wraps(original)
    def get_tags(self: Any) -> list[dict[str, str]]:
        resource_id = self.id
        if not resource_id or not isinstance(resource_id, str):
            return original(self)
        if _PATTERN_CHARACTERS.intersection(resource_id):
            return original(self)
        tags = self.ec2_backend.tags.get(resource_id)
        if not tags:
            return []
        resource_type = EC2_PREFIX_TO_RESOURCE.get(get_prefix(resource_id), "")
        return [
            {"resource_id": resource_id, "key": key, "value": value, "resource_type": resource_type}
            for key, value in list(tags.items())
        ]

    return get_tags
