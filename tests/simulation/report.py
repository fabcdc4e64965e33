"""A run's outcome as text: the one-screen summary a failing test prints (seed and replay command
first), and the Markdown report `make soak` writes to docs/SOAK.md."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable

from tests.simulation.determinism import HASH_SEED
from tests.simulation.invariants import LATENCY_BOUND_SECONDS
from tests.simulation.operations import Profile
from tests.simulation.scheduler import Outcome


def replay_command(outcome: Outcome, profile: Profile, steps: int | None = None) -> str:
    """The command that replays the run, or its first `steps` steps (a run bounded by minutes
    draws what one bounded by steps draws, step for step); a hash seed other than the runner's
    own is named."""
    hash_seed = os.environ.get("PYTHONHASHSEED", HASH_SEED)
    prefix = "" if hash_seed == HASH_SEED else f"PYTHONHASHSEED={hash_seed} "
    if steps is None:
        steps = outcome.steps if profile.wall_minutes is not None else profile.steps
    return (
        f"{prefix}python -m tests.simulation --profile {profile.name} --seed {outcome.seed}"
        f" --steps {steps}"
    )


def percentile(values: Iterable[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    index = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[index]


def _grouped(outcome: Outcome) -> Counter[str]:
    return Counter(v.invariant for v in outcome.violations)


def summary(outcome: Outcome, profile: Profile, limit: int = 25) -> str:
    lines = [
        f"seed {outcome.seed}, profile {profile.name}: {outcome.steps} steps,"
        f" {outcome.requests} requests, {outcome.instances} instances,"
        f" {outcome.simulated_seconds:.0f} simulated s, {outcome.wall_seconds:.0f} wall s,"
        f" {len(outcome.violations)} violations",
        f"replay: PYTHONPATH=layers/core:local:. {replay_command(outcome, profile)}",
    ]
    lines.append(f"code: {outcome.code}{_code_changed(outcome)}")
    lines.append(versions_line(outcome))
    for invariant, count in _grouped(outcome).most_common():
        lines.append(f"  {invariant}: {count}")
    lines += [f"  - {v.line()}" for v in outcome.violations[:limit]]
    if len(outcome.violations) > limit:
        lines.append(f"  ... {len(outcome.violations) - limit} more")
    if outcome.violations:
        first = outcome.violations[0].step
        lines.append(
            f"replay to the first violation (step {first}): PYTHONPATH=layers/core:local:."
            f" {replay_command(outcome, profile, first)} --trace"
        )
        before = [t for t in outcome.trace if _trace_step(t) <= first]
        lines += ["steps before the first violation:", *[f"    {t}" for t in before[-12:]]]
    return "\n".join(lines)


def _code_changed(outcome: Outcome) -> str:
    if outcome.code_at_end in ("", outcome.code):
        return ""
    return (
        f", {outcome.code_at_end} at the end: the sources changed on disk during the run, and what"
        " it loaded after (cold starts, first imports) was not the seed's; replay on one revision"
    )


def versions_line(outcome: Outcome) -> str:
    """The versions documents were written in, and how often a drawn one could not say the hub."""
    counts = outcome.versions
    written = ", ".join(f"{label} {n}" for label, n in sorted(counts.written.items()))
    refused = sum(counts.refused.values())
    return f"documents applied as: {written or 'none'}; versions refused and redrawn: {refused}"


def _trace_step(line: str) -> int:
    words = line.split()
    return int(words[1]) if len(words) > 1 and words[0] == "step" else -1


def _table(title: str, counts: Counter[str], header: str) -> list[str]:
    lines = [f"### {title}", "", f"| {header} | count |", "|---|---:|"]
    lines += [f"| {name} | {count} |" for name, count in sorted(counts.items())]
    return [*lines, ""]


def markdown(outcome: Outcome, profile: Profile) -> str:
    latencies = outcome.latencies
    after = outcome.latencies_after_clear
    lines = [
        "# Soak: the whole-system simulation, long run",
        "",
        "Written by `make soak` (`python -m tests.simulation`); tests/simulation/ says how the",
        "run is built and what each invariant means. Times are simulated seconds unless said",
        "otherwise.",
        "",
        f"- seed {outcome.seed}, profile `{profile.name}`; replay:"
        f" `PYTHONPATH=layers/core:local:. {replay_command(outcome, profile)}`",
        f"- {outcome.steps} steps, {outcome.requests} request ids, {outcome.instances} instances"
        f" launched, {outcome.quiescences} quiescences, {outcome.dead_letters} dead letters",
        f"- {outcome.simulated_seconds:.0f} simulated seconds in {outcome.wall_seconds / 60:.1f}"
        " wall minutes",
        f"- **{len(outcome.violations)} invariant violations**",
        "",
        "## Latency (submission to first final status event)",
        "",
        "| | p50 | p90 | p99 | max |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, values in (("from submission", latencies), ("after the last disturbance", after)):
        row = " | ".join(f"{percentile(values, p):.0f}" for p in (50, 90, 99, 100))
        lines.append(f"| {name} | {row} |")
    lines += [
        "",
        f"Bound checked: {LATENCY_BOUND_SECONDS:.0f} s after submission or the last disturbance.",
        "",
        "## Invariants",
        "",
    ]
    lines += _table("Checks run", outcome.checks, "invariant")
    lines += _table("Violations", _grouped(outcome), "invariant")
    for invariant in sorted(_grouped(outcome)):
        found = [v for v in outcome.violations if v.invariant == invariant]
        lines += [f"First of *{invariant}*:", ""]
        lines += [f"- {v.line()}" for v in found[:8]]
        lines.append("")
    lines += ["## What ran", ""]
    lines += _table("Operations (operation: outcome)", outcome.operations, "operation")
    lines += _table("Invocations", outcome.invocations, "function")
    lines += _table("Faults fired (service:Operation)", outcome.faults_fired, "operation")
    lines += _table("Crashes", outcome.crashes, "where")
    lines += _table(
        "Documents applied, by the version written in", outcome.versions.written, "version"
    )
    lines += _table(
        "Versions drawn that could not express the hub (another drawn)",
        outcome.versions.refused,
        "version: why",
    )
    lines += _table(
        "Documents carrying hub fields in their annotation", outcome.versions.hub_fields, "version"
    )
    lines += _table("Final status per request id", outcome.statuses, "status")
    return "\n".join(lines)
