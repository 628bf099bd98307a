"""The embedded default's SQLite backend: writers take turns (agentsite/backends/sqlite3/base.py)."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest
from django.contrib.auth.models import Group
from django.db import OperationalError, connection, transaction

from agentsite.backends.sqlite3.base import DatabaseWrapper, WriterTurn, writer_turn

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "sqlite", reason="the SQLite backend"),
]


@pytest.fixture
def other_holder() -> Iterator[int]:
    """A second open file description of the writer lock: another process's view of it."""
    connection.ensure_connection()
    assert connection.turn is not None
    fd = os.open(connection.turn.path, os.O_RDWR | os.O_CREAT, 0o600)
    yield fd
    os.close(fd)


def held_elsewhere(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    fcntl.flock(fd, fcntl.LOCK_UN)
    return False


def test_a_transaction_holds_the_turn_from_begin_to_commit_or_rollback(other_holder: int) -> None:
    assert not held_elsewhere(other_holder)
    with transaction.atomic():
        Group.objects.create(name="a")
        assert held_elsewhere(other_holder)
    assert not held_elsewhere(other_holder)
    with pytest.raises(ZeroDivisionError), transaction.atomic():
        Group.objects.create(name="b")
        assert held_elsewhere(other_holder)
        raise ZeroDivisionError
    assert not held_elsewhere(other_holder)
    assert list(Group.objects.values_list("name", flat=True)) == ["a"]


def test_a_write_outside_a_transaction_waits_for_the_turn(other_holder: int) -> None:
    fcntl.flock(other_holder, fcntl.LOCK_EX)  # another process writes
    done = threading.Event()

    def write() -> None:
        try:
            Group.objects.create(name="later")  # one INSERT in autocommit mode
        finally:
            connection.close()
            done.set()

    writer = threading.Thread(target=write)
    writer.start()
    try:
        assert not done.wait(0.3)
        assert not Group.objects.exists()  # it waited before writing, not after
    finally:
        fcntl.flock(other_holder, fcntl.LOCK_UN)
    assert done.wait(10)
    writer.join()
    assert Group.objects.filter(name="later").exists()
    assert Group.objects.count() == 1  # a read took no turn: it did not wait above


def test_a_turn_not_had_within_the_busy_timeout_fails_as_sqlite_would(other_holder: int) -> None:
    fcntl.flock(other_holder, fcntl.LOCK_EX)
    timeout = connection.turn_timeout
    connection.turn_timeout = 0.2
    try:
        with pytest.raises(OperationalError, match="database is locked"), transaction.atomic():
            Group.objects.create(name="never")
    finally:
        connection.turn_timeout = timeout
        fcntl.flock(other_holder, fcntl.LOCK_UN)
    assert not held_elsewhere(other_holder)  # the failed attempt left nothing held
    Group.objects.create(name="after")  # nor the process's own lock
    assert list(Group.objects.values_list("name", flat=True)) == ["after"]


def test_threads_of_one_process_take_turns_and_lose_no_write() -> None:
    def work() -> None:
        try:
            for _ in range(20):
                with transaction.atomic():
                    Group.objects.create(name=f"{threading.get_ident()}-{Group.objects.count()}")
        finally:
            connection.close()

    threads = [threading.Thread(target=work) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    names = list(Group.objects.values_list("name", flat=True))
    assert len(names) == 120
    # Each transaction read the count and wrote in one turn: no two saw the same count.
    assert len({name.split("-")[1] for name in names}) == 120


def test_a_forked_child_holds_no_turn_and_meets_the_parent_s(tmp_path: object) -> None:
    turn = writer_turn(str(tmp_path) + "/db.sqlite3")
    turn.acquire(1.0)
    pid = os.fork()
    if pid == 0:  # the child: a fresh lock and file description, then the parent's flock in its way
        status = 0
        try:
            if turn._thread_lock.locked() or turn._fd is not None:
                status = 1
            else:
                try:
                    turn.acquire(0.2)
                    status = 2
                except Exception as error:
                    status = 0 if "database is locked" in str(error) else 3
        finally:
            os._exit(status)
    try:
        _, status = os.waitpid(pid, 0)
    finally:
        turn.release()
    assert os.waitstatus_to_exitcode(status) == 0


def test_one_turn_per_database_file_and_none_for_memory(tmp_path: object) -> None:
    path = str(tmp_path) + "/db.sqlite3"
    assert writer_turn(path) is writer_turn(path)
    assert isinstance(writer_turn(path), WriterTurn)
    assert writer_turn(path).path == os.path.realpath(path) + ".writer"
    memory = DatabaseWrapper({**connection.settings_dict, "NAME": ":memory:"}, alias="memory")
    memory.ensure_connection()
    try:
        assert memory.turn is None  # nothing else can open it
        with memory.cursor() as cursor:
            cursor.execute("CREATE TABLE t (x)")
            cursor.execute("INSERT INTO t VALUES (1)")
            cursor.execute("SELECT x FROM t")
            assert cursor.fetchall() == [(1,)]
    finally:
        memory.connection.close()


@pytest.mark.parametrize(
    ("argv", "kept"), [(["manage.py", "qcluster"], None), (["manage.py", "runserver"], 0)]
)
def test_a_worker_cluster_keeps_its_sqlite_connections(
    argv: list[str], kept: int | None, tmp_path: object
) -> None:
    # django-q2's broker asks for its connection anew five times a second; at age 0
    # each time was a new SQLite connection (~2 ms of CPU) in an idle cluster.
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(DJANGO_SETTINGS_MODULE="agentsite.settings", SQLITE_PATH=f"{tmp_path}/db.sqlite3")
    code = (
        f"import sys; sys.argv = {argv!r}; from django.conf import settings; "
        "db = settings.DATABASES['default']; print(db['ENGINE'], db['CONN_MAX_AGE'])"
    )
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["agentsite.backends.sqlite3", str(kept)]
