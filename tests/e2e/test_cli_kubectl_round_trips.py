"""kubectl's round trips against the local cloud (issue 40; docs/cli.md, "kubectl habits"): a
listing printed as a `List` applies back, apply says created / configured / unchanged per object,
and the exit codes tell a usage error from a wait that timed out."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.e2e.conftest import E2E_POOL, E2eCloud, apply_text, request_id, run_cli

NAME = f"trip-{uuid.uuid4().hex[:6]}"
POOLS = f"""\
apiVersion: capacity-launcher/v1
kind: NodePool
metadata: {{name: {NAME}-a}}
spec: {{nodeClassRef: general, limits: {{instances: '2'}}}}
---
apiVersion: capacity-launcher/v1
kind: NodePool
metadata: {{name: {NAME}-b}}
spec: {{nodeClassRef: general, limits: {{instances: '3'}}}}
"""


@pytest.fixture
def pools(e2e_cloud: E2eCloud, tmp_path: Path) -> Iterator[list[str]]:
    applied = apply_text(tmp_path, "pools.yaml", POOLS)
    assert applied.code == 0, applied.err
    yield [f"{NAME}-a", f"{NAME}-b"]
    for suffix in ("a", "b"):
        run_cli("delete", "nodepool", f"{NAME}-{suffix}", "--ignore-not-found")


def test_apply_says_created_configured_or_unchanged_per_object(
    e2e_cloud: E2eCloud, tmp_path: Path
) -> None:
    try:
        first = apply_text(tmp_path, "pools.yaml", POOLS)
        again = apply_text(tmp_path, "pools.yaml", POOLS)
        changed = apply_text(tmp_path, "pools.yaml", POOLS.replace("'3'", "'4'"))

        assert first.out.splitlines() == [
            f"nodepool/{NAME}-a created",
            f"nodepool/{NAME}-b created",
        ]
        assert again.out.splitlines() == [
            f"nodepool/{NAME}-a unchanged",
            f"nodepool/{NAME}-b unchanged",
        ]
        assert changed.out.splitlines() == [
            f"nodepool/{NAME}-a unchanged",
            f"nodepool/{NAME}-b configured",
        ]
    finally:
        for suffix in ("a", "b"):
            run_cli("delete", "nodepool", f"{NAME}-{suffix}", "--ignore-not-found")


def test_a_listing_in_json_is_a_kubectl_list(pools: list[str]) -> None:
    listing = run_cli("get", "nodepools", "-o", "json").json()

    assert (listing["apiVersion"], listing["kind"]) == ("v1", "List")
    assert set(pools) <= {p["metadata"]["name"] for p in listing["items"]}


@pytest.mark.parametrize("output", ["yaml", "json"])
def test_a_listing_applies_back_each_item_unchanged(pools: list[str], output: str) -> None:
    # Given every NodePool as `get -o yaml|json` prints them (a List, statuses included)
    printed = run_cli("get", "nodepools", "-o", output)
    assert printed.code == 0

    # When it is applied back from standard input
    applied = run_cli("apply", "-f", "-", stdin=printed.out)

    # Then each item of the List is applied, and none changed
    assert applied.code == 0, applied.err
    lines = applied.out.splitlines()
    assert f"nodepool/{NAME}-a unchanged" in lines
    assert f"nodepool/{NAME}-b unchanged" in lines
    assert len(lines) == len(yaml.safe_load(printed.out)["items"])


def test_a_list_document_in_a_file_applies_its_items(e2e_cloud: E2eCloud, tmp_path: Path) -> None:
    documents = list(yaml.safe_load_all(POOLS))
    as_list = yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": documents})
    try:
        applied = apply_text(tmp_path, "list.yaml", as_list)

        assert applied.code == 0, applied.err
        assert applied.out.splitlines() == [
            f"nodepool/{NAME}-a created",
            f"nodepool/{NAME}-b created",
        ]
    finally:
        for suffix in ("a", "b"):
            run_cli("delete", "nodepool", f"{NAME}-{suffix}", "--ignore-not-found")


def test_a_usage_error_and_a_timed_out_wait_exit_differently(e2e_cloud: E2eCloud) -> None:
    # A flag the parser refuses: argparse's usage error
    with pytest.raises(SystemExit) as usage:
        run_cli("get", "nodepools", "--no-such-flag")
    # A wait that ends before the request does (a request nobody sent has no record)
    timed_out = run_cli("status", request_id("never-sent"), "--wait", "--timeout", "0.1")

    assert usage.value.code == 2
    assert timed_out.code == 3
    assert run_cli("status", request_id("never-sent")).code == 1


def test_a_request_submitted_and_waited_for_ends_0(e2e_cloud: E2eCloud) -> None:
    rid = request_id("trip")
    done = run_cli("submit", "--request-id", rid, "--node-pool", E2E_POOL, "--count", "1", "--wait")
    assert done.code == 0, done.err
