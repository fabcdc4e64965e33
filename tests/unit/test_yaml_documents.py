"""`load_documents` parses with libyaml where PyYAML has it (capacity_launcher_cli/yaml_documents):
the same documents as the pure-Python loader, and every refusal in that loader's words."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from capacity_launcher_cli import yaml_documents
from capacity_launcher_cli.yaml_documents import BoundedLoader, load_documents

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "examples").rglob("*.yaml"))


def _pure(text: str) -> list[object]:
    return list(yaml.load_all(text, Loader=BoundedLoader))


def test_every_example_reads_the_same_through_libyaml(monkeypatch: pytest.MonkeyPatch) -> None:
    assert yaml_documents._LIBYAML, "PyYAML's wheel carries libyaml"
    # Given the pure-Python loader refused, so only libyaml's reading can answer
    monkeypatch.setattr(yaml_documents, "BoundedLoader", None)
    assert len(EXAMPLES) > 10
    for path in EXAMPLES:
        text = path.read_text(encoding="utf-8")
        # Then each file reads as the pure-Python loader reads it
        assert load_documents(text) == _pure(text), path


@pytest.mark.parametrize(
    "text",
    [
        "a: 1\na: 2\n",  # a key set twice
        "a: [1, 2\n",  # a flow sequence never closed
        "a: 1\n b: 2\n",  # a mapping indented under a scalar
        "---\nok: 1\n---\nx: *missing\n",  # an alias of no anchor, in the second document
        "a: &x [*x]\n",  # an alias inside its own anchor: infinitely large
    ],
    ids=["duplicate-key", "unclosed", "bad-indent", "unknown-alias", "self-alias"],
)
def test_a_refused_text_is_refused_in_the_pure_loaders_words(text: str) -> None:
    with pytest.raises(yaml.YAMLError) as pure:
        _pure(text)
    with pytest.raises(yaml.YAMLError) as read:
        load_documents(text)
    assert type(read.value) is type(pure.value)
    assert str(read.value) == str(pure.value)


def test_a_text_nested_deeper_than_libyaml_is_trusted_with_is_read_by_the_pure_loader(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    read: list[str] = []
    real = BoundedLoader.__init__

    def noted(self: BoundedLoader, stream: str) -> None:
        read.append(stream)
        real(self, stream)

    monkeypatch.setattr(BoundedLoader, "__init__", noted)
    shallow = "a: " + "[" * 10 + "]" * 10 + "\n"
    deep = (
        "a: " + "[" * (yaml_documents.LIBYAML_DEPTH + 5) + "]" * (yaml_documents.LIBYAML_DEPTH + 5)
    )
    assert load_documents(shallow) == _pure(shallow)
    assert read == [shallow]  # the check above's own reading only
    read.clear()
    assert load_documents(deep) == _pure(deep)
    assert read == [deep, deep]  # load_documents fell back, then the check read it
