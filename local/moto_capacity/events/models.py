"""An EventBridge rule's target gets the whole event when the target sets no input transformer,
`account` included (https://docs.aws.amazon.com/eventbridge/latest/userguide/
eb-events-structure.html: version, id, detail-type, source, account, time, region, resources,
detail). moto's default template leaves `account` out.
"""

from collections.abc import Callable
from typing import Any

ENVELOPE = ("version", "id", "detail-type", "source", "account", "time", "region", "resources")


def whole_event(original: Callable[..., Any]) -> Callable[..., Any]:
    """Wraps EventTemplateParser.parse: without an input template, the event's every field."""

    def parse(input_template: str, input_paths_map: dict[str, Any], event: Any) -> Any:
        if input_template or input_paths_map:
            return original(input_template, input_paths_map, event)
        delivered = {name: event[name] for name in ENVELOPE if name in event}
        delivered["detail"] = event.get("detail", {})
        return delivered

    return parse
