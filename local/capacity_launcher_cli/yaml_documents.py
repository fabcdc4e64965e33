"""Reading YAML documents a person wrote, bounded: one home for the loader `apply` and `convert`
use (docs/cli.md, "Files").

YAML's safe loader builds only plain data, but an alias repeats its anchor wherever it is named:
a few hundred bytes of nested aliases (a "billion laughs") stand for gigabytes once written out,
which is what converting a document does. So a file is read up to MAX_FILE_BYTES, and each
document's size with its aliases expanded is counted on the parsed nodes (each anchor counted
once, however often it is named) and refused past MAX_DOCUMENT_BYTES, before any of it is built.
A mapping that sets a key twice is refused too: YAML's last-wins would drop the first value.

Where PyYAML was built with libyaml (its wheels are), the text is parsed by libyaml's parser,
with the same constructor, resolver and bounds (`BoundedLibyamlLoader`): the same documents, in
about an eighth of the time (the examples folder: 12 ms against 90). A text it refuses is read
again by the pure-Python loader, so the error names the line and shows it as that loader words
it (libyaml's marks carry no snippet).
"""

from __future__ import annotations

from typing import IO, TYPE_CHECKING, Any

import yaml

from capacity_launcher.domain.apis.api_versions import MAX_DOCUMENT_BYTES

# A file (or standard input) of documents: many documents, each at most MAX_DOCUMENT_BYTES.
MAX_FILE_BYTES = 4 * 1024 * 1024


class DuplicateKey(yaml.YAMLError):
    """A mapping sets one key twice: YAML's last-wins would silently drop the first value."""

    def __init__(self, key: object, line: int, first_line: int) -> None:
        self.key = key
        self.line = line
        super().__init__(f"line {line}: duplicate key {key!r} (first set on line {first_line})")


class TooLarge(yaml.YAMLError):
    """A file or a document over its bound; the message names the rule."""


class BoundedLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys, and documents too large with aliases expanded."""

    def compose_document(self) -> Any:
        return _bounded(super().compose_document())

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        _no_key_twice(self, node, deep)
        return super().construct_mapping(node, deep=deep)


if TYPE_CHECKING:
    _CSafeLoader = yaml.CSafeLoader
else:  # PyYAML built without libyaml has none: `_LIBYAML` is False, and this class unused
    _CSafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class BoundedLibyamlLoader(_CSafeLoader):
    """BoundedLoader's bounds on libyaml's parser (only where PyYAML has it: `_LIBYAML`). A
    document nested deeper than LIBYAML_DEPTH is left to the pure-Python loader, whose composer
    refuses one nested too deeply for its recursion (libyaml's builds it)."""

    def get_node(self) -> Any:
        return _bounded(_shallow(super().get_node()))

    def get_single_node(self) -> Any:
        return _bounded(_shallow(super().get_single_node()))

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        _no_key_twice(self, node, deep)
        return super().construct_mapping(node, deep=deep)


_LIBYAML = bool(getattr(yaml, "__with_libyaml__", False))
# Deeper than any document a person writes (a NodePool is about 6 levels): read by the
# pure-Python loader instead, as before libyaml was used.
LIBYAML_DEPTH = 64


class _ReadAgain(yaml.YAMLError):
    """libyaml's reading is not to be trusted for this text: the pure-Python loader reads it."""


def _shallow(node: yaml.Node | None) -> yaml.Node | None:
    """`node`, unless it nests deeper than LIBYAML_DEPTH (_ReadAgain)."""
    level: list[tuple[yaml.Node, int]] = [] if node is None else [(node, 1)]
    seen: set[int] = set()
    while level:
        current, depth = level.pop()
        if depth > LIBYAML_DEPTH:
            raise _ReadAgain("nested deeper than libyaml is trusted with")
        if id(current) in seen or isinstance(current, yaml.ScalarNode):
            continue
        seen.add(id(current))
        level += [(child, depth + 1) for child in _children(current)]
    return node


def _bounded(node: yaml.Node | None) -> yaml.Node | None:
    """A document's root node, unless it is too large with its aliases written out."""
    if node is not None and expanded_size(node, MAX_DOCUMENT_BYTES) > MAX_DOCUMENT_BYTES:
        raise TooLarge(
            f"the document from line {node.start_mark.line + 1}: larger than "
            f"{MAX_DOCUMENT_BYTES} bytes with any aliases written out (a document is at "
            f"most {MAX_DOCUMENT_BYTES} bytes)"
        )
    return node


def _no_key_twice(
    loader: yaml.constructor.BaseConstructor, node: yaml.MappingNode, deep: bool
) -> None:
    """DuplicateKey when `node` sets one key twice."""
    first: dict[object, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        found = loader.construct_object(key_node, deep=deep)
        try:
            seen = first.get(found)
        except TypeError:  # an unhashable key: the constructor reports it
            continue
        line = key_node.start_mark.line + 1
        if seen is not None:
            raise DuplicateKey(found, line, seen)
        first[found] = line


def expanded_size(root: yaml.Node, limit: int) -> int:
    """About the bytes ``root`` stands for with every alias written out, counted up to just past
    ``limit``: each node's size is computed once (aliases share their anchor's node), and a node
    that contains itself (``&a [*a]``) is infinitely large."""
    sizes: dict[int, int] = {}
    pending: list[tuple[yaml.Node, bool]] = [(root, False)]
    open_nodes: set[int] = set()
    while pending:
        node, children_done = pending.pop()
        key = id(node)
        if key in sizes:
            continue
        if isinstance(node, yaml.ScalarNode):
            sizes[key] = 2 + len(node.value)
            continue
        children = _children(node)
        if not children_done:
            if key in open_nodes:
                return limit + 1  # a node inside itself: no finite document
            open_nodes.add(key)
            pending.append((node, True))
            pending += [(child, False) for child in children if id(child) not in sizes]
            continue
        open_nodes.discard(key)
        size = 2 + len(children) + sum(sizes.get(id(child), limit + 1) for child in children)
        if size > limit:
            return size
        sizes[key] = size
    return sizes[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    children: list[yaml.Node] = node.value
    return children


def read_bounded(stream: IO[str]) -> str:
    """A file's text, refused past MAX_FILE_BYTES without reading the rest."""
    text = stream.read(MAX_FILE_BYTES + 1)
    if len(text) > MAX_FILE_BYTES or len(text.encode("utf-8", "replace")) > MAX_FILE_BYTES:
        raise TooLarge(f"larger than {MAX_FILE_BYTES} bytes (a file is at most {MAX_FILE_BYTES})")
    return text


def load_documents(text: str) -> list[Any]:
    """Every document of ``text``: plain data, each bounded (BoundedLoader); parsed by libyaml
    where PyYAML has it, read again by the pure-Python loader for its words when refused."""
    if _LIBYAML:
        try:
            return list(yaml.load_all(text, Loader=BoundedLibyamlLoader))
        except (yaml.YAMLError, RecursionError):
            pass  # refused (or too deep): the pure-Python loader decides, in its own words
    return list(yaml.load_all(text, Loader=BoundedLoader))
