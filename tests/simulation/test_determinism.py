"""The pieces that make a seed replay, on their own: the interleaver decides the order of workers'
AWS calls from its seed, the seeded executor answers in submission order whatever order it ran
in, two traces are compared line by line, and a reclaim's termination is judged on the policy in
force."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.simulation.determinism import Interleaver, SeededExecutor
from tests.simulation.edge_invariants import Reclaim, _refused
from tests.simulation.operations import quota_document
from tests.simulation.runner import first_difference


def _interleaving(seed: int) -> list[str]:
    interleaver = Interleaver(seed)
    seen: list[str] = []

    def worker(name: str) -> Any:
        def calls() -> str:
            for n in range(5):
                interleaver.checkpoint()  # as before every AWS call
                seen.append(f"{name}{n}")
            return name

        return calls

    answers = interleaver.run([worker("a"), worker("b"), worker("c")])
    assert [result for result, _ in answers] == ["a", "b", "c"]
    return seen


def test_the_interleaving_is_the_seeds() -> None:
    # Given three workers making five calls each, twice with one seed and once with another
    first, again, other = _interleaving(7), _interleaving(7), _interleaving(8)
    # Then one seed orders their calls the same way each time, and the workers did interleave
    assert first == again
    assert first != other
    assert first != sorted(first)


def test_the_seeded_executor_answers_in_submission_order() -> None:
    ran: list[int] = []

    def double(n: int) -> int:
        ran.append(n)
        return 2 * n

    with SeededExecutor(max_workers=4) as pool:
        assert list(pool.map(double, range(6))) == [0, 2, 4, 6, 8, 10]
        assert pool.submit(double, 5).result() == 10
    assert sorted(ran) == [0, 1, 2, 3, 4, 5, 5]


def test_an_exception_is_raised_where_its_answer_is_read() -> None:
    def fail_on_two(n: int) -> int:
        if n == 2:
            raise ValueError("two")
        return n

    answers = SeededExecutor().map(fail_on_two, range(4))
    assert next(answers) == 0 and next(answers) == 1
    with pytest.raises(ValueError, match="two"):
        next(answers)


def test_traces_part_where_a_step_differs() -> None:
    assert first_difference(["a", "b"], ["a", "b"]) is None
    assert "line 2" in (first_difference(["a", "b", "c"], ["a", "x", "c"]) or "")
    assert "3 lines" in (first_difference(["a", "b", "c"], ["a", "b"]) or "")


def _quota(name: str, priority: int, policy: str | None) -> dict[str, Any]:
    document = quota_document(name)
    document["spec"]["priority"] = priority
    if policy is not None:
        document["spec"]["preemption"] = {"reclaimWithinCohort": policy, "gracePeriod": "30s"}
    return document


@pytest.mark.parametrize(
    ("policy", "lender_priority", "owner_priority", "allowed"),
    [
        ("LowerPriority", 100, 50, True),
        ("LowerPriority", 100, 150, False),
        ("Never", 100, 50, False),
        (None, 100, 50, False),
        ("Any", 10, 150, True),
    ],
)
def test_a_reclaim_is_judged_on_the_policy_in_force(
    policy: str | None, lender_priority: int, owner_priority: int, allowed: bool
) -> None:
    reclaim = Reclaim("reclaim-1", "quota-a", "quota-b", True, "pool-1")
    lender = _quota("quota-a", lender_priority, policy)
    owner = _quota("quota-b", owner_priority, None)
    assert (_refused(reclaim, lender, owner) == "") is allowed


def test_an_asked_reclaim_never_terminates() -> None:
    reclaim = Reclaim("reclaim-1", "quota-a", "quota-b", False, "pool-1")
    assert "not enforced" in _refused(reclaim, _quota("quota-a", 100, "Any"), None)


class _Iam:
    """IAM as the profiles see it: the profile exists and holds its role; calls counted."""

    def __init__(self) -> None:
        self.calls = 0

    def get_instance_profile(self, **_: Any) -> dict[str, Any]:
        self.calls += 1
        return {"InstanceProfile": {"Roles": [{"RoleName": "node-role"}]}}


def test_instance_profiles_age_on_the_simulated_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a container's instance profiles made inside the simulated clock, one profile ensured
    from capacity_launcher.adapters import instance_profiles
    from capacity_launcher.domain.apis.config import NodeClass
    from tests.simulation.emulator import SimulatedClock

    node_class = NodeClass.model_validate(
        {"apiVersion": "capacity-launcher/v1", "kind": "NodeClass"}
        | {"metadata": {"name": "c"}}
        | {
            "spec": {"role": "node-role", "imageId": "ami-12345678"}
            | {"subnetIds": ["subnet-1"], "securityGroupIds": ["sg-1"]}
        }
    )
    iam = _Iam()
    with SimulatedClock() as clock:
        profiles = instance_profiles.InstanceProfiles("table", iam, "us-east-1")
        profiles.ensure(node_class)
        asked = iam.calls
        # When the machine's clock runs far past the trust (a slow machine, a long soak)
        wall = instance_profiles.time.monotonic() + 10 * instance_profiles.KNOWN_FOR_SECONDS
        monkeypatch.setattr(instance_profiles.time, "monotonic", lambda: wall)
        profiles.ensure(node_class)
        # Then IAM is not asked again: the run's calls do not depend on the machine's speed
        assert iam.calls == asked
        # And once the simulated clock passes the trust, it is asked again
        clock.advance(instance_profiles.KNOWN_FOR_SECONDS + 1)
        profiles.ensure(node_class)
        assert iam.calls > asked


def test_a_summary_says_when_the_sources_changed_during_the_run(tmp_path: Path) -> None:
    # Given a checkout's sources, and a run that started on them
    from tests.simulation.determinism import code_digest
    from tests.simulation.operations import PROFILES
    from tests.simulation.report import summary
    from tests.simulation.scheduler import Outcome

    handler = tmp_path / "functions" / "launcher" / "app.py"
    handler.parent.mkdir(parents=True)
    handler.write_text("x = 1\n", encoding="utf-8")
    outcome = Outcome(seed=3, profile="soak", code=code_digest(tmp_path))
    outcome.code_at_end = code_digest(tmp_path)
    assert "changed on disk" not in summary(outcome, PROFILES["soak"])
    # When a source is edited while it runs (a merge in the checkout a soak runs in)
    handler.write_text("x = 2\n", encoding="utf-8")
    outcome.code_at_end = code_digest(tmp_path)
    # Then its summary says so: what it loaded after was not the seed's
    assert outcome.code_at_end != outcome.code
    assert "changed on disk" in summary(outcome, PROFILES["soak"])
