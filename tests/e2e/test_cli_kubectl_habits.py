"""kubectl's habits against the local cloud: short and singular TYPE names in any case, and
`-o name|jsonpath=...`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.e2e.conftest import REPO, E2eCloud, apply_text, request_id, run_cli

POOL = (
    "apiVersion: capacity-launcher/v1\nkind: NodePool\nmetadata: {name: habits}\n"
    "spec:\n  nodeClassRef: general\n  limits: {instances: '2'}\n"
)


@pytest.fixture
def habits_pool(e2e_cloud: E2eCloud, tmp_path: Path) -> Iterator[str]:
    """A NodePool `habits` applied for the test, gone after it."""
    assert apply_text(tmp_path, "pool.yaml", POOL).code == 0
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
    listed = {p["metadata"]["name"] for p in run_cli("get", "NP", "-o", "json").json()["items"]}
    assert habits_pool in listed
    one = yaml.safe_load(run_cli("get", "nodepools", habits_pool, "-o", "yaml").out)
    assert one["metadata"]["name"] == habits_pool

    deleted = run_cli("delete", "NP", habits_pool)
    assert (deleted.code, deleted.out.strip()) == (0, "nodepool/habits deleted")
    assert run_cli("delete", "nodepools", habits_pool, "--ignore-not-found").code == 0


@pytest.mark.parametrize(
    ("listed", "named"), [("nodepools", "habits"), ("nc", "general"), ("ec2nodeclass", "general")]
)
def test_a_name_prints_its_row_as_the_listing_does(
    habits_pool: str, listed: str, named: str
) -> None:
    # Given the listing of a configuration type, as plain columns
    header, *rows = run_cli("get", listed).out.splitlines()

    # When one of its objects is asked by name
    one = run_cli("get", listed, named)

    # Then it prints the listing's header and that object's row (kubectl's `get TYPE NAME`)
    assert one.code == 0, one.err
    assert [line.split() for line in one.out.splitlines()] == [
        header.split(),
        next(row.split() for row in rows if row.split()[0] == named),
    ]
    # and -o yaml still prints the document itself
    document = yaml.safe_load(run_cli("get", listed, named, "-o", "yaml").out)
    assert document["metadata"]["name"] == named
    # and a name not there is kubectl's NotFound, with no table
    missing = run_cli("get", listed, "no-such-name")
    assert (missing.code, missing.out) == (1, "")
    assert "(NotFound)" in missing.err


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


def test_describe_a_pool_a_request_and_a_quota(e2e_cloud: E2eCloud, habits_pool: str) -> None:
    pool = run_cli("describe", "np", habits_pool)
    assert pool.code == 0, pool.err
    lines = pool.out.splitlines()
    assert lines[0].split() == ["Name:", habits_pool]
    assert "Usage:" in lines and "Conditions:" in lines
    assert lines[lines.index("Usage:") + 2].split() == ["instances", "2", "0"]

    wanted = request_id("describe")
    submitted = run_cli(
        "submit", "--request-id", wanted, "--node-pool", habits_pool, "--count", "1", "--wait"
    )
    assert submitted.code == 0, submitted.err
    page = run_cli("describe", "REQ", wanted).out.splitlines()
    assert page[:2] == [f"Name:         {wanted}", "Status:       Fulfilled"]
    launched = page[page.index("Instances:") + 2].split()
    assert launched[0].startswith("i-") and launched[-1] == wanted
    assert page[page.index("Launch Attempts:") + 2].split()[0] == "1"
    # the pool now lists that instance and counts it against its limit
    pool_page = run_cli("describe", "nodepool", habits_pool).out.splitlines()
    assert pool_page[pool_page.index("Usage:") + 2].split() == ["instances", "2", "1"]
    assert launched[0] in "\n".join(pool_page)

    quotas = str(REPO / "examples" / "quotas")
    assert run_cli("apply", "-f", quotas).code == 0
    try:
        quota = run_cli("describe", "cq", "team-ml")
        assert quota.code == 0, quota.err
        assert "NOMINAL" in quota.out and "Conditions:" in quota.out
    finally:
        for name in ("team-batch", "team-research", "team-ml"):
            run_cli("delete", "cq", name, "--ignore-not-found")

    node_class = run_cli("describe", "ec2nc", "general")
    assert node_class.code == 0, node_class.err
    assert "Resolved:" in node_class.out and "Conditions:" in node_class.out

    missing = run_cli("describe", "np", "no-such-pool")
    assert (missing.code, missing.err.strip()) == (
        1,
        'Error from server (NotFound): nodepools "no-such-pool" not found',
    )
    assert run_cli("describe", "instances", "x").code == 2


def test_watch_prints_the_listing_then_the_pool_applied_meanwhile(
    e2e_cloud: E2eCloud, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from capacity_launcher_cli import watch

    path = tmp_path / "pool.yaml"
    path.write_text(POOL)
    polls: list[float] = []

    def pause(seconds: float) -> None:
        polls.append(seconds)
        if len(polls) == 1:
            assert run_cli("apply", "-f", str(path)).code == 0
        else:
            raise KeyboardInterrupt

    monkeypatch.setattr(watch, "pause", pause)
    try:
        watched = run_cli("get", "np", "-w", "--watch-interval", "0.1")
    finally:
        run_cli("delete", "np", "habits", "--ignore-not-found")
    assert (watched.code, polls) == (0, [0.1, 0.1])
    lines = watched.out.splitlines()
    assert lines[0].split()[0] == "NAME"
    assert lines[-1].split()[0] == "habits"  # the row that changed, after the first listing
    assert sum(line.split()[0] == "habits" for line in lines) == 1
    assert run_cli("get", "np", "-w", "-o", "json").code == 2


LABELLED_POOL = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: labelled
  labels: {team: ml, tier: gpu}
spec:
  template:
    spec:
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: general}
"""


def test_label_selectors_pick_documents_by_their_kept_labels(
    habits_pool: str, tmp_path: Path
) -> None:
    applied = apply_text(tmp_path, "labelled.yaml", LABELLED_POOL)
    assert applied.code == 0, applied.err
    try:
        for selector, names in (
            ("team=ml", ["nodepool/labelled"]),
            ("team=ml,tier=cpu", []),
            ("!team", ["nodepool/habits"]),
        ):
            listed = run_cli("get", "np", "-l", selector, "-o", "name").out.splitlines()
            assert [n for n in listed if n in ("nodepool/labelled", "nodepool/habits")] == names
        table = run_cli("get", "nodepools", "-l", "tier=gpu")
        assert "labelled" in table.out and habits_pool not in table.out
        documents = yaml.safe_load(run_cli("get", "np", "-l", "team", "-o", "yaml").out)
        assert [d["metadata"]["name"] for d in documents["items"]] == ["labelled"]
    finally:
        run_cli("delete", "np", "labelled", "--ignore-not-found")
    refused = run_cli("get", "requests", "-l", "team=ml")
    assert (refused.code, "carry no labels" in refused.err) == (2, True)
    assert run_cli("get", "np", "labelled", "-l", "team=ml").code == 2


@pytest.mark.parametrize(
    "argv",
    [
        ("get", "np"),
        ("get", "requests", "-o", "name"),
        ("describe", "np", "e2e"),
        ("delete", "np", "no-such-pool", "--ignore-not-found"),
    ],
)
def test_all_namespaces_is_accepted_and_changes_nothing(
    e2e_cloud: E2eCloud, argv: tuple[str, ...]
) -> None:
    # kubectl users type -A by habit; there are no namespaces here (docs/cli.md)
    without = run_cli(*argv)
    for flag in ("-A", "--all-namespaces"):
        with_flag = run_cli(*argv, flag)
        assert (with_flag.code, with_flag.out) == (0, without.out), with_flag.err
