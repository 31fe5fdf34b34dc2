"""Keep CPython's cyclic garbage collector out of a planning call.

A recommendation builds thousands of short-lived containers that stay alive until it answers:
the per-request memos (plans, breakdowns, speeds), the verdicts, the explanations. CPython
runs a generation-0 collection whenever allocations exceed deallocations by 700 (``gc``
module docs, "gc.set_threshold"), every tenth of those a generation-1 collection, and every
tenth of those a full one. Each collection traverses every container still alive in the
generations it collects -- here, the request's own working set, none of it garbage yet -- so
a planning call paid for several traversals of memory it was still using. The planner builds
no reference cycles (``tests/planner/test_planner_no_cycles.py``), so refcounting frees all of
it when the call returns.

:func:`collector_paused` switches the collector off for one synchronous planning call and
back on after it. The allocations counted meanwhile trigger one generation-0 collection at
the next allocation, after the call's working set has been freed, so it traverses only what
the answer keeps.

Measured (``python bench/bench_recommend.py`` with ``--no-pause-collector`` for the
baseline; 50,000 offers, medians of 20; collection time read with ``gc.callbacks``): with the
defaults the collector took 0.4-2.7 ms of each request, the full collections (one request
in ten) about 10 ms each.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused(enabled: bool = True) -> Iterator[None]:
    """Run the body with the cyclic collector off, then restore it.

    Args:
        enabled: False leaves the collector alone (the ``GPU_ADVISOR_PAUSE_COLLECTOR``
            setting).

    Only a collector that was on is switched back on, so a process that turned it off
    itself keeps it off. It is process-wide: meant for synchronous code on the event loop's
    thread (the planning calls), where nothing else runs meanwhile. Another thread that
    enters while it is paused leaves it to the first to restore; collection is never
    needed for correctness, only for memory.
    """
    if not enabled or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
