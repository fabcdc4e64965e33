"""AWS calls per warm on-demand request against the offerings its fleet carries (issue 38).

One pool of N x86_64 instance types in one zone (N on-demand offerings, every one healthy: one
CreateFleet carries them all as overrides), EC2 consistent at once; a warm container (one
request of the pool served first) serves one request for one instance, and every call its shared
clients make is counted (botocore's `provide-client-params`: once per API call, retries inside
one not counted), by operation.

The baseline is the revision before evidence-only claims (`BASELINE`, extracted with `git
archive` into a temporary folder and measured in a child process over its own code), in the same
run on the same emulator: it claimed every offering it was about to ask about, a PutItem and a
DeleteItem each, one after another.

    PYTHONPATH=layers/core:local:. .venv/bin/python -m benchmarks.offering_calls
"""

from __future__ import annotations

import json
import sys
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

OFFERINGS = (1, 8, 30, 100)
_ICE_WRITES = "ice-writes"
# The revision before claims were taken only on evidence (issue 38): today's cost, measured.
BASELINE = "de31d25"
SERVICES = ("dynamodb", "ec2", "events", "sqs", "ssm", "resource-groups")
ZONE = "us-east-1a"
GOAL_CALLS = 8  # issue 38's target for a warm on-demand request

# What each call of a warm on-demand request buys (issue 38), in the order the request makes
# them, and whether it could go: docs/BENCHMARKS.md renders it under the curve.
CALL_PURPOSES: tuple[tuple[str, str, str], ...] = (
    (
        "PutItem (idempotency table)",
        "the delivery's idempotency claim: a copy of the message delivered while this one is "
        "served is not served twice",
        "merge with the body's binding into one TransactWriteItems: -1 on a first delivery. "
        "Not made: the claim is Powertools' item (its key hash, status and expiries, its "
        "condition on expired claims), which the transaction would have to write as a second "
        "writer of that format; and a redelivery (its body bound already) would cancel the "
        "transaction and pay the claim and the binding's read again",
    ),
    (
        "PutItem (`Request#<id>`, `Body`)",
        "binds the request id to its body's hash: a request id reused with another body is "
        "refused (README, Contracts)",
        "see above",
    ),
    (
        "TransactWriteItems (lease)",
        "exact limits and quotas: the pool, its class and its quota unchanged, the lease and "
        "the pool's usage written atomically",
        "none: this is the limit's exactness",
    ),
    (
        "TransactWriteItems (intent and its pointer)",
        "the intent written before CreateFleet: a redelivery sends it again with the same "
        "ClientToken, never a second launch",
        "a first attempt's intent could ride in the lease's transaction when the plan is known "
        "before room is granted; it is not today: the plan follows the room granted (the lease "
        "may hold fewer instances, or only the types that fit: `Lease.instance_types`), and the "
        "fleet's input (its launch template, overrides cut to what the lease covers, its count) "
        "is composed only then",
    ),
    ("CreateFleet", "the launch (tags in its TagSpecifications: no CreateTags)", "none"),
    (
        "TransactWriteItems (settle)",
        "the lease settled to the instances launched: room not used given back, usage exact; "
        "each instance's record, put with its member (stop and termination events find their "
        "request and pool; never a member without its record); and the intent's answer (its "
        "instance ids and errors: a redelivery absorbs a done intent without sending it again)",
        "none",
    ),
    (
        "BatchWriteItem (request record)",
        "the request's final record (GetRequest, the status contract), and the idempotency "
        "claim's completion: a delivery finding the claim held reads it and re-publishes it",
        "into the visit's last lease settle transaction: -1. Not tried (wip/calls9): a visit "
        "settles each request's lease in its own transaction, so the records would ride the "
        "last one (the others' instances counted before it); what a cancelled settle then "
        "leaves a redelivery to finish (test_accounting's redeliveries after settle) is the "
        "question to answer first",
    ),
    (
        "PutEvents",
        "the request's event (README, Contracts); already one call per group the invocation "
        "serves together, ten events a call (PutEvents' limit), so a batch of N pays about "
        "1/N each; the benchmark sends one request",
        "none per request",
    ),
)

# Calls a warm on-demand request made before issue 38's cuts, and what replaced each.
CALLS_GONE: tuple[tuple[str, str], ...] = (
    (
        "UpdateItem (intent completed)",
        "a fleet's answer is left off its intent until its lease's settle, which stores it in "
        "its TransactWriteItems (service/launch/send.py, `deferring`; adapters/pool_leases.py): "
        "a settled lease's intents are done. Why each promise holds: *no duplicate launch*: a "
        "worker that dies between CreateFleet and that settle leaves the intent pending, as one "
        "that died before the UpdateItem did; the redelivery sends it again, under live leases "
        "only, with its ClientToken, and EC2 answers with its first answer "
        "(https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-idempotency.html; the "
        "emulator models it, test_moto_fleets); *exact limits*: the lease, the members and the "
        "answer are one transaction; *nothing lost, events find their instance*: the instance "
        "records ride the same transaction, and the replay writes them if it never ran; "
        "*reservation slots taken once*: a reserved attempt claims its slots in the transaction "
        "that writes its intent (a replay of a pending intent knows they are claimed: the next "
        "section), and the slots a fleet's instances took in reservations it did not claim are "
        "noted with its answer, in the settle's transaction, only while the intent is pending "
        "(a replay of a done intent notes none; of a pending one, what nothing noted); an "
        "attempt that gives claimed slots back stores its answer at once with them; so does one "
        "that launched "
        "nothing (the request may end in another pool, with no settle here). An answer no "
        "settle carried (a lease settled already, a visit ending on an exception) is stored "
        "before the visit ends, and one whose instances a gang short of minCount, a single-zone "
        "roll-back or a reclaimed lease terminates, before they are terminated. Tests: "
        "tests/integration/test_intent_done_with_settle.py (its first test fails on the code "
        "before: UpdateItem 1), the redelivery tests (tests/integration, `grep -l redeliver`), "
        'whose deaths "at complete_intent" now also die where the settle would store the '
        "answer (tests/support/crashes.py)",
    ),
    (
        "UpdateItem (idempotency completed)",
        "the request's final record is the claim's completion (service/launch/intake.py)",
    ),
    (
        "DescribeInstances (where each instance landed)",
        "an on-demand attempt whose instances EC2 could have put in no open reservation is "
        "located by CreateFleet's answer: its class's preference is `none`, or no open "
        "reservation of the account (the sync's unfiltered list, carried in the class's shared "
        "resolution the container holds) is of a type and zone they landed in. One that could "
        "asks as before, so the record names the reservation; an open reservation made in the "
        "minutes before the container sees the sync's list is the one way an instance's record "
        "says on-demand in one (docs/operations.md, *Where an instance landed*)",
    ),
    (
        "BatchWriteItem (instance records)",
        "each instance's record is put in the lease settle's TransactWriteItems that counts it "
        "as a member (adapters/pool_leases.py): still stored before the request's record, so a "
        "record write that fails after the settle leaves every instance's item for its "
        "termination event and the redelivery (the trap branch wip/calls-records-txn fell in, "
        "merging them with the request records); records the settle did not write (instances "
        "reconciliation counted already, a lease settled already) go in one BatchWriteItem as "
        "before",
    ),
)


def purposes() -> list[str]:
    """The table of CALL_PURPOSES, then the calls gone (docs/BENCHMARKS.md)."""
    lines = ["| # | call | what it buys | how it could go |", "|---|---|---|---|"]
    for n, (call, buys, could) in enumerate(CALL_PURPOSES, 1):
        lines.append(f"| {n} | {call} | {buys} | {could} |")
    lines += ["", "Gone (a warm request made them before issue 38's cuts):", ""]
    lines += [f"- {call}: {instead}" for call, instead in CALLS_GONE]
    return lines


@dataclass(frozen=True)
class Point:
    offerings: int
    calls: dict[str, int]  # by operation
    claim_writes: int  # writes to the ICE table: claims and their release (no ICE entry here)

    @property
    def total(self) -> int:
        return sum(self.calls.values())


@dataclass(frozen=True)
class Curve:
    label: str
    points: list[Point]


@dataclass(frozen=True)
class Result:
    ours: Curve
    baseline: Curve


_READS = ("Scan", "GetItem", "BatchGetItem", "Query")


@contextmanager
def _counting(ice_table: str) -> Iterator[Counter[str]]:
    """Calls by operation, and `ice-writes`: those writing to `ice_table`."""
    from capacity_launcher.adapters import aws

    calls: Counter[str] = Counter()
    lock = threading.Lock()

    def note(params: dict[str, Any], model: Any, **_: Any) -> None:
        tables = {params.get("TableName"), *params.get("RequestItems", {})}
        for item in params.get("TransactItems", []):
            tables |= {op.get("TableName") for op in item.values() if isinstance(op, dict)}
        with lock:
            calls[model.name] += 1
            if ice_table in tables and model.name not in _READS:
                calls[_ICE_WRITES] += 1

    clients = [aws.client(s) for s in SERVICES]
    for made in clients:
        made.meta.events.register("provide-client-params", note, unique_id="offering-calls")
    try:
        yield calls
    finally:
        for made in clients:
            made.meta.events.unregister("provide-client-params", unique_id="offering-calls")


def _types(ec2: Any, count: int) -> list[str]:
    """`count` current-generation x86_64 types EC2 offers in ZONE, by name."""
    offered: set[str] = set()
    pages = ec2.get_paginator("describe_instance_type_offerings").paginate(
        LocationType="availability-zone", Filters=[{"Name": "location", "Values": [ZONE]}]
    )
    for page in pages:
        offered |= {o["InstanceType"] for o in page["InstanceTypeOfferings"]}
    found = [
        t["InstanceType"]
        for page in ec2.get_paginator("describe_instance_types").paginate()
        for t in page["InstanceTypes"]
        if t["InstanceType"] in offered
        and "x86_64" in t["ProcessorInfo"]["SupportedArchitectures"]
        and t.get("CurrentGeneration")
        and not t.get("BareMetal")
    ]
    return sorted(found)[:count]


def _one(offerings: int) -> Point:
    import moto_capacity
    from benchmarks.scene import POOL, bench_cloud, request
    from tests.support.cloud import (
        an_image,
        capacity_type,
        default_security_group,
        default_subnets,
        instance_type,
        node_class,
        node_pool,
    )

    with bench_cloud() as cloud:
        moto_capacity.set_consistency(0, 0)
        subnet = default_subnets(cloud.ec2)[ZONE]
        types = _types(cloud.ec2, offerings)
        assert len(types) == offerings, (offerings, len(types))
        cloud.apply(
            node_class(
                "bench-class",
                [subnet],
                an_image(cloud.ec2),
                securityGroupIds=[default_security_group(cloud.ec2)],
            ),
            node_pool(
                POOL,
                "bench-class",
                requirements=[capacity_type("on-demand"), instance_type(*types)],
            ),
        )
        # The minute's sync has run, as it has before any warm request in a deployment: the
        # container reads the class's shared resolution (and what it carries) from it.
        cloud.adapters().reservation_sync().run()
        batch = cloud.batch
        cloud.send(request("warm-up"), batch=batch)  # the container is warm from here on
        with _counting(cloud.names.unavailable_offerings_table) as calls:
            failed = cloud.send(request("counted"), batch=batch)
        record = cloud.record("counted")
        assert not failed, failed
        assert record is not None, offerings
        assert record.launched == 1, record
    writes = calls.pop(_ICE_WRITES, 0)
    return Point(offerings, dict(calls), writes)


def measure(sizes: Sequence[int] = OFFERINGS) -> list[Point]:
    return [_one(n) for n in sizes]


def _measure_in(root: Path) -> list[Point]:
    """This file's measurement over `root`'s code (its layers, local, tests, benchmarks). The
    child imports only what the baseline's tree has: benchmarks/revisions.py is this run's."""
    from benchmarks.revisions import measured_in

    return [
        Point(p["offerings"], p["calls"], p["claim_writes"]) for p in measured_in(root, __file__)
    ]


def _baseline(revision: str) -> list[Point]:
    from benchmarks.revisions import extracted

    with extracted(revision) as folder:
        return _measure_in(folder)


def run(baseline: str = BASELINE) -> Result:
    from benchmarks.revisions import REPO

    theirs = _baseline(baseline)
    ours = _measure_in(REPO)
    return Result(Curve("this revision", ours), Curve(f"{baseline} (before)", theirs))


def flat(curve: Curve) -> bool:
    return len({p.total for p in curve.points}) == 1


def by_operation(calls: dict[str, int]) -> str:
    """`Op n, ...`, by operation name."""
    return ", ".join(f"{k} {v}" for k, v in sorted(calls.items()))


def render(result: Result) -> str:
    # Imported here, not above: `_measure_in` runs this file over a baseline's tree, which may
    # have no benchmarks/markdown.py.
    from benchmarks import markdown

    columns = (
        "offerings in the fleet",
        "AWS calls, this revision",
        "before",
        "ratio",
        "ICE-table claim writes and deletes, this revision (before)",
        "by operation, this revision",
    )
    rows = []
    for mine, theirs in zip(result.ours.points, result.baseline.points, strict=True):
        ratio = mine.total / theirs.total if theirs.total else 0.0
        rows.append(
            (
                mine.offerings,
                mine.total,
                theirs.total,
                f"{ratio:.2f}x",
                f"{mine.claim_writes} ({theirs.claim_writes})",
                by_operation(mine.calls),
            )
        )
    return "\n".join(markdown.table(columns, rows))


def section(result: Result) -> list[str]:
    """The report's section (docs/BENCHMARKS.md)."""
    from benchmarks import markdown

    return markdown.section(
        "AWS calls per warm on-demand request, against the offerings in its fleet (issue 38)",
        "`benchmarks/offering_calls.py` (`python -m benchmarks.offering_calls` runs it alone): "
        "one pool of N x86_64 types in one zone, every offering healthy, the minute's sync run "
        "once, a warm container, one request for one instance; every call of the service's "
        "shared clients, by operation. "
        f"Baseline, in the same run: revision `{result.baseline.label.split()[0]}` (extracted "
        "with `git archive`), which claimed each offering with a PutItem and released it with a "
        "DeleteItem, one after another. A healthy offering is now asked about without a claim "
        "(docs/operations.md, *The ICE cache and single flight*), so the curve is flat.",
        render(result).splitlines(),
        "What each call buys, in the order a request makes them (traced with each call's "
        "caller), and how it could go: each -1 names what it would need to keep every promise "
        "(exact limits, no duplicate launch on redelivery, nothing lost, a termination event "
        "always finding its instance), and why it is not made:",
        purposes(),
    )


def main() -> int:
    if "--json" in sys.argv:
        points = measure()
        print(json.dumps([asdict(p) for p in points]))
        return 0
    print(render(run()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
