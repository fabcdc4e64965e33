"""Round trips: how many AWS calls one request costs a warm launcher container, and in which phase.

Every call any of the launcher's shared clients makes is counted from botocore's event hooks
(`provide-client-params`: once per API call, botocore's retries inside it not counted), with
what it touched (a DynamoDB key family, an EC2 operation) and the phase it was made in: the
innermost frame of the service layer at the time of the call. A scenario warms a container
with one request, then counts the calls of the next one.

`python benchmarks/round_trips.py` measures this tree; `--against REF` also measures REF (a git
revision, extracted with `git archive` into a temporary folder) in the same run, so the two
counts come from the same machine and the same emulator:

    PYTHONPATH=layers/core:local:. .venv/bin/python benchmarks/round_trips.py --against main
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from benchmarks.revisions import extracted, measured_in

SERVICES = ("dynamodb", "ec2", "events", "sqs", "ssm", "resource-groups")
# Frames of these modules are the plumbing a phase calls through, never a phase themselves.
_NOT_A_PHASE = ("capacity_launcher.service.wiring", "capacity_launcher.service.ports")


@dataclass
class Call:
    operation: str
    target: str
    phase: str


@dataclass
class Count:
    scenario: str
    calls: list[Call] = field(default_factory=list)

    @property
    def total(self) -> int:
        return len(self.calls)

    def by(self, key: Callable[[Call], str]) -> Counter[str]:
        return Counter(key(c) for c in self.calls)


def _families(params: dict[str, Any]) -> list[str]:
    """The DynamoDB key families (`Limits`, `Request`...) a call touches, or its table."""
    keys: list[Any] = []
    keys += [params.get("Key"), params.get("Item")]
    for item in params.get("TransactItems", []):
        keys += [op.get("Key") or op.get("Item") for op in item.values() if isinstance(op, dict)]
    for request in params.get("RequestItems", {}).values():
        keys += request.get("Keys", []) if isinstance(request, dict) else []
        for write in request if isinstance(request, list) else []:
            keys += [op.get("Key") or op.get("Item") for op in write.values()]
    keys += [{"pk": v} for v in params.get("ExpressionAttributeValues", {}).values()]
    found = []
    for k in keys:
        if not isinstance(k, dict):
            continue
        value = k.get("pk", k.get("id", k.get("offering", {})))
        text = value.get("S", "") if isinstance(value, dict) else ""
        if text:
            found.append(text.split("#")[0] if "#" in text else text)
    table = str(params.get("TableName", ""))
    if "Idempotency" in table or "idempotency" in table:
        return ["idempotency"]
    if "Unavailable" in table or "unavailable" in table:
        return ["ice-cache"]
    return sorted(set(found)) or [table]


def _phase() -> str:
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        module = str(frame.f_globals.get("__name__", ""))
        if module.startswith("capacity_launcher.service") and not module.startswith(_NOT_A_PHASE):
            return f"{module.rsplit('.', 1)[-1]}.{frame.f_code.co_name}"
        frame = frame.f_back
    return "?"


@contextmanager
def counting(count: Count) -> Iterator[None]:
    from capacity_launcher.adapters import aws

    lock = threading.Lock()

    def note(params: dict[str, Any], model: Any, **_: Any) -> None:
        service = model.service_model.service_name
        target = ",".join(_families(params)) if service == "dynamodb" else service
        call = Call(f"{service}:{model.name}", target, _phase())
        with lock:
            count.calls.append(call)

    clients = [aws.client(s) for s in SERVICES]
    for made in clients:
        made.meta.events.register("provide-client-params", note, unique_id="round-trips")
    try:
        yield
    finally:
        for made in clients:
            made.meta.events.unregister("provide-client-params", unique_id="round-trips")


def _one_request(scenario: str, capacity_types: tuple[str, ...], reserve: bool) -> Count:
    """One pool over one instance type in one zone (a single offering; `offering_calls.py`
    draws the calls against their number), EC2 consistent at once (the emulator's visibility
    delay would add DescribeInstances retries that real EC2 seldom needs)."""
    import moto_capacity
    from benchmarks.scene import POOL, ZONES, bench_cloud, request
    from capacity_launcher.service import wiring
    from capacity_launcher.settings import get_settings
    from tests.support.cloud import (
        an_image,
        capacity_type,
        default_security_group,
        default_subnets,
        instance_type,
        node_class,
        node_pool,
    )

    count = Count(scenario)
    with bench_cloud() as cloud:
        moto_capacity.set_consistency(0, 0)
        subnet = default_subnets(cloud.ec2)[ZONES[0]]
        spec: dict[str, Any] = {"securityGroupIds": [default_security_group(cloud.ec2)]}
        if reserve:
            spec["capacityReservationSelectorTerms"] = [{"tags": {"bench": "round-trips"}}]
            cloud.ec2.create_capacity_reservation(
                InstanceType="m5.large",
                InstancePlatform="Linux/UNIX",
                AvailabilityZone=ZONES[0],
                InstanceCount=4,
                InstanceMatchCriteria="targeted",
                TagSpecifications=[
                    {
                        "ResourceType": "capacity-reservation",
                        "Tags": [{"Key": "bench", "Value": "round-trips"}],
                    }
                ],
            )
        cloud.apply(
            node_class("bench-class", [subnet], an_image(cloud.ec2), **spec),
            node_pool(
                POOL,
                "bench-class",
                requirements=[capacity_type(*capacity_types), instance_type("m5.large")],
            ),
        )
        if reserve:
            wiring.Adapters(get_settings()).reservation_sync().run()
        batch = cloud.batch
        cloud.send(request("warm-up"), batch=batch)  # the container is warm from here on
        with counting(count):
            failed = cloud.send(request("counted"), batch=batch)
        record = cloud.record("counted")
        assert not failed, failed
        assert record is not None, scenario
        assert record.launched == 1, record
        if reserve:
            assert record.instances[0].capacity_reservation_id, record
    return count


def measure() -> list[Count]:
    return [
        _one_request("warm, 1 on-demand instance", ("on-demand",), reserve=False),
        _one_request("warm, 1 instance into a targeted ODCR", ("reserved",), reserve=True),
    ]


def _measure_in(root: Path) -> list[Count]:
    """Run this file's measurement with `root`'s code (its own layers, local, tests, benchmarks)."""
    return [
        Count(c["scenario"], [Call(**x) for x in c["calls"]])
        for c in measured_in(root, __file__, flags=())
    ]


def _render(label: str, counts: list[Count]) -> str:
    lines = [f"## {label}"]
    for count in counts:
        lines.append(f"\n### {count.scenario}: {count.total} AWS calls\n")
        lines.append("| phase | calls | what |")
        lines.append("|---|---:|---|")
        phases: dict[str, list[Call]] = {}
        for call in count.calls:
            phases.setdefault(call.phase, []).append(call)
        for phase, calls in phases.items():
            what = Counter(f"{c.operation} {c.target}" for c in calls)
            text = ", ".join(f"{w} x{n}" if n > 1 else w for w, n in what.items())
            lines.append(f"| {phase} | {len(calls)} | {text} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", help="a git revision measured in the same run")
    parser.add_argument("--json", action="store_true", help="machine-readable (one line)")
    args = parser.parse_args()
    if args.json:
        counts = measure()
        print(
            json.dumps(
                [{"scenario": c.scenario, "calls": [asdict(x) for x in c.calls]} for c in counts]
            )
        )
        return 0
    root = Path(__file__).resolve().parents[1]
    sections = []
    if args.against:
        with extracted(args.against) as folder:
            baseline = _measure_in(folder)
        sections.append(_render(f"{args.against} (baseline)", baseline))
    mine = _measure_in(root)
    sections.append(_render("this tree", mine))
    if args.against:
        pairs = zip(baseline, mine, strict=True)
        rows = [f"| {b.scenario} | {b.total} | {m.total} |" for b, m in pairs]
        header = "## totals\n\n| scenario | baseline | this tree |\n|---|---:|---:|"
        sections.append("\n".join([header, *rows]))
    print("\n\n".join(sections))
    return 0


if __name__ == "__main__":
    sys.exit(main())
