"""Python's cyclic garbage collector, set for the test processes' heap.

A test process keeps a large heap for its whole life: the imported service and its pydantic
models, botocore's service models, moto's backends and catalogues. With Python's defaults (a
collection every 2,000 new container objects, a full one every 100 of those) the collector ran
about every few AWS calls, and each full collection walked all of that heap again: 12 % of the
CPU of three integration files (5.4 of 44.5 s, measured with `gc.callbacks`).

`collect_less_often()` raises the thresholds, so the collector runs a few dozen times per
file instead of a thousand: garbage cycles (each test's cloud, say) are still freed, a little
later. `settle()` collects once, then moves what survives to the permanent generation
(`gc.freeze()`), where no later collection walks it. Frozen objects are still freed by reference
counting; only a cycle among them that dies later stays until the process ends, so it is called
where the heap holds what lives for the whole run: after collection, and after the first test
(which imports and warms what every later test reuses).

Nothing a test observes changes: finalizers and weak references still run when a collection
frees their objects, and a test that needs a collection now calls `gc.collect()`, which still
collects every generation but the permanent one.

`no_plugin_heap_walks()` keeps Hypothesis from loading its plugins' entry points at import: the
one installed, trio's (trio comes with selenium, for the web view's tests), registers trio's
random generator, and Hypothesis checks that registration with a full collection and a
`gc.get_referrers` walk of the whole heap, 0.3 to 0.8 s of CPU in each test process. No test
runs trio."""

from __future__ import annotations

import gc
import os

# Container objects allocated, net, before the youngest generation is collected (Python: 2,000);
# then how many young collections before the middle one, and middle before a full one.
THRESHOLDS = (50_000, 20, 20)


def collect_less_often() -> None:
    gc.set_threshold(*THRESHOLDS)


def settle() -> None:
    """Collect what is garbage now, then keep every survivor out of later collections' walks."""
    gc.collect()
    gc.freeze()


def no_plugin_heap_walks() -> None:
    """Hypothesis, imported later in this process or a process it starts, loads no plugin."""
    os.environ.setdefault("HYPOTHESIS_NO_PLUGINS", "1")
