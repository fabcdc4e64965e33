"""kubectl's habits against the local cloud: short and singular TYPE names in any case."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.e2e.conftest import E2eCloud, run_cli

POOL = (
    "apiVersion: capacity-launcher/v1\nkind: NodePool\nmetadata: {name: habits}\n"
    "spec:\n  nodeClassRef: general\n  limits: {instances: '2'}\n"
)


def test_short_singular_and_cased_names_act_on_the_same_type(
    e2e_cloud: E2eCloud, tmp_path: Path
) -> None:
    path = tmp_path / "pool.yaml"
    path.write_text(POOL)
    assert run_cli("apply", "-f", str(path)).code == 0

    table = run_cli("get", "np")
    assert table.code == 0
    assert "habits" in table.out
    # singular and plural are one type: the same table, not the stored documents
    assert run_cli("get", "NodePool").out == table.out
    listed = {p["metadata"]["name"] for p in run_cli("get", "NP", "-o", "json").json()}
    assert "habits" in listed
    one = yaml.safe_load(run_cli("get", "nodepools", "habits").out)
    assert one["metadata"]["name"] == "habits"

    deleted = run_cli("delete", "NP", "habits")
    assert (deleted.code, deleted.out.strip()) == (0, "nodepool/habits deleted")
    assert run_cli("delete", "nodepools", "habits", "--ignore-not-found").code == 0


def test_quota_names_list_the_quota_table(e2e_cloud: E2eCloud) -> None:
    # No quota applied: each name answers an empty listing, not an error.
    for name in ("cq", "CapacityQuotas", "quotas"):
        result = run_cli("get", name)
        assert (result.code, result.out, result.err.strip()) == (0, "", "No resources found")
