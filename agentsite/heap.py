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
"""

from __future__ import annotations

import gc


def settle() -> int:
    """Collect, then freeze what is left; the number of objects frozen in all."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
