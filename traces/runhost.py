"""The run host: many runs per worker process, each in its own thread (issue 18, W1, W5).

A run spends nearly all its time waiting on the model or a tool, so one django-q2
worker process holds up to AGENT_RUNS_PER_WORKER of them. The task
(traces/tasks.py:run_trace) hands its run to `RunHost.start`, which

- takes a slot, blocking while the process is full: the django-q2 worker then
  takes no further task, so further runs stay queued in the broker (not lost,
  not failed) until a slot frees;
- starts the run in a thread of its own and returns once the run has claimed
  its trace (the lease, traces/runner/store.py:trace_claim), or ended at once
  (a duplicate delivery, a refused run). The task is acknowledged then: from the
  claim on the lease and the sweep guard the run, as they did when one process
  held one run (a killed process's runs lapse and are resumed, W5).

Runs share one model-call pool per process and, on PostgreSQL, a bounded
connection pool (traces/runner/connections.py). Run threads are not daemons: a
worker that recycles or stops lets its runs finish before the process exits.
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import threading
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import connections
from django.utils import timezone

from agentsite import heap
from traces.models import Trace, TraceStatus
from traces.process_local import PerProcess
from traces.runner import AgentRunner, LeaseLost, RunConfig, RunConflict, RunError

logger = logging.getLogger(__name__)

# What came of handing a run over (RunHost.start).
CLAIMED = "claimed"  # the run holds the trace's lease and goes on in its thread
SKIPPED = "skipped"  # a duplicate or superseded delivery: nothing to do
REFUSED = "refused"  # no longer valid: the reservation was given back
CRASHED = "crashed"  # an error before the claim (logged)
FULL = "full"  # no slot freed within the wait


class RunHost:
    """Up to `capacity` runs of this process, each in its own thread."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._slots = threading.BoundedSemaphore(capacity)
        self._lock = threading.Lock()
        self._running: dict[int, str] = {}  # thread id -> trace id
        # One model call in flight per run, plus room for calls a stop abandoned
        # (they end when their HTTP request does); threads start only as needed.
        self.model_pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=2 * capacity, thread_name_prefix="llm"
        )

    @property
    def running(self) -> list[str]:
        """Trace ids of the runs this host holds now."""
        with self._lock:
            return list(self._running.values())

    def start(
        self,
        trace_id: str,
        messages: list[dict[str, Any]],
        config: RunConfig,
        *,
        wait: float | None = None,
    ) -> str:
        """Run `trace_id` in a thread once a slot is free; returns when it claimed the trace or ended.

        Blocks while the process is full, at most `wait` seconds (None: as long as
        it takes); FULL when no slot freed in time (the caller queues the run again).
        """
        if not self._slots.acquire(timeout=wait):
            return FULL
        handed = _Handoff()
        thread = threading.Thread(
            target=self._run, args=(trace_id, messages, config, handed), name=f"run {trace_id}"
        )
        try:
            thread.start()
        except BaseException:
            self._slots.release()
            raise
        return handed.wait()

    def wait_for_room(self, timeout: float) -> bool:
        """Block until a slot is free (without taking it), at most `timeout` seconds."""
        if not self._slots.acquire(timeout=timeout):
            return False
        self._slots.release()
        return True

    def _run(
        self, trace_id: str, messages: list[dict[str, Any]], config: RunConfig, handed: _Handoff
    ) -> None:
        ident = threading.get_ident()
        with self._lock:
            self._running[ident] = trace_id
        outcome = CRASHED
        try:
            outcome = run_in_this_thread(trace_id, messages, config, self.model_pool, on_claim=handed.done)
        except BaseException:
            logger.exception("run of trace %s crashed", trace_id)
        finally:
            connections.close_all()  # this thread's connections; a pool gets them back
            with self._lock:
                self._running.pop(ident, None)
                idle = not self._running
            self._slots.release()
            # A run that never claimed is let go before its caller hears so: when
            # start() answers SKIPPED, the host no longer holds it nor its slot.
            handed.done(outcome)
            if idle:  # no run waits on this process: the collector's pause costs none
                heap.collect_if_deferred()


class _Handoff:
    """The first outcome of a run, from its thread to the task waiting for it."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._outcome = CRASHED

    def done(self, outcome: str) -> None:
        if not self._event.is_set():
            self._outcome = outcome
            self._event.set()

    def wait(self) -> str:
        self._event.wait()
        return self._outcome


def run_in_this_thread(
    trace_id: str,
    messages: list[dict[str, Any]],
    config: RunConfig,
    model_pool: concurrent.futures.Executor | None = None,
    *,
    on_claim: Callable[[str], None] | None = None,
) -> str:
    """Run `trace_id` to its end in the calling thread; returns what came of it.

    A duplicate delivery, or one whose reservation was stopped before it started,
    finds the reservation gone (RunConflict) and does nothing. A run refused at
    preparation (the request was valid when queued but no longer is) gives the
    reservation back with the reason, so the trace does not stay 'running'.
    `on_claim(CLAIMED)` is called once the run holds the trace's lease.
    """
    runner = AgentRunner(model_pool=model_pool)
    try:
        return _claim_and_run(runner, trace_id, messages, config, on_claim)
    finally:
        runner.close()  # lets an own pool go; a shared one stays


def _claim_and_run(
    runner: AgentRunner,
    trace_id: str,
    messages: list[dict[str, Any]],
    config: RunConfig,
    on_claim: Callable[[str], None] | None,
) -> str:
    run = runner.run(messages, config)
    try:
        next(run)  # preparation, up to the claim of the lease (W5)
    except (RunConflict, LeaseLost) as exc:
        logger.info("run of trace %s skipped (duplicate or superseded delivery): %s", trace_id, exc)
        return SKIPPED
    except RunError as exc:
        logger.warning("run of trace %s refused: %s", trace_id, exc)
        reservation_give_back(trace_id=trace_id, config=config, reason=str(exc))
        return REFUSED
    if on_claim is not None:
        on_claim(CLAIMED)
    try:
        for _ in run:
            pass
    except LeaseLost as exc:
        logger.info("run of trace %s superseded: %s", trace_id, exc)
    return CLAIMED


def reservation_give_back(*, trace_id: str, config: RunConfig, reason: str) -> None:
    """End a reservation no worker claimed: back to its old status, or failed with the reason."""
    if config.reserved_token is None:
        return
    Trace.objects.filter(pk=trace_id, status=TraceStatus.QUEUED, run_token=config.reserved_token).update(
        run_request=None,
        status=config.reserved_from or TraceStatus.FAILED,
        error_message=None if config.reserved_from else reason[:2000],
        completed_at=timezone.now(),
        updated_at=timezone.now(),
    )


def reservation_touch(*, trace_id: str, config: RunConfig) -> bool:
    """Mark a reservation as still queued and just sent (so the sweep neither ends it as
    lost nor sends it again at once); False if it is gone."""
    if config.reserved_token is None:
        return True
    now = timezone.now()
    return bool(
        Trace.objects.filter(pk=trace_id, status=TraceStatus.QUEUED, run_token=config.reserved_token).update(
            updated_at=now, queued_at=now
        )
    )


def lower_priority() -> None:
    """Make the qcluster parent, and so the workers it forks, AGENT_WORKER_NICE nicer.

    Runs are background work: when they fill the CPU, the web server's starts,
    requests and live events should not wait behind them (bench/density.py, 256
    runs on 2 cores: the starts land in 1/2-2/3 of the time, live events' p99 20-40 %
    lower, the burst's wall unchanged). Idle cores are not affected: nice only
    orders processes that compete.
    """
    if settings.AGENT_WORKER_NICE:
        os.nice(settings.AGENT_WORKER_NICE)


def preload() -> None:
    """Import, once, what every run's first model call would (issue 18: no cold start).

    Called in the qcluster parent before it forks its workers (traces/apps.py):
    litellm's lazy provider modules, the OpenAI SDK's resources (about 450
    modules, seconds of a first call otherwise), the HTTP stack and the built-in
    tools (BeautifulSoup, Pillow, the browser's modules: ~0.6 s of CPU in each
    worker's first run otherwise, measured with py-spy in bench/density.py). A workerless
    litellm call with `mock_response` walks the request path without a network
    call. Forked workers share these pages; none opens a connection here.
    """
    import h11  # noqa: F401
    import httpcore  # noqa: F401
    import litellm
    import litellm._service_logger
    import litellm.llms.anthropic.chat.handler
    import openai

    from tools.registry import load_builtin_tools

    load_builtin_tools()
    client = openai.OpenAI(api_key="sk-preload", base_url="http://127.0.0.1:9/v1")
    try:
        client.chat.completions.with_raw_response  # noqa: B018 (the access imports the resource)
        client.embeddings  # noqa: B018
    finally:
        client.close()
    litellm.suppress_debug_info = True  # no "Provider List" banner in the log for the unpriced preload model
    # A tool offered, as runs offer theirs: litellm imports its MCP tool handling on
    # the first call with tools (~20 ms of each worker's first run otherwise).
    tool = {"type": "function", "function": {"name": "preload", "parameters": {"type": "object"}}}
    for stream in (False, True):
        reply = litellm.completion(
            model="openai/preload",
            messages=[{"role": "user", "content": "preload"}],
            tools=[tool],
            mock_response="ok",
            stream=stream,
            api_key="sk-preload",
        )
        if stream:
            for _ in reply:
                pass
    # What is loaded now stays shared with the forked workers: the collector no
    # longer walks (and so writes to) these objects, which would copy their pages
    # into every worker on its first collections (agentsite/heap.py).
    heap.settle()


_host = PerProcess(lambda: RunHost(settings.AGENT_RUNS_PER_WORKER))


def run_host() -> RunHost:
    """This process's run host; a forked worker makes its own."""
    return _host.get()
