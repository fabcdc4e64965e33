"""`get -o jsonpath=TEMPLATE`: the subset of kubectl's JSONPath templates people use.

A template is text with expressions in braces (docs/cli.md):

- `{.metadata.name}`: a field; `{.metadata.labels.karpenter\\.sh/nodepool}` or
  `{.metadata.labels['karpenter.sh/nodepool']}` when a key has dots; a leading `$` is allowed;
- `{.items[0]}`, `{.items[-1]}`: an element; `{.items[*].metadata.name}` or `{.spec.limits.*}`:
  every element or value;
- `{range .items[*]}...{end}`: the part between them once per value, with paths inside read from
  that value;
- `{"\\n"}`, `{"\\t"}`: a string (JSON escapes).

Several values print separated by spaces; strings as they are, other values as JSON. A field
that is missing prints nothing, as kubectl's `get` does. Standard library only: the parser checks
templates before anything else is loaded.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

ALL = "*"


class TemplateError(ValueError):
    """A template this subset cannot read; the message says where."""


@dataclass(frozen=True)
class Path:
    # each step: a field name (str), an index (int), or ALL
    steps: tuple[str | int, ...]
    all_steps: tuple[bool, ...]


@dataclass(frozen=True)
class Text:
    value: str


@dataclass(frozen=True)
class Range:
    path: Path
    body: tuple[Node, ...]


type Node = Path | Text | Range


def _field(text: str, start: int) -> tuple[str, int]:
    """A dotted step's name, up to the next unescaped `.` or `[`."""
    name, at = [], start
    while at < len(text) and text[at] not in ".[":
        if text[at] == "\\" and at + 1 < len(text):
            at += 1
        name.append(text[at])
        at += 1
    return "".join(name), at


def _bracket(text: str, start: int) -> tuple[str | int, bool, int]:
    end = text.find("]", start)
    if end < 0:
        raise TemplateError(f"unclosed '[' in {text!r}")
    inner = text[start + 1 : end].strip()
    if inner == ALL:
        return ALL, True, end + 1
    if len(inner) >= 2 and inner[0] == inner[-1] and inner[0] in "'\"":
        return inner[1:-1], False, end + 1
    try:
        return int(inner), False, end + 1
    except ValueError:
        raise TemplateError(f"[{inner}] in {text!r}: expected [N], [*] or ['key']") from None


def parse_path(text: str) -> Path:
    steps: list[str | int] = []
    all_steps: list[bool] = []
    at = 1 if text.startswith("$") else 0
    if at == len(text):
        return Path((), ())
    while at < len(text):
        if text[at] == "[":
            step, every, at = _bracket(text, at)
        elif text[at] == ".":
            step, at = _field(text, at + 1)
            every = step == ALL
            if not step:
                raise TemplateError(f"empty field name in {text!r}")
        else:
            raise TemplateError(f"{text!r}: a path starts with '.' or '['")
        steps.append(step)
        all_steps.append(every)
    return Path(tuple(steps), tuple(all_steps))


def _expressions(template: str) -> list[tuple[bool, str]]:
    """The template cut into (is_expression, text) parts."""
    parts: list[tuple[bool, str]] = []
    at = 0
    while at < len(template):
        opening = template.find("{", at)
        if opening < 0:
            parts.append((False, template[at:]))
            break
        if opening > at:
            parts.append((False, template[at:opening]))
        closing = _closing(template, opening)
        parts.append((True, template[opening + 1 : closing].strip()))
        at = closing + 1
    return parts


def _closing(template: str, opening: int) -> int:
    quote = None
    for at in range(opening + 1, len(template)):
        char = template[at]
        if quote:
            quote = None if char == quote and template[at - 1] != "\\" else quote
        elif char in "'\"":
            quote = char
        elif char == "}":
            return at
    raise TemplateError(f"unclosed '{{' at character {opening + 1} of {template!r}")


def parse(template: str) -> tuple[Node, ...]:
    """The template's nodes, or TemplateError naming what is wrong."""
    stack: list[tuple[Path | None, list[Node]]] = [(None, [])]
    for is_expression, text in _expressions(template):
        body = stack[-1][1]
        if not is_expression:
            body.append(Text(text))
        elif text.startswith("range "):
            stack.append((parse_path(text.removeprefix("range ").strip()), []))
        elif text == "end":
            if len(stack) == 1:
                raise TemplateError(f"{{end}} without {{range}} in {template!r}")
            path, nodes = stack.pop()
            assert path is not None
            stack[-1][1].append(Range(path, tuple(nodes)))
        elif text[:1] == '"':
            try:
                body.append(Text(str(json.loads(text))))
            except json.JSONDecodeError:
                raise TemplateError(f"{text} is not a JSON string") from None
        else:
            body.append(parse_path(text))
    if len(stack) > 1:
        raise TemplateError(f"{{range}} without {{end}} in {template!r}")
    return tuple(stack[0][1])


def _step(value: Any, step: str | int, every: bool) -> list[Any]:
    if every:
        return list(value.values() if isinstance(value, dict) else value) if value else []
    if isinstance(value, dict) and isinstance(step, str) and step in value:
        return [value[step]]
    if isinstance(value, list) and isinstance(step, int) and -len(value) <= step < len(value):
        return [value[step]]
    return []


def values(path: Path, current: Any) -> list[Any]:
    """What a path finds from ``current``: nothing for a missing field or index."""
    found = [current]
    for step, every in zip(path.steps, path.all_steps, strict=True):
        following: list[Any] = []
        for value in found:
            following += _step(value, step, every)
        found = following
    return found


def _shown(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def render(nodes: tuple[Node, ...], current: Any) -> str:
    out = []
    for node in nodes:
        if isinstance(node, Text):
            out.append(node.value)
        elif isinstance(node, Path):
            out.append(" ".join(_shown(v) for v in values(node, current)))
        else:
            out += [render(node.body, value) for value in values(node.path, current)]
    return "".join(out)
