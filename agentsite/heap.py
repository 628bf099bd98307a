"""What a long-lived process loaded at start, out of the cycle collector's way (issue 18).

CPython's full (generation 2) collection walks every container object the process
holds. Once Django, litellm, the OpenAI SDK and the tools are imported that is
~0.23 million objects in daphne and ~0.5 million in a worker, walked on every full
collection with the interpreter lock held: during 64-run bursts a `gc.callbacks` log
showed daphne's full collections taking 65-405 ms (32-151 ms after this) and the
workers' 150-500 ms (still so after this: what runs make since start is not frozen).

`settle` collects what startup left as garbage, then `gc.freeze()`s the rest:
frozen objects are never walked again (they are still freed by reference counting
when released; only a reference cycle among them would never be reclaimed, which
is why the collection runs first). Called where a process has finished starting:
agentsite/asgi.py once the application is built, the qcluster parent after
traces/runhost.py:preload (its forked workers share the frozen pages: the
collector no longer writes to them), each worker at django-q2's post_spawn
(traces/tasks.py:on_worker_start). Python documents this use of `gc.freeze`.

What a worker's runs make is not frozen: each streamed model call leaves ~390
objects in reference cycles (litellm's stream wrapper and its logging object, the
stream's chunks; ~95 a plain call; counted against the scripted model, whose
HTTP/1.0 replies also leave each call's connection behind), so a worker's full
collections walk and free tens of thousands of them. During a 64-run burst such a
collection held a worker's 16 runs for 66-520 ms (the lock is let go and taken back while garbage is freed,
and every thread of the process wants it). `defer_full_collections` (each worker, at
its start) raises CPython's third threshold from 10 to `FULL_COLLECTION_EVERY`, and
the run host collects in full when its last run ends
(traces/runhost.py:RunHost._run -> `collect_if_deferred`): a burst's garbage is
freed once nothing is waiting, and a worker that is never idle still collects,
5x less often.
"""

from __future__ import annotations

import gc

# Full collections of a worker that is never idle: after this many collections of the
# middle generation (CPython's default is 10; there are ~0.3 a second in a busy worker).
FULL_COLLECTION_EVERY = 50

_deferred = False


def settle() -> None:
    """Collect, then freeze what is left.

    Nothing is counted here: `gc.get_freeze_count()` walks every frozen object (~50 ms
    of CPU for a worker's ~0.47 million), once per process start for a figure nobody read."""
    gc.collect()
    gc.freeze()


def defer_full_collections(every: int = FULL_COLLECTION_EVERY) -> None:
    """Full collections of this process wait for `collect_if_deferred`, or at most `every`
    collections of the middle generation."""
    global _deferred
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, every)
    _deferred = True


def collect_if_deferred() -> int:
    """A full collection now, if this process deferred them (else nothing: a test
    process or a management command keeps CPython's schedule); the objects freed."""
    return gc.collect() if _deferred else 0
