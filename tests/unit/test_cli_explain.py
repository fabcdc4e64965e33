"""`explain TYPE[.FIELD.PATH]` (issue 40; docs/cli.md, "kubectl habits"): a kind's fields, their
types, descriptions and rules, as `kubectl explain` prints them, from the models' JSON Schemas."""

from __future__ import annotations

import pytest

from capacity_launcher_cli.main import main


def _explain(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["explain", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_kind_is_explained_with_its_version_and_fields(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = _explain(capsys, "NodePools")

    assert code == 0
    assert out.startswith(
        "KIND:       NodePool\nVERSION:    capacity-launcher/v1\n\nDESCRIPTION:\n"
    )
    assert "FIELDS:\n  apiVersion\t<string> -required-\n    must be capacity-launcher/v1\n" in out
    # a field's description is its type's when it has none of its own
    assert "  spec\t<NodePoolSpec> -required-\n    What may be launched:" in out


def test_a_field_path_is_explained_with_its_type_rules_and_fields(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = _explain(capsys, "np.spec")
    assert code == 0
    assert "FIELD: spec <NodePoolSpec> -required-\n" in out
    assert "  nodeClassRef\t<string> -required-\n" in out
    assert "  weight\t<integer>\n    at least 0; at most 100; default 0\n" in out

    # an array's fields are its items'
    code, out, _ = _explain(capsys, "np.spec.requirements")
    assert "FIELD: requirements <[]Requirement>\n" in out
    assert "  operator\t<Operator> -required-\n    one of In, NotIn, Exists, DoesNotExist" in out

    # the request record, what `get requests -o json` prints
    code, out, _ = _explain(capsys, "req.status")
    assert (code, out.splitlines()[:4]) == (
        0,
        ["KIND:       RequestRecord", "VERSION:    capacity-launcher/v1", "",
         "FIELD: status <RequestStatus> -required-"],
    )  # fmt: skip


def test_another_served_version_is_explained_with_api_version(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = _explain(capsys, "np.spec", "--api-version", "karpenter.sh/v1")

    assert code == 0
    assert out.startswith("KIND:       NodePool\nVERSION:    karpenter.sh/v1\n")
    assert "  template\t<" in out and "  disruption\t<" in out


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (("np.spec.nope",), 'error: field "nope" does not exist in spec'),
        (("instances",), "error: instances are not documents and have no schema"),
        (("np", "--api-version", "x/v1"), "error: --api-version: 'x/v1' is not a served version"),
        (("nothing",), "error: unknown resource type 'nothing'"),
    ],
)
def test_what_cannot_be_explained_is_said(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], said: str
) -> None:
    code, out, err = _explain(capsys, *argv)
    assert (code, out) == (1, "")
    assert err.startswith(said)


@pytest.mark.parametrize("argv", [("np.spec",), ("nodepool", "--api-version", "karpenter.sh/v1")])
def test_explain_generates_only_the_schema_it_prints(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, argv: tuple[str, ...]
) -> None:
    # Every contract's schema took most of an `explain`'s CPU: it generates the one it reads.
    from capacity_launcher_cli import schemas

    generated: list[str] = []
    real = schemas._schema

    def counted(model: object, mode: str, title: str, description: str) -> dict[str, object]:
        generated.append(title)
        return real(model, mode, title, description)

    monkeypatch.setattr(schemas, "_schema", counted)
    code, out, _ = _explain(capsys, *argv)

    assert code == 0
    assert len(generated) == 1, generated
    assert out.startswith("KIND:       NodePool\n")
