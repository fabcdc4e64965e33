"""docs/dashboard.png is drawn from template.yaml's own DashboardBody: every widget, where the
dashboard puts it, with its series; sample numbers, labelled as such."""

from __future__ import annotations

from pathlib import Path

from benchmarks.dashboard_picture import Series, dashboard_body, draw, panels, sample_values
from local_cloud.template import load_template

REPO = Path(__file__).resolve().parents[2]


def test_every_widget_of_the_template_is_drawn_where_the_dashboard_puts_it() -> None:
    body = dashboard_body()
    drawn = panels(body)
    assert [(p.title, p.x, p.y, p.width, p.height) for p in drawn] == [
        (w["properties"]["title"], w["x"], w["y"], w["width"], w["height"]) for w in body["widgets"]
    ]
    # The body is the template's, resolved: queue names, region and thresholds filled in
    text = str(body)
    assert "${" not in text
    assert "capacity-launcher-LaunchQueue" in text
    threshold = load_template()["Parameters"]["OldestMessageAlarmSeconds"]["Default"]
    (oldest,) = (p for p in drawn if p.title.startswith("Launch queue: oldest"))
    assert oldest.lines == (("alarm", float(threshold)),)


def test_a_group_by_is_one_series_per_group_and_ellipsis_rows_extend_the_previous() -> None:
    by_title = {p.title: p for p in panels(dashboard_body())}
    outcomes = by_title["Request outcomes by pool"]
    assert outcomes.stacked
    assert [s.label for s in outcomes.series] == [
        "training Fulfilled", "training Failed", "batch Fulfilled", "batch Failed",
    ]  # fmt: skip
    assert {s.metric for s in outcomes.series} == {"RequestOutcome"}
    launches = by_title["Launches by capacity type"]
    assert [s.label for s in launches.series] == ["reserved", "on-demand", "spot"]
    assert {s.metric for s in launches.series} == {"InstancesLaunched"}


def test_percentiles_are_a_series_each_and_inputs_of_an_expression_are_not_drawn() -> None:
    by_title = {p.title: p for p in panels(dashboard_body())}
    latency = by_title["Request latency, every request (seconds, receipt to record)"]
    assert [(s.label, s.metric) for s in latency.series] == [
        ("p50", "RequestLatency:p50"), ("p90", "RequestLatency:p90"),
        ("p99", "RequestLatency:p99"), ("max", "RequestLatency:Maximum"),
    ]  # fmt: skip
    ice = by_title["ICE rate: offerings EC2 found dry per CreateFleet call"]
    assert [s.label for s in ice.series] == ["dry offerings per call"]


def test_sample_values_are_the_same_on_every_run_and_never_negative() -> None:
    series = Series("training Fulfilled", "RequestOutcome")
    assert sample_values(series) == sample_values(series)
    assert min(sample_values(series)) >= 0


def test_the_picture_is_written_and_docs_keep_one(tmp_path: Path) -> None:
    path = draw(dashboard_body(), tmp_path / "dashboard.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (REPO / "docs" / "dashboard.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
