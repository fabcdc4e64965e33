"""kubectl's habits against the local cloud: short and singular TYPE names in any case, and
`-o name|jsonpath=...`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.e2e.conftest import E2eCloud, run_cli

POOL = (
    "apiVersion: capacity-launcher/v1\nkind: NodePool\nmetadata: {name: habits}\n"
    "spec:\n  nodeClassRef: general\n  limits: {instances: '2'}\n"
)


@pytest.fixture
def habits_pool(e2e_cloud: E2eCloud, tmp_path: Path) -> Iterator[str]:
    """A NodePool `habits` applied for the test, gone after it."""
    path = tmp_path / "pool.yaml"
    path.write_text(POOL)
    assert run_cli("apply", "-f", str(path)).code == 0
    yield "habits"
    run_cli("delete", "nodepool", "habits", "--ignore-not-found")


def test_short_singular_and_cased_names_act_on_the_same_type(habits_pool: str) -> None:
    table = run_cli("get", "np")
    assert table.code == 0
    assert habits_pool in table.out
    # not a terminal: plain columns under a header, no title or box
    assert table.out.splitlines()[0].split()[:3] == ["NAME", "NODECLASS", "WEIGHT"]
    assert "│" not in table.out and "NodePools" not in table.out
    assert run_cli("get", "np", "-o", "wide").out == table.out  # no wider columns for pools
    # singular and plural are one type: the same table, not the stored documents
    assert run_cli("get", "NodePool").out == table.out
    listed = {p["metadata"]["name"] for p in run_cli("get", "NP", "-o", "json").json()}
    assert habits_pool in listed
    one = yaml.safe_load(run_cli("get", "nodepools", habits_pool).out)
    assert one["metadata"]["name"] == habits_pool

    deleted = run_cli("delete", "NP", habits_pool)
    assert (deleted.code, deleted.out.strip()) == (0, "nodepool/habits deleted")
    assert run_cli("delete", "nodepools", habits_pool, "--ignore-not-found").code == 0


def test_quota_names_list_the_quota_table(e2e_cloud: E2eCloud) -> None:
    # No quota applied: each name answers an empty listing, not an error.
    for name in ("cq", "CapacityQuotas", "quotas"):
        result = run_cli("get", name)
        assert (result.code, result.out, result.err.strip()) == (0, "", "No resources found")


def test_name_and_jsonpath_outputs_of_listings_and_documents(habits_pool: str) -> None:
    names = run_cli("get", "np", "-o", "name").out.splitlines()
    assert "nodepool/habits" in names
    assert all(n.startswith("nodepool/") for n in names)
    template = '{range .items[*]}{.metadata.name}:{.spec.limits.instances}{"\\n"}{end}'
    assert "habits:2\n" in run_cli("get", "np", "-o", f"jsonpath={template}").out
    one = run_cli("get", "np", habits_pool, "-o", "jsonpath={.spec.nodeClassRef}")
    assert (one.code, one.out) == (0, "general")
    # a listing that is not of documents is named by its id
    assert run_cli("get", "requests", "-o", "name").code == 0
