"""Reading configuration files: every error names file, document and field; classes go first."""

from pathlib import Path

import pytest

from capacity_launcher_cli.config_commands import ApplyError, read_documents, validate

CLASS = """\
apiVersion: capacity-launcher/v1
kind: NodeClass
metadata: {name: base}
spec:
  imageId: ami-0123456789abcdef0
  subnetIds: [subnet-0123456789abcdef0]
  securityGroupIds: [sg-0123456789abcdef0]
"""
POOL = """\
apiVersion: capacity-launcher/v1
kind: NodePool
metadata: {name: pool}
spec: {nodeClassRef: base}
"""


def test_a_pool_listed_before_its_class_is_applied_after_it(tmp_path: Path) -> None:
    path = tmp_path / "both.yaml"
    path.write_text(POOL + "---\n" + CLASS)

    documents = validate(read_documents([str(path)]))

    assert [d.kind for d in documents] == ["NodeClass", "NodePool"]


def test_each_broken_rule_is_reported_with_file_document_and_field(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        CLASS
        + "---\n"
        + POOL.replace("spec: {nodeClassRef: base}", "spec: {nodeClassRef: base, weight: 500}")
    )

    with pytest.raises(ApplyError) as raised:
        validate(read_documents([str(path)]))

    (problem,) = raised.value.problems
    assert problem.startswith(f"{path}: document 2 (NodePool pool): spec.weight: ")


def test_a_folder_is_read_in_name_order_and_only_yaml_counts(tmp_path: Path) -> None:
    (tmp_path / "b-pool.yaml").write_text(POOL)
    (tmp_path / "a-class.yml").write_text(CLASS)
    (tmp_path / "request.json").write_text("{}")

    documents = read_documents([str(tmp_path)])

    assert [d.path.name for d in documents] == ["a-class.yml", "b-pool.yaml"]


def test_invalid_yaml_and_missing_files_are_named(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: [unclosed\n")

    with pytest.raises(ApplyError) as raised:
        read_documents([str(broken), str(tmp_path / "missing.yaml")])

    first, second = raised.value.problems
    assert first.startswith(f"{broken}: not valid YAML")
    assert second.startswith(f"{tmp_path / 'missing.yaml'}: cannot read")


def test_a_duplicate_key_is_refused_naming_the_key_and_its_line(tmp_path: Path) -> None:
    # Given a NodeClass whose spec sets imageId twice (YAML would silently keep the second)
    path = tmp_path / "twice.yaml"
    path.write_text(CLASS + "  imageId: ami-0fedcba9876543210\n")

    # When it is read, then nothing is applied and the key and both lines are named
    with pytest.raises(ApplyError) as refused:
        read_documents([str(path)])

    (problem,) = refused.value.problems
    assert problem == (f"{path}: line 8: duplicate key 'imageId' (first set on line 5)"), problem


def test_a_key_repeated_in_different_mappings_is_fine(tmp_path: Path) -> None:
    path = tmp_path / "ok.yaml"
    path.write_text(CLASS + "---\n" + POOL)

    assert len(read_documents([str(path)])) == 2


def test_a_file_with_no_documents_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("# nothing here yet\n---\n")

    with pytest.raises(ApplyError, match=r"empty\.yaml: no documents to apply"):
        read_documents([str(path)])


def test_dash_reads_standard_input_and_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO(CLASS + "---\nkind: NodePool\n"))

    documents = read_documents(["-"])

    assert [str(d.path) for d in documents] == ["<stdin>", "<stdin>"]
    with pytest.raises(ApplyError) as refused:
        validate(documents)
    assert refused.value.problems[0].startswith("<stdin>: document 2 (NodePool): apiVersion:")


def test_status_and_server_metadata_are_ignored_other_fields_refused(tmp_path: Path) -> None:
    path = tmp_path / "printed.yaml"
    path.write_text(
        CLASS.replace("metadata: {name: base}", "metadata: {name: base, uid: u, generation: 2}")
        + "status: {conditions: []}\n"
    )
    (hub,) = validate(read_documents([str(path)]))
    assert hub.name == "base"

    path.write_text(CLASS + "state: {conditions: []}\n")
    with pytest.raises(ApplyError) as refused:
        validate(read_documents([str(path)]))
    assert refused.value.problems == [
        f"{path}: document 1 (NodeClass base): state: is not an allowed field"
    ]


def test_a_folder_is_read_with_its_subfolders_only_with_recursive(tmp_path: Path) -> None:
    """kubectl's -R: `apply -R -f examples/` reads examples/quotas/ too; without it, only the
    folder's own files (as kubectl)."""
    (tmp_path / "classes.yaml").write_text(CLASS)
    (tmp_path / "pools").mkdir()
    (tmp_path / "pools" / "pool.yml").write_text(POOL)
    (tmp_path / "pools" / "notes.txt").write_text("not YAML")

    flat = read_documents([str(tmp_path)])
    deep = read_documents([str(tmp_path)], recursive=True)

    assert [d.data["kind"] for d in flat] == ["NodeClass"]
    assert [d.data["kind"] for d in deep] == ["NodeClass", "NodePool"]


def test_a_folder_whose_documents_are_in_subfolders_names_them_and_the_flag(
    tmp_path: Path,
) -> None:
    # examples/karpenter holds only v1/ and seed/: without -R it applies nothing.
    (tmp_path / "v1").mkdir()
    (tmp_path / "v1" / "class.yaml").write_text(CLASS)
    (tmp_path / "README.md").write_text("not YAML\n")

    with pytest.raises(ApplyError) as refused:
        read_documents([str(tmp_path)])

    (problem,) = refused.value.problems
    assert problem == (
        f"{tmp_path}: no documents to apply (its subfolders {tmp_path / 'v1'} have YAML files: "
        "pass -R to read them)"
    )
    assert len(read_documents([str(tmp_path)], recursive=True)) == 1


def test_an_empty_folder_read_recursively_suggests_nothing(tmp_path: Path) -> None:
    (tmp_path / "v1").mkdir()
    (tmp_path / "v1" / "empty.yaml").write_text("# nothing\n")

    with pytest.raises(ApplyError) as refused:
        read_documents([str(tmp_path)], recursive=True)

    assert refused.value.problems == [f"{tmp_path}: no documents to apply"]
