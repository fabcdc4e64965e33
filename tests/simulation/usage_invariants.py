"""Usage by team (docs/usage.md) against the instances as the emulator lived them, judged at each
quiescence (the sync has just run, so the last window ends moments ago) and so at the run's end.

Each side's times:
- **Stored** (the roll-up): the `hours` of every `Usage#<day>` / `Instances#...` item, summed.
  The watermark only moves by a window's own transaction, so the items hold exactly the windows
  from the first roll-up's watermark (`w0`: the first run only sets it) to the last one's
  `until` (`wn`), each counted once. The watermarks are read every step (`Usage` /
  `CountedUntil`, moto's table, no call), which gives the windows between.
- **Lived** (the emulator): each managed instance is live from its EC2 launch time (moto's
  `launch_time`, on the emulator's clock) to the moment EC2 stopped or terminated it (moto's
  state-transition reason, to the second), and again from the step a start was seen; clipped to
  [`w0`, `wn`).

What the roll-up can know makes the tolerance, per instance and per change of its life inside
the span (its launch, a stop, a start, its end), the length of the window in which it came:
- an instance ended in a window counts to its recorded release (`releasedAt`, when the instance
  event landed, after the end): over by that lag when the release is recorded, and when the
  sync's look came first it counts nothing of that window (under by at most the window); so an
  end also allows the lag to its recorded release (the record's `releasedAt`; the next window
  when a start since has cleared it);
- a launch counts from the record's `launchedAt` (the launcher's clock after CreateFleet; EC2's
  when no record): allowed the difference, and the window (EC2 lists a fresh id only after a
  few seconds, so a sync run just after it misses it for that window);
- a start counts from the window's start (docs/usage.md): the window in which it was seen and
  the one before (the sync may have seen it running before the step that saw it);
- a change at a watermark's own moment (within the resolution): the longer of the two windows
  (a termination as a clock jump ends comes with the sync's look, before or after it);
- plus 2 seconds per change (moto's reason is to the second), and the store's rounding: each
  window adds each bucket's hours rounded to 1e-6 h (adapters/usage_store.py), so half of that
  per window and bucket of the pair (seed 1 of `short` drifts 4e-5 h over 80 windows).

Checked for the total and for every requester and pool (each instance's hours go to the
requester and pool its tags name: a bucket of another pair, or hours moved between pairs, show
as a pair over its tolerance).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.simulation.invariants import Invariants

TOTAL = "usage hours == the instances' lifetimes (quiescent)"
BY_TEAM = "usage hours by requester and pool == their instances' lifetimes (quiescent)"
LIVE = ("pending", "running")
RESOLUTION = 2.0  # seconds per change: moto's reason is to the second
ROUNDING = 0.5e-6  # hours: each window's bucket is stored rounded to 1e-6 h
HOUR = 3600.0


@dataclass
class Life:
    """One managed instance as EC2 lived it: live intervals [start, end) on the emulator clock
    (end None while live); which of the starts were starts after a stop."""

    requester: str
    pool: str
    intervals: list[list[float | None]] = field(default_factory=list)
    restarts: set[int] = field(default_factory=set)  # indexes into intervals

    @property
    def live(self) -> bool:
        return bool(self.intervals) and self.intervals[-1][1] is None


@dataclass(frozen=True)
class Recorded:
    """The instance record's times (epoch seconds), as the roll-up reads them."""

    launched_at: float | None = None
    released_at: float | None = None


def _epoch(text: Any) -> float | None:
    if not text or text == "-":
        return None
    moment = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def _clip(moment: float, w0: float, wn: float) -> float:
    return min(max(moment, w0), wn)


def _window(watermarks: list[float], moment: float) -> float:
    """The length of the roll-up window holding `moment` (0 outside [w0, wn)); of the longer of
    two when `moment` is within the resolution of the watermark between them (a termination at
    the sync's own moment may come before its look or after it)."""
    return max(_holding(watermarks, moment - RESOLUTION), _holding(watermarks, moment + RESOLUTION))


def _holding(watermarks: list[float], moment: float) -> float:
    at = bisect.bisect_right(watermarks, moment)
    if at == 0 or at >= len(watermarks):
        return 0.0
    return watermarks[at] - watermarks[at - 1]


def lived_and_allowed(
    life: Life, recorded: Recorded, watermarks: list[float]
) -> tuple[float, float]:
    """(hours lived inside the counted span, hours the roll-up may differ by), as above."""
    w0, wn = watermarks[0], watermarks[-1]
    lived = allowed = 0.0
    last = len(life.intervals) - 1
    for index, (start, end) in enumerate(life.intervals):
        assert start is not None
        stop = wn if end is None else end
        lived += max(_clip(stop, w0, wn) - _clip(start, w0, wn), 0.0)
        allowed += _window(watermarks, start) + (RESOLUTION if w0 <= start < wn else 0.0)
        if index in life.restarts:
            allowed += _window(watermarks, _before(watermarks, start))
        elif recorded.launched_at is not None:
            allowed += abs(_clip(recorded.launched_at, w0, wn) - _clip(start, w0, wn))
        if end is None:
            continue
        allowed += _window(watermarks, end) + (RESOLUTION if w0 <= end < wn else 0.0)
        released = recorded.released_at if index == last else None
        if released is not None:
            allowed += max(_clip(released, w0, wn) - _clip(end, w0, wn), 0.0)
        else:  # no release recorded (yet), or a start since cleared it: the next window
            allowed += _window(watermarks, _after(watermarks, end))
    return lived / HOUR, allowed / HOUR


def _before(watermarks: list[float], moment: float) -> float:
    at = bisect.bisect_right(watermarks, moment)
    return watermarks[at - 2] if at >= 2 else -1.0


def _after(watermarks: list[float], moment: float) -> float:
    at = bisect.bisect_right(watermarks, moment)
    return watermarks[min(at, len(watermarks) - 1)]  # wn itself: no window


def stored_hours(world: Any, w0: float, wn: float) -> dict[tuple[str, str], tuple[float, int]]:
    """(requester, pool) → the hours the roll-up stored on the days of [w0, wn] ('' absent) and
    in how many buckets."""
    found: dict[tuple[str, str], tuple[float, int]] = {}
    day: date = datetime.fromtimestamp(w0, UTC).date()
    while day <= datetime.fromtimestamp(wn, UTC).date():
        for sk, item in world.partition(f"Usage#{day.isoformat()}").items():
            if sk.startswith("Instances#"):
                key = (_named(item.get("requester")), _named(item.get("nodePool")))
                hours, buckets = found.get(key, (0.0, 0))
                found[key] = (hours + float(item.get("hours", 0)), buckets + 1)
        day += timedelta(days=1)
    return found


def _named(value: Any) -> str:
    return "" if value in (None, "-") else str(value)


class UsageInvariants:
    def __init__(self, invariants: Invariants) -> None:
        self._invariants = invariants
        self.watermarks: list[float] = []
        self.lives: dict[str, Life] = {}
        self._reported: set[str] = set()  # one finding per requester and pool, not per quiescence

    def every_step(self) -> None:
        """Note the roll-up's watermark and every instance's change of life since the last step."""
        world = self._invariants.world
        mark = _epoch(world.partition("Usage").get("CountedUntil", {}).get("countedUntil"))
        if mark is not None and (not self.watermarks or mark > self.watermarks[-1]):
            self.watermarks.append(mark)
        for instance_id, observed in world.instances.items():
            live = observed.state in LIVE
            life = self.lives.get(instance_id)
            if life is None:
                life = self.lives[instance_id] = Life(observed.requester, observed.pool)
                life.intervals.append([observed.launched_at, None])
                if not live:  # launched and gone within one step
                    life.intervals[-1][1] = world.left_live_at(instance_id) or world.now
                continue
            life.requester, life.pool = observed.requester, observed.pool  # tagged late
            if life.live and not live:
                life.intervals[-1][1] = world.left_live_at(instance_id) or world.now
            elif live and not life.live:
                life.restarts.add(len(life.intervals))
                life.intervals.append([world.now, None])

    def after_quiescence(self) -> None:
        if len(self.watermarks) < 2:
            return
        world = self._invariants.world
        w0, wn = self.watermarks[0], self.watermarks[-1]
        stored = stored_hours(world, w0, wn)
        lived: dict[tuple[str, str], list[float]] = {}
        for instance_id, life in self.lives.items():
            record = world.partition(f"Instance#{instance_id}").get("Instance", {})
            recorded = Recorded(_epoch(record.get("launchedAt")), _epoch(record.get("releasedAt")))
            hours, allowed = lived_and_allowed(life, recorded, self.watermarks)
            pair = lived.setdefault((life.requester, life.pool), [0.0, 0.0])
            pair[0] += hours
            pair[1] += allowed
        windows = len(self.watermarks) - 1
        span = f"[{_iso(w0)}, {_iso(wn)}), {windows} windows"
        rounding = {k: windows * buckets * ROUNDING for k, (_, buckets) in stored.items()}
        total = sum(h for h, _ in stored.values())
        expected = sum(h for h, _ in lived.values())
        slack = sum(a for _, a in lived.values()) + sum(rounding.values())
        self._judge(TOTAL, "all", total, expected, slack, span)
        for key in sorted(set(stored) | set(lived)):
            hours, allowed = lived.get(key, [0.0, 0.0])
            name = f"requester {key[0] or '-'} pool {key[1] or '-'}"
            found = stored.get(key, (0.0, 0))[0]
            self._judge(BY_TEAM, name, found, hours, allowed + rounding.get(key, 0.0), span)

    def _judge(
        self, invariant: str, name: str, stored: float, lived: float, allowed: float, span: str
    ) -> None:
        self._invariants.checks[invariant] += 1
        if abs(stored - lived) > allowed + 1e-9 and name not in self._reported:
            self._reported.add(name)
            self._invariants._violate(
                invariant,
                f"{name}: stored {stored:.4f} h, lived {lived:.4f} h, "
                f"allowed ±{allowed:.4f} h over {span}",
            )


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
