"""PerProcess: one object per process, made again in a forked child."""

from __future__ import annotations

import os
import threading

from traces.process_local import PerProcess


def test_one_object_per_process_made_once_across_threads_and_again_after_fork():
    made: list[int] = []

    def make() -> object:
        made.append(os.getpid())
        return object()

    shared = PerProcess(make)
    seen: list[object] = []
    threads = [threading.Thread(target=lambda: seen.append(shared.get())) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert made == [os.getpid()] and all(value is seen[0] for value in seen)
    assert shared.get() is seen[0]

    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # the child: a new object, made once, and the parent's left alone
        try:
            first = shared.get()
            ok = first is not seen[0] and shared.get() is first and made == [os.getppid(), os.getpid()]
            os.write(write, b"ok" if ok else b"no")
        finally:
            os._exit(0)
    os.close(write)
    answer = os.read(read, 2)
    os.waitpid(child, 0)
    assert answer == b"ok"
    assert shared.get() is seen[0] and made == [os.getpid()]
