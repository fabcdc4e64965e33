"""`submit --dry-run` shows what the launcher would offer, in its order and after its cut: the
offerings of Karpenter's general-purpose pool (c, m and r types of every generation after the
second, hundreds of them in three zones) are offered as the launch offers them, at most 100 a
CreateFleet, and the preview says how many were left out and why (issue 40)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from capacity_launcher.domain.capacity.fleet import MAX_OVERRIDES_PER_FLEET
from capacity_launcher.domain.launch_request import LaunchRequest
from capacity_launcher.domain.records.status import RequestStatus
from capacity_launcher.service.launch.progress import Context
from capacity_launcher.service.preview import Usage, preview
from tests.integration.test_launch_into_reservations import setup_pool
from tests.support.cloud import Cloud, apply_karpenter_example, launch_request

EXAMPLE = Path(__file__).resolve().parents[2] / "examples/karpenter/v1/general-purpose.yaml"
POOL = "general-purpose"


@pytest.fixture
def broad_pool(cloud: Cloud) -> None:
    apply_karpenter_example(cloud, EXAMPLE)


def read_only(cloud: Cloud) -> tuple[Context, Usage]:
    """What a dry run reads with: the launch's ports, read only, and the stored usage."""
    adapters = cloud.adapters()
    context = Context(
        adapters.launch_ports(read_only=True),
        clock=adapters.clock,
        max_attempts=4,
        sleep=adapters.pause,
    )
    return context, Usage(adapters.pool_usage(), adapters.quota_usage())


def offered(fleet_input: dict[str, Any]) -> list[str]:
    """A CreateFleet's offerings in the order of their first override."""
    overrides = [o for c in fleet_input["LaunchTemplateConfigs"] for o in c["Overrides"]]
    by_priority = sorted(overrides, key=lambda o: o["Priority"])
    return list(dict.fromkeys(f"{o['InstanceType']} {o['AvailabilityZone']}" for o in by_priority))


def test_the_dry_run_offers_what_the_launch_offers_in_its_order_and_names_the_cut(
    cloud: Cloud, broad_pool: None, fleet_inputs: list[dict[str, Any]]
) -> None:
    # Given a pool whose candidates are far more than one CreateFleet may offer
    context, usage = read_only(cloud)
    # When a request for two is previewed
    ask = LaunchRequest(requestId="order-1", nodePool=POOL, count=2)
    (pool,) = preview(context, ask, usage).to_dict()["pools"]
    # Then its one attempt, on-demand, offers at most the override limit, cheapest first (not
    # the candidates by name: c3.2xlarge first), and says how many the cut left out and why
    (attempt,) = pool["attempts"]
    assert attempt["capacityType"] == "on-demand"
    shown = attempt["offerings"]
    assert 0 < len(shown) <= MAX_OVERRIDES_PER_FLEET
    assert shown != sorted(shown)
    left_out = attempt["candidatesLeftOut"]
    assert left_out["reason"] == "OverrideLimit"
    assert left_out["offered"] == len(shown)
    assert left_out["overrideLimit"] == MAX_OVERRIDES_PER_FLEET
    assert left_out["leftOut"] > 0 and left_out["instanceTypes"]
    assert not set(left_out["instanceTypes"]) & {s.split()[0] for s in shown}
    assert attempt["count"] == 2

    # And when the same request is launched, its CreateFleet offers exactly those, in that order
    assert cloud.send(launch_request("order-1", nodePool=POOL, count=2)) == []
    record = cloud.record("order-1")
    assert record is not None and record.status is RequestStatus.FULFILLED
    assert offered(fleet_inputs[0]) == shown
    # And its record names the same cut the preview showed
    assert record.candidates_left_out is not None
    assert record.candidates_left_out.to_dict() == left_out


def test_the_dry_run_cuts_its_attempts_to_what_the_pool_s_limits_lease(
    cloud: Cloud, subnets: dict[str, str], image: str
) -> None:
    # Given an on-demand pool limited to 7 instances, 3 of them running
    setup_pool(cloud, subnets, image, capacity_types=("on-demand",), limits={"instances": "7"})
    assert cloud.send(launch_request("fill", nodePool="general", count=3)) == []
    context, usage = read_only(cloud)
    # When a request for 20 is previewed
    ask = LaunchRequest(requestId="cut-1", nodePool="general", count=20)
    answer = preview(context, ask, usage)
    # Then its attempt asks for the 4 a lease would take, as the launch would (it showed 20)
    (pool,) = answer.to_dict()["pools"]
    assert pool["wouldLease"] == 4
    assert [a["count"] for a in pool["attempts"]] == [4]
    assert answer.would_launch
    # And a gang that needs more than the limits leave now would not be tried (it said it would)
    gang = LaunchRequest(requestId="cut-2", nodePool="general", count=20, minCount=5)
    waits = preview(context, gang, usage)
    assert waits.to_dict()["pools"][0]["wouldLease"] == 4
    assert not waits.would_launch
    # And the launch agrees: the request for 20 launches 4, the gang none
    assert cloud.send(launch_request("cut-1", nodePool="general", count=20)) == []
    assert cloud.send(launch_request("cut-2", nodePool="general", count=20, minCount=5)) == []
    launched = cloud.record("cut-1")
    assert launched is not None and launched.launched == 4
    refused = cloud.record("cut-2")
    assert refused is not None and refused.launched == 0
    assert [e.code for e in refused.errors] == ["LimitExceeded"]
