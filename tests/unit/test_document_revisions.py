"""Every example document, as `apply` stores it, is read back at the revision stored beside it: a
request resolved on a copy read after an apply leases without being resolved again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from capacity_launcher.domain.apis.config import NodeClass, NodePool
from capacity_launcher.domain.apis.documents import parse_document, revision_of, stored_body
from capacity_launcher_cli.config_commands import ApplyError, read_documents, validate_steps

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# Refused by apply as written (tests/e2e/test_karpenter_examples.py says why).
REFUSED = {"windows-custom-userdata.yaml"}
# The kinds that apply stores as NodePools and NodeClasses (the rest carry no revision).
POOLS_AND_CLASSES = {"NodePool", "NodeClass", "EC2NodeClass", "Provisioner"}


def _pools_and_classes() -> list[Path]:
    """The examples that hold a NodePool or NodeClass in some served version."""
    return sorted(
        path
        for path in EXAMPLES.rglob("*.yaml")
        if path.name not in REFUSED
        and any(
            d and d.get("kind") in POOLS_AND_CLASSES for d in yaml.safe_load_all(path.read_text())
        )
    )


@pytest.mark.parametrize(
    "path",
    _pools_and_classes(),
    ids=lambda p: str(p.relative_to(EXAMPLES)),
)
def test_an_example_read_back_has_the_revision_stored_with_it(path: Path) -> None:
    # Given the example's hub documents as an apply validates them
    steps = validate_steps(read_documents([str(path)]))
    documents = [s.document for s in steps if isinstance(s.document, NodeClass | NodePool)]
    assert documents, path
    for document in documents:
        # When a reader parses the body an apply stores
        stored = stored_body(document)
        read = parse_document(json.loads(stored))
        # Then the copy it read has the applied document's revision, and stores back the same
        # body (so an apply of what `get` shows leaves every launcher's copy current)
        assert revision_of(read) == revision_of(document), document.name
        assert stored_body(read) == stored, document.name


def test_the_refused_example_is_still_refused() -> None:
    # Given the examples left out above, When each is validated, Then apply still refuses it
    for name in REFUSED:
        (path,) = EXAMPLES.rglob(name)
        with pytest.raises(ApplyError):
            validate_steps(read_documents([str(path)]))
