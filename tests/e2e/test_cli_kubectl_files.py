"""kubectl's file habits against the local cloud (issue 40; docs/cli.md, "kubectl habits"):
`delete -f`, `diff -f` and `apply --dry-run=client|server`."""

from __future__ import annotations

import uuid
from pathlib import Path

from tests.e2e.conftest import E2eCloud, apply_text, run_cli

NAME = f"files-{uuid.uuid4().hex[:6]}"
# The pools before the class they name, as a folder may list them.
DOCUMENTS = f"""\
apiVersion: capacity-launcher/v1
kind: NodePool
metadata: {{name: {NAME}-a}}
spec: {{nodeClassRef: {NAME}, limits: {{instances: '2'}}}}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: {NAME}-b
  labels: {{workload-type: batch, priority: low}}  # not in key order: the same object
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: {NAME}}}
      requirements: []
---
apiVersion: capacity-launcher/v1
kind: NodeClass
metadata: {{name: {NAME}}}
spec:
  imageSsmParameter: /aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-x86_64
  subnetSelectorTerms: [{{tags: {{tier: private}}}}]
  securityGroupIds: [sg-0a1b2c3d4e5f67890]
"""


def test_delete_f_deletes_every_object_of_the_file_as_kubectl_does(
    e2e_cloud: E2eCloud, tmp_path: Path
) -> None:
    # Given the objects of one file, applied
    path = tmp_path / "objects.yaml"
    assert apply_text(tmp_path, path.name, DOCUMENTS).code == 0

    # When the file is deleted
    deleted = run_cli("delete", "-f", str(path))

    # Then each object is deleted, those naming the class before it, and none is left
    assert (deleted.code, deleted.err) == (0, "")
    assert deleted.out.splitlines() == [
        f"nodepool/{NAME}-a deleted",
        f"nodepool/{NAME}-b deleted",
        f"nodeclass/{NAME} deleted",
    ]
    assert run_cli("get", "np", f"{NAME}-a").code == 1
    assert run_cli("get", "nc", NAME).code == 1

    # And deleting them again says kubectl's NotFound for each, naming the file, and exits 1
    again = run_cli("delete", "-f", str(path))
    assert (again.code, again.out) == (1, "")
    missing = f'Error from server (NotFound): error when deleting "{path}": '
    assert again.err.splitlines() == [
        f'{missing}nodepools "{NAME}-a" not found',
        f'{missing}nodepools "{NAME}-b" not found',
        f'{missing}nodeclasses "{NAME}" not found',
    ]
    # unless --ignore-not-found
    ignored = run_cli("delete", "-f", str(path), "--ignore-not-found")
    assert (ignored.code, ignored.out, ignored.err) == (0, "", "")


def test_delete_f_reads_standard_input_and_a_list(e2e_cloud: E2eCloud, tmp_path: Path) -> None:
    assert apply_text(tmp_path, "objects.yaml", DOCUMENTS).code == 0
    try:
        # `get -o yaml` of one pool, piped back: its pool only
        one = run_cli("get", "np", f"{NAME}-a", "-o", "yaml").out
        deleted = run_cli("delete", "-f", "-", stdin=one)
        assert (deleted.code, deleted.out) == (0, f"nodepool/{NAME}-a deleted\n"), deleted.err
        assert run_cli("get", "np", f"{NAME}-b").code == 0
    finally:
        run_cli("delete", "-f", str(tmp_path / "objects.yaml"), "--ignore-not-found")


def test_delete_takes_a_name_or_a_file_not_both(e2e_cloud: E2eCloud, tmp_path: Path) -> None:
    assert run_cli("delete", "-f", str(tmp_path / "x.yaml"), "np", "x").code == 2
    assert run_cli("delete", "np").code == 2
    missing = run_cli("delete", "np", "no-such-pool")
    assert (missing.code, missing.err) == (
        1,
        'Error from server (NotFound): nodepools "no-such-pool" not found\n',
    )


ORPHAN = f"""\
apiVersion: capacity-launcher/v1
kind: NodePool
metadata: {{name: {NAME}-orphan}}
spec: {{nodeClassRef: no-such-class}}
"""


PRIORITY_CLASS = f"""apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {{name: {NAME}-class}}
value: VALUE
"""


def test_apply_dry_run_client_and_server_say_what_apply_would_and_write_nothing(
    e2e_cloud: E2eCloud, tmp_path: Path
) -> None:
    path = tmp_path / "objects.yaml"
    path.write_text(DOCUMENTS)
    words = [
        f"nodeclass/{NAME} created",
        f"nodepool/{NAME}-a created",
        f"nodepool/{NAME}-b created (as karpenter.sh/v1 NodePool)",
    ]
    try:
        for mode, suffix in (("client", " (dry run)"), ("server", " (server dry run)")):
            # When the file is applied with --dry-run
            dry = run_cli("apply", "-f", str(path), f"--dry-run={mode}")
            # Then it says what apply would do, as kubectl does, and writes nothing
            said = [line for line in dry.out.splitlines() if not line.startswith(" ")]
            assert (dry.code, said) == (0, [w + suffix for w in words]), dry.err
            assert run_cli("get", "nc", NAME).code == 1
        assert run_cli("apply", "-f", str(path)).code == 0
        again = run_cli("apply", "-f", str(path), "--dry-run=server")
        said = [line for line in again.out.splitlines() if not line.startswith(" ")]
        assert [line.split()[1] for line in said] == ["unchanged"] * 3

        # The server's checks are the service's: only they know the class is not stored, and
        # say so as apply does (applied all the same, waiting for it: applied in any order)
        orphan = tmp_path / "orphan.yaml"
        orphan.write_text(ORPHAN)
        client = run_cli("apply", "-f", str(orphan), "--dry-run=client")
        assert (client.code, client.out, client.err) == (
            0,
            f"nodepool/{NAME}-orphan created (dry run)\n",
            "",
        )
        server = run_cli("apply", "-f", str(orphan), "--dry-run=server")
        assert (server.code, server.out) == (
            0,
            f"nodepool/{NAME}-orphan created (server dry run)\n",
        )
        assert "spec.nodeClassRef" in server.err and "no-such-class" in server.err
        assert run_cli("get", "np", f"{NAME}-orphan").code == 1  # nothing written
        applied = run_cli("apply", "-f", str(orphan))
        assert (applied.code, applied.err) == (0, server.err)  # the same warning
    finally:
        run_cli("delete", "-f", str(path), "--ignore-not-found")
        run_cli("delete", "-f", str(tmp_path / "orphan.yaml"), "--ignore-not-found")


def test_diff_prints_what_apply_would_change_and_exits_as_kubectl_diff(
    e2e_cloud: E2eCloud, tmp_path: Path
) -> None:
    path = tmp_path / "objects.yaml"
    path.write_text(DOCUMENTS)
    live = f"LIVE/capacity-launcher.v1.NodePool.{NAME}-a"
    merged = f"MERGED/capacity-launcher.v1.NodePool.{NAME}-a"
    try:
        # Not stored: each object is all added, and exit 1 (differences)
        new = run_cli("diff", "-f", str(path))
        assert new.code == 1, new.err
        assert f"diff -u -N {live} {merged}\n--- {live}\n+++ {merged}\n" in new.out
        assert f"+  name: {NAME}-a\n" in new.out
        assert f"MERGED/karpenter.sh.v1.NodePool.{NAME}-b" in new.out  # in its own version
        assert run_cli("get", "nc", NAME).code == 1  # nothing written

        # Applied: no difference, nothing printed, exit 0
        assert run_cli("apply", "-f", str(path)).code == 0
        assert run_cli("diff", "-f", str(path)) == run_cli("diff", "-f", "-", stdin=DOCUMENTS)
        same = run_cli("diff", "-f", str(path))
        assert (same.code, same.out, same.err) == (0, "", "")

        # One field changed: only that object, only that line
        path.write_text(DOCUMENTS.replace("instances: '2'", "instances: '5'"))
        changed = run_cli("diff", "-f", str(path))
        assert changed.code == 1
        removed = [line for line in changed.out.splitlines() if line.startswith("-  ")]
        added = [line for line in changed.out.splitlines() if line.startswith("+  ")]
        assert len(removed) == len(added) == 1
        assert "'2'" in removed[0] and "'5'" in added[0], changed.out
        assert changed.out.count("diff -u -N") == 1

        # A file the service refuses is an error (above 1), not a difference: a stored
        # PriorityClass's value changed
        klass = tmp_path / "class.yaml"
        klass.write_text(PRIORITY_CLASS.replace("VALUE", "100"))
        assert run_cli("apply", "-f", str(klass)).code == 0
        klass.write_text(PRIORITY_CLASS.replace("VALUE", "200"))
        refused = run_cli("diff", "-f", str(klass))
        assert (refused.code, refused.out) == (2, "")
        assert "value" in refused.err
    finally:
        path.write_text(DOCUMENTS)
        run_cli("delete", "-f", str(path), "--ignore-not-found")
        run_cli("delete", "-f", str(tmp_path / "class.yaml"), "--ignore-not-found")
