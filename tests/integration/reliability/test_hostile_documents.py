"""Hostile configuration documents through what `apply` and `convert` read them with: each is
refused with an error naming the file, the document or the rule, in bounded memory, before
anything is converted or stored (issue 34: alias bombs, huge documents, duplicate objects in one
file, annotation smuggling)."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from capacity_launcher.domain.apis.api_versions import MAX_DOCUMENT_BYTES
from capacity_launcher.domain.apis.kept_fields import HUB_FIELDS_ANNOTATION, HUB_FIELDS_PATH
from capacity_launcher.domain.apis.served_versions import REGISTRY
from capacity_launcher.domain.errors import ConfigValidationError
from capacity_launcher_cli.config_commands import ApplyError, read_documents, validate_steps
from capacity_launcher_cli.yaml_documents import MAX_FILE_BYTES
from tests.unit.test_cli_apply_documents import CLASS as NODE_CLASS
from tests.unit.test_cli_apply_documents import POOL as NODE_POOL

# Karpenter's disruption is kept as written (not acted on): where the bomb went off,
# in the kept fields' JSON, 2.9 GB of it.
KARPENTER_POOL = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: gpu}
spec:
  template:
    spec:
      requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}]
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: gpu}
"""


def bomb(first: str, level: str, levels: int = 9, width: int = 9) -> str:
    """``width ** (levels - 1)`` copies of ``first`` in a few hundred bytes: ``level`` names
    ``{aliases}`` of the level below (``*x0, *x0, ...``) under the anchor ``x{n}``."""
    lines = [first]
    for n in range(1, levels):
        aliases = ", ".join([f"*x{n - 1}"] * width)
        lines.append(level.format(n=n, aliases=aliases))
    return "\n".join(lines) + "\n"


# The billion laughs: 9 ** 8 copies of one string (43 million).
ALIAS_BOMB = bomb('x0: &x0 ["lol"]', "x{n}: &x{n} [{aliases}]")
# Merge keys copying mappings of merge keys: the same growth through `<<`.
MERGE_BOMB = bomb("x0: &x0 {a: lol, b: lol}", "x{n}: &x{n} {{<<: [{aliases}], k{n}: v}}")


def problems_of(tmp_path: Path, text: str, name: str = "hostile.yaml") -> list[str]:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ApplyError) as refused:
        validate_steps(read_documents([str(path)]))
    return refused.value.problems


def test_an_alias_bomb_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    """9 ** 8 copies: written out, gigabytes; refused having allocated a few megabytes."""
    text = KARPENTER_POOL + "  disruption:\n" + _indented(ALIAS_BOMB)
    assert len(text.encode()) < 1000
    tracemalloc.start()
    try:
        (problem,) = problems_of(tmp_path, text)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "with any aliases written out" in problem, problem
    assert f"a document is at most {MAX_DOCUMENT_BYTES} bytes" in problem
    assert peak < 20 * 1024 * 1024, peak


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        (MERGE_BOMB, "with any aliases written out"),
        ("loop: &loop [*loop]\n", "with any aliases written out"),
        ("[" * 20_000 + "]" * 20_000 + "\n", "nested too deeply"),
        (
            NODE_CLASS + f"  userData: {'x' * (MAX_DOCUMENT_BYTES + 10)}\n",
            "with any aliases written out",
        ),
    ],
    ids=["merge-bomb", "self-alias", "deep-nesting", "huge-document"],
)
def test_a_hostile_yaml_document_is_refused_naming_the_rule(
    tmp_path: Path, text: str, rule: str
) -> None:
    (problem,) = problems_of(tmp_path, text)
    assert problem.startswith(f"{tmp_path / 'hostile.yaml'}: "), problem
    assert rule in problem, problem


def test_a_file_larger_than_the_bound_is_refused_without_reading_it_all(tmp_path: Path) -> None:
    text = "---\n".join([NODE_POOL] * (MAX_FILE_BYTES // len(NODE_POOL) + 1))

    (problem,) = problems_of(tmp_path, text)

    assert problem == (
        f"{tmp_path / 'hostile.yaml'}: larger than {MAX_FILE_BYTES} bytes "
        f"(a file is at most {MAX_FILE_BYTES})"
    )


def test_a_document_built_with_shared_parts_is_refused_before_converting() -> None:
    """The same bound in the registry itself, for documents that do not come from the loader:
    counted as written out, without writing it out."""
    shared: Any = ["lol"]
    for _ in range(9):
        shared = [shared] * 9
    document = {
        "apiVersion": "capacity-launcher/v1",
        "kind": "NodePool",
        "metadata": {"name": "gpu"},
        "spec": {"nodeClassRef": "gpu", "requirements": shared},
    }

    with pytest.raises(ConfigValidationError) as refused:
        REGISTRY.read(document)

    (error,) = refused.value.errors
    assert error.field == "body"
    assert error.rule == f"must be at most {MAX_DOCUMENT_BYTES} bytes as JSON (one stored object)"


def test_one_object_twice_in_one_apply_is_refused_naming_both(tmp_path: Path) -> None:
    first = tmp_path / "first.yaml"
    first.write_text(NODE_CLASS + "---\n" + NODE_POOL)
    second = tmp_path / "second.yaml"
    second.write_text(NODE_POOL.replace("{nodeClassRef: base}", "{nodeClassRef: base, weight: 90}"))

    with pytest.raises(ApplyError) as refused:
        validate_steps(read_documents([str(first), str(second)]))

    assert refused.value.problems == [
        f"{second}: document 1 (NodePool pool): NodePool pool is also set by "
        f"{first}: document 2 (NodePool pool): one apply sets each object once"
    ]


def test_a_provisioners_class_and_a_nodeclass_of_its_name_are_one_object_twice(
    tmp_path: Path,
) -> None:
    provisioner = Path(__file__).parents[3] / "examples" / "provisioner" / "provisioner.yaml"
    text = provisioner.read_text() + "---\n" + NODE_CLASS.replace("name: base", "name: seed-003")

    (problem,) = problems_of(tmp_path, text)

    assert "NodeClass seed-003 is also set by" in problem, problem


def test_a_smuggled_hub_field_is_refused_naming_the_annotation_path(tmp_path: Path) -> None:
    smuggled = json.dumps({"spec.weight": 100, "metadata.name": "other"})
    text = (
        NODE_CLASS
        + "---\n"
        + NODE_POOL.replace(
            "metadata: {name: pool}",
            f"metadata:\n  name: pool\n  annotations: {{{HUB_FIELDS_ANNOTATION}: '{smuggled}'}}",
        )
    )

    problems = problems_of(tmp_path, text)

    where = f"{tmp_path / 'hostile.yaml'}: document 2 (NodePool pool): {HUB_FIELDS_PATH}"
    assert [p.split(": may not set ")[0] for p in problems] == [where, where]
    assert "may not set metadata.name" in problems[0]
    assert "may not set spec.weight" in problems[1]


def _indented(text: str) -> str:
    return "".join(f"    {line}\n" for line in text.splitlines())
