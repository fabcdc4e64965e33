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
metadata: {{name: {NAME}-b}}
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
