"""EC2's answers written as XML text straight from moto's serialized tree, not through a SAX
writer.

moto 5.2 serializes an EC2 answer in two passes: it walks the output shape into a tree of dicts
and lists (`ResponseSerializer._serialize`), then `EC2Serializer._serialize_body` hands that tree
to `xmltodict.unparse`, which checks every element's name, wraps each value in a list and a dict,
and drives the standard library's `XMLGenerator` one SAX event (start, characters, end) and one
`AttributesImpl` per element. A DescribeInstances of a few hundred instances has tens of
thousands of elements: the second pass cost about a fifth of the serialization's CPU.

`writing_xml_directly` writes the same tree as text in one recursive pass over it, and gives
exactly the bytes `xmltodict.unparse(tree, full_document=True, short_empty_elements=True)` gives:
the XML declaration; `@`-keys as attributes (in the order the dict holds them, quoted by the same
`quoteattr`) and `#text` as the text after the children; a list as one element per item, an empty
list as nothing; None, an empty string and a childless dict as `<name/>`; True/False as
`true`/`false`, bytes decoded as UTF-8 (errors replaced), anything else as `str()` of it; text
escaped as `XMLGenerator` escapes it (`&`, `<`, `>`). Element names are checked by xmltodict's
rules once per name. Anything else xmltodict treats specially (comments, a `@xmlns` dict, a key
that is not a str, a name it refuses, a root that is not one element) and a pretty-printed answer
are handed to moto's own `_serialize_body`, which answers (or refuses) as it always does.
"""

from collections.abc import Callable
from typing import Any
from xml.sax.saxutils import quoteattr

_DECLARATION = '<?xml version="1.0" encoding="utf-8"?>\n'
# Element and attribute names already checked, and found valid, by xmltodict's rules.
_VALID_NAMES: set[str] = set()
_MOST_NAMES = 100_000
_NOT_NAME_CHARACTERS = frozenset("<>/\"'=")
# Values xmltodict writes as elements of their own, not iterated: a str, bytes, a dict.
_SINGLE = (str, bytes, bytearray, memoryview, dict)
_BYTES = (bytes, bytearray, memoryview)


class _Unusual(Exception):
    """Something in the tree that moto's own writer handles (or refuses) its own way."""


def writing_xml_directly(original: Callable[..., str]) -> Callable[..., str]:
    """The hook's replacement for moto's `EC2Serializer._serialize_body`."""

    def serialize_body(self: Any, body: Any) -> str:
        if self.pretty_print or type(body) is not dict or len(body) != 1:
            return original(self, body)
        try:
            return xml_document(body)
        except _Unusual:
            return original(self, body)

    return serialize_body


def xml_document(body: dict[Any, Any]) -> str:
    """The document xmltodict.unparse writes for `body`, a dict of one root element (raises
    `_Unusual` for whatever this writer leaves to xmltodict)."""
    ((name, value),) = body.items()
    if type(value) is list or not _is_single(value):
        raise _Unusual  # a root that may be several elements, or none
    out = [_DECLARATION]
    _write(out, name, value)
    return "".join(out)


def _is_single(value: Any) -> bool:
    return not hasattr(value, "__iter__") or isinstance(value, _SINGLE)


def _write(out: list[str], name: Any, value: Any) -> None:
    """Append the elements xmltodict's `_emit(name, value)` writes."""
    if name not in _VALID_NAMES:
        _check_name(name)
    kind = type(value)
    if kind is str:
        out.append(f"<{name}>{_escaped(value)}</{name}>" if value else f"<{name}/>")
    elif kind is dict:
        _write_element(out, name, value)
    elif kind is list or kind is tuple:
        for item in value:
            _write_one(out, name, item)
    elif _is_single(value):
        _write_one(out, name, value)
    else:
        raise _Unusual  # another iterable: read once, it could not be handed on


def _write_one(out: list[str], name: str, value: Any) -> None:
    kind = type(value)
    if kind is str:
        text = value
    elif kind is dict:
        _write_element(out, name, value)
        return
    elif value is None:
        text = ""
    elif isinstance(value, str):
        text = str.__str__(value)  # the characters it holds, as the SAX writer writes them
    elif isinstance(value, dict):
        _write_element(out, name, value)
        return
    else:
        text = _text(value)
    out.append(f"<{name}>{_escaped(text)}</{name}>" if text else f"<{name}/>")


def _write_element(out: list[str], name: str, value: dict[Any, Any]) -> None:
    """An element with its attributes (`@` keys), its children, then its text (`#text`); its
    opening tag is put in place once its attributes are known."""
    text = None
    attributes = ""
    position = len(out)
    out.append("")
    for key, item in value.items():
        if key == "#text":
            text = None if item is None else _text(item)
            continue
        if type(key) is not str or key == "#comment":
            raise _Unusual
        if key[:1] == "@":
            attributes += _attribute(key, item)
            continue
        if type(item) is list and not item:
            continue
        _write(out, key, item)
    if text:
        out[position] = f"<{name}{attributes}>"
        out.append(_escaped(text))
        out.append(f"</{name}>")
    elif len(out) > position + 1:
        out[position] = f"<{name}{attributes}>"
        out.append(f"</{name}>")
    else:
        out[position] = f"<{name}{attributes}/>"


def _attribute(key: str, value: Any) -> str:
    """` name="value"` as the SAX writer writes an attribute (`quoteattr`)."""
    if key == "@xmlns" and isinstance(value, dict):
        raise _Unusual  # namespaces given by prefix
    name = key[1:]
    if name not in _VALID_NAMES:
        _check_name(name)
    return f" {name}={quoteattr('' if value is None else _text(value))}"


def _text(value: Any) -> str:
    """xmltodict's `_convert_value_to_string`, to the characters the SAX writer writes."""
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, _BYTES):
        return bytes(value).decode("utf-8", errors="replace")
    return str.__str__(str(value))


def _escaped(text: str) -> str:
    """What `XMLGenerator.characters` writes for `text` (saxutils.escape)."""
    if "&" in text:
        text = text.replace("&", "&amp;")
    if ">" in text:
        text = text.replace(">", "&gt;")
    if "<" in text:
        text = text.replace("<", "&lt;")
    return text


def _check_name(name: Any) -> None:
    """xmltodict's `_validate_name`: a name it would refuse is left to it (to refuse)."""
    if (
        type(name) is not str
        or name[:1] in ("?", "!")
        or not _NOT_NAME_CHARACTERS.isdisjoint(name)
        or any(character.isspace() for character in name)
        or name == "#comment"
    ):
        raise _Unusual
    if len(_VALID_NAMES) >= _MOST_NAMES:
        _VALID_NAMES.clear()
    _VALID_NAMES.add(name)
