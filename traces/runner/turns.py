"""The runs of one process take turns at their work, first ready first (issue 18).

Many runs share a worker process (traces/runhost.py), each in its thread. When their
model calls come back together, as a burst's do, the interpreter lock shares the CPU
among all of them at once: every run's step takes as long as the whole wave's, they
finish the step together, wait on the model together, and the next step is a wave
again, so a burst pays the wave's time at every step. Taken in turns, the run that was
ready first finishes its step first and its next call is out while the others work:
the runs leave a wave spread out and stay so, and a burst pays the wave about once.

A run holds its turn while it works, from its `run_started` event
(`traces/runner/setup.py:RunSetup._in_turns`) to its final commit (its setup before
that, the claim, the project and the tools, does not take turns), and lets it go while it
waits: on its model (`model_call.py`), a tool (`calls.py`), a model call made in its
thread (`Unturned`: a compaction's summary, a router's choice). Giving back and taking
again costs two lock operations. The turn orders runs, it never stops one: a turn held longer than
`AGENT_TURN_SECONDS` (the run waits on something not marked here, or its caller
stopped consuming it) passes to the next run anyway; 0 turns it off.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from django.conf import settings

from traces.process_local import PerProcess
from traces.runner.connections import connection_release

if TYPE_CHECKING:
    from traces.llm import LLMResponse


class Turns:
    """One process's turn: a holder and the runs waiting, first ready first."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holder: object | None = None
        self._since = 0.0
        self._queue: list[tuple[float, int, object, threading.Event]] = []
        self._order = itertools.count()

    def take(self, ready: float, before_waiting: Callable[[], None] = lambda: None) -> object:
        """Wait for the turn; runs that became ready earlier (`ready`, monotonic) go first.
        `before_waiting()` is called when the turn is not free at once."""
        overdue = settings.AGENT_TURN_SECONDS or 0.5
        token = object()
        with self._lock:
            if self._holder is None:
                self._holder, self._since = token, time.monotonic()
                return token
            granted = threading.Event()
            heapq.heappush(self._queue, (ready, next(self._order), token, granted))
        before_waiting()
        while not granted.wait(overdue):
            with self._lock:
                if not granted.is_set() and time.monotonic() - self._since > overdue:
                    self._pass_on()  # the holder waits on something unmarked: the next one goes
        return token

    def give(self, token: object) -> None:
        """Give the turn back (nothing if it passed on while overdue)."""
        with self._lock:
            if self._holder is token:
                self._pass_on()

    def _pass_on(self) -> None:
        if self._queue:
            _, _, token, granted = heapq.heappop(self._queue)
            self._holder, self._since = token, time.monotonic()
            granted.set()
        else:
            self._holder = None

    @property
    def held(self) -> bool:
        """Whether a run holds the turn now."""
        return self._holder is not None

    @property
    def waiting(self) -> int:
        """Runs waiting for the turn now."""
        with self._lock:
            return len(self._queue)


_turns: PerProcess[Turns] = PerProcess(Turns)


def process_turns() -> Turns:
    """This process's turns."""
    return _turns.get()


_held = threading.local()  # the Turn this thread holds, for waits that know no run


class Turn:
    """One run's place in its process's turns.

    `take()` when it starts to work, `waiting()` around each wait, `give()` at its end;
    a run that waits keeps the place it had (`waiting(again=False)`, a tool) or goes
    in line as ready now (a model reply).
    """

    def __init__(self) -> None:
        self._turns = _turns.get() if settings.AGENT_TURN_SECONDS > 0 else None
        self._token: object | None = None
        self._ready = time.monotonic()
        self._before: Turn | None = None  # what this thread held before (a sub-run in a tool)

    @property
    def held(self) -> bool:
        return self._token is not None

    def take(self) -> None:
        if self._turns is not None and self._token is None:
            # a run waiting for its turn holds no pooled connection: the one working needs one
            self._token = self._turns.take(self._ready, connection_release)
            self._before, _held.turn = getattr(_held, "turn", None), self

    def give(self) -> None:
        if self._turns is not None and self._token is not None:
            token, self._token = self._token, None
            if getattr(_held, "turn", None) is self:
                _held.turn = self._before
            self._before = None
            self._turns.give(token)

    @contextlib.contextmanager
    def waiting(self, *, again: bool = True) -> Iterator[None]:
        """Without the turn for the block; after it, in line as ready now (`again`) or
        with the place held before (a tool mid-step)."""
        held = self.held
        self.give()
        try:
            yield
        finally:
            if held:
                if again:
                    self._ready = time.monotonic()
                self.take()


def held_here() -> Turn | None:
    """The turn this thread's run holds now, if any."""
    turn: Turn | None = getattr(_held, "turn", None)
    return turn if turn is not None and turn.held else None


@contextlib.contextmanager
def waiting_here() -> Iterator[None]:
    """A wait of whatever run holds the turn in this thread (a utility model call made
    deep in a strategy or the memory), keeping its place; nothing without one."""
    turn = held_here()
    if turn is None:
        yield
        return
    with turn.waiting(again=False):
        yield


class Unturned:
    """A model client whose calls, made in a run's thread, wait without the turn."""

    def __init__(self, call: Callable[..., LLMResponse]) -> None:
        self._call = call.call if isinstance(call, Unturned) else call

    def __call__(self, *args: Any, **kwargs: Any) -> LLMResponse:
        with waiting_here():
            return self._call(*args, **kwargs)

    @property
    def call(self) -> Callable[..., LLMResponse]:
        """The client itself."""
        return self._call
