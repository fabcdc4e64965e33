"""`get -o jsonpath=T` (the documented subset of kubectl's) and `-o name`'s naming."""

from __future__ import annotations

import argparse
import re

import pytest

from capacity_launcher_cli.jsonpath import TemplateError, parse, render
from capacity_launcher_cli.main import parser
from capacity_launcher_cli.output_formats import jsonpath_text, name_of, output_format

POOLS = [
    {
        "metadata": {"name": "general", "labels": {"karpenter.sh/nodepool": "general"}},
        "spec": {"weight": 10, "limits": {"cpu": "100", "instances": "3"}},
    },
    {"metadata": {"name": "gpu"}, "spec": {"weight": 50}},
]


@pytest.mark.parametrize(
    ("template", "printed"),
    [
        ("{.items[*].metadata.name}", "general gpu"),
        ("{.items[0].metadata.name}", "general"),
        ("{.items[-1].spec.weight}", "50"),
        ("{$.kind}", "List"),
        ("{.items[0].spec.limits.*}", "100 3"),
        ("{.items[0].spec.limits}", '{"cpu": "100", "instances": "3"}'),
        ("{.items[0].metadata.labels.karpenter\\.sh/nodepool}", "general"),
        ("{.items[0].metadata.labels['karpenter.sh/nodepool']}", "general"),
        ('{range .items[*]}{.metadata.name}={.spec.weight}{"\\n"}{end}', "general=10\ngpu=50\n"),
        ("pools: {.items[*].metadata.name}!", "pools: general gpu!"),
        ("{.items[1].metadata.labels.missing}", ""),
        ("{.items[7].metadata.name}", ""),
    ],
)
def test_a_template_prints_what_kubectl_would(template: str, printed: str) -> None:
    assert jsonpath_text("jsonpath=" + template, POOLS) == printed


def test_one_document_is_the_root_itself() -> None:
    assert render(parse("{.metadata.name}"), POOLS[1]) == "gpu"


@pytest.mark.parametrize(
    ("template", "says"),
    [
        ("{.metadata.name", "unclosed '{'"),
        ("{range .items[*]}{.x}", "{range} without {end}"),
        ("{end}", "{end} without {range}"),
        ("{.items[x]}", "expected [N], [*] or ['key']"),
        ("{metadata}", "a path starts with '.' or '['"),
        ('{.items[?(@.x=="y")]}', "expected [N], [*] or ['key']"),
        ("{.items[0:2]}", "expected [N], [*] or ['key']"),
        ("{..name}", "empty field name"),
    ],
)
def test_a_template_outside_the_subset_is_refused_saying_why(template: str, says: str) -> None:
    with pytest.raises(TemplateError, match=re.escape(says)):
        parse(template)


def test_output_is_checked_when_the_command_line_is_read() -> None:
    assert parser().parse_args(["get", "np", "-o", "name"]).output == "name"
    assert output_format("jsonpath={.items[*].metadata.name}").startswith("jsonpath=")
    with pytest.raises(argparse.ArgumentTypeError, match="jsonpath: unclosed"):
        output_format("jsonpath={.x")
    with pytest.raises(argparse.ArgumentTypeError, match="one of table, wide"):
        output_format("xml")
    with pytest.raises(SystemExit) as exited:
        parser().parse_args(["get", "np", "-o", "jsonpath={.metadata"])
    assert exited.value.code == 2


def test_name_is_metadata_name_or_the_id_of_a_record() -> None:
    assert name_of(POOLS[0], "nodepools") == "general"
    assert name_of({"requestId": "web-1", "nodePool": "general"}, "requests") == "web-1"
    assert name_of({"instanceId": "i-1", "requestId": "web-1"}, "instances") == "i-1"
