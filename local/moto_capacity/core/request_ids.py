"""moto's request ids written into an answer's body only where the body can hold one.

moto finishes every answer (`BaseResponse._enrich_response`) by a regular expression over the
whole body that replaces the text between `<RequestId>` and `</RequestId>` by the new request
id. EC2 spells its element `<requestId>` and DynamoDB answers JSON, so for most answers the
expression matches nothing, after reading every character: 0.12 s of CPU for the 5.8 MB of
every instance type (a cold container's listing, each sync's), 10 ms a MB of a DynamoDB Scan.
A text body without `<RequestId>` cannot match: it is given back as it is, and moto does the
rest (the status, the new request id in the headers) on an empty body. Any other body is
finished by moto itself. An answer the extension keeps and gives again as the very same text
(a catalogue listing: ec2/responses/listings.py) is searched once, when it is kept (`kept`),
not at each call (about 3 ms for each answer of the 5.8 MB listing).
"""

from collections.abc import Callable
from typing import Any

_ELEMENT = "<RequestId>"
# Kept bodies found to hold no `<RequestId>`, by id (each held here, so its id is its own).
_PLAIN: dict[int, str] = {}


def kept(body: Any) -> None:
    """`body` will be given again as this same object, in answer after answer: searched now."""
    if type(body) is str and not holds_an_id(body):
        _PLAIN[id(body)] = body


def holds_an_id(body: str) -> bool:
    return _ELEMENT in body


def enriching_only_bodies_with_an_id(original: Any) -> Any:
    """The hook's replacement for moto's `BaseResponse._enrich_response` (a staticmethod)."""
    enrich: Callable[[dict[str, str], Any], tuple[dict[str, str], Any]] = original.__func__

    def _enrich_response(headers: dict[str, str], body: Any) -> tuple[dict[str, str], Any]:
        if type(body) is str and (_PLAIN.get(id(body)) is body or not holds_an_id(body)):
            enriched_headers, _ = enrich(headers, "")
            return enriched_headers, body
        return enrich(headers, body)

    return staticmethod(_enrich_response)
