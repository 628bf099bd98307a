"""Long-lived processes freeze what they loaded at start (agentsite/heap.py, issue 18):
full collections no longer walk it. Run in subprocesses: a freeze is for the life of
the process, and the test process is not one to freeze."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def python(code: str) -> str:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "agentsite.settings"}
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.strip()


def test_settle_collects_startup_garbage_then_freezes_the_rest():
    out = python(
        "import gc, weakref\n"
        "from agentsite import heap\n"
        "class Node: pass\n"
        "kept, lost = Node(), Node()\n"
        "lost.me = lost  # a cycle nobody holds: garbage\n"
        "gone = weakref.ref(lost)\n"
        "del lost\n"
        "gc.disable()  # only settle may collect it\n"
        "heap.settle()\n"
        "frozen = gc.get_freeze_count()\n"
        "print(gone() is None, frozen > 0, len(gc.get_objects()) < frozen)"
    )
    assert out == "True True True"


def test_the_asgi_application_freezes_what_it_loaded():
    out = python("import gc\nimport agentsite.asgi\nprint(gc.get_freeze_count())")
    assert int(out) > 100_000  # Django, Channels, DRF, the apps: hundreds of thousands of objects


def test_the_asgi_application_loads_the_url_conf_before_the_first_request():
    """Not in the first request, which held every other one behind its imports."""
    out = python(
        "import sys\nimport agentsite.asgi\n"
        "print(all(name in sys.modules for name in ('agentsite.urls', 'traces.api.urls', 'portal.urls')))"
    )
    assert out == "True"


def test_a_deferring_process_collects_in_full_when_told_and_less_often_by_itself():
    out = python(
        "import gc, weakref\n"
        "from agentsite import heap\n"
        "class Node: pass\n"
        "def garbage():\n"
        "    node = Node()\n"
        "    node.me = node  # a cycle: only the collector frees it\n"
        "    return weakref.ref(node)\n"
        "gc.disable()  # only the calls below may collect\n"
        "first = garbage()\n"
        "print(heap.collect_if_deferred(), first() is not None)  # not deferred: CPython's schedule\n"
        "heap.defer_full_collections()\n"
        "print(gc.get_threshold()[2] == heap.FULL_COLLECTION_EVERY > 10)\n"
        "print(heap.collect_if_deferred() > 0, first() is None)"
    )
    assert out.split() == ["0", "True", "True", "True", "True"]
