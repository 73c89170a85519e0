"""Counts PostgreSQL round trips at the driver in every process that imports it (bench/crowd.py
puts this folder on PYTHONPATH with PROCTOR_BENCH_ROUNDTRIPS=<folder> for the processes it
measures): each statement psycopg sends, the BEGIN it sends first outside autocommit, each
COMMIT or ROLLBACK that reaches the server (SQLAlchemy's pre-ping is a statement: counted).
The count lives in an 8-byte file per process, <folder>/<pid>, mapped into memory: a write
costs nothing and the bench reads the files at the window's edges."""

import os

_DIR = os.environ.get("PROCTOR_BENCH_ROUNDTRIPS")


def _install(folder: str) -> None:
    import mmap
    import struct
    import threading

    import psycopg
    from psycopg import pq

    path = os.path.join(folder, str(os.getpid()))
    with open(path, "wb") as f:
        f.write(b"\0" * 8)
    fd = os.open(path, os.O_RDWR)
    buf = mmap.mmap(fd, 8)
    lock = threading.Lock()
    state = [0]
    idle = pq.TransactionStatus.IDLE

    def add(n: int) -> None:
        with lock:
            state[0] += n
            struct.pack_into("q", buf, 0, state[0])

    def wrap_execute(orig):
        def execute(self, *a, **kw):
            conn = self.connection
            begins = not conn.autocommit and conn.pgconn.transaction_status == idle
            add(1 + begins)
            return orig(self, *a, **kw)

        return execute

    def wrap_end(orig):
        def end(self, *a, **kw):
            if self.pgconn.transaction_status != idle:
                add(1)
            return orig(self, *a, **kw)

        return end

    psycopg.Cursor.execute = wrap_execute(psycopg.Cursor.execute)
    psycopg.Cursor.executemany = wrap_execute(psycopg.Cursor.executemany)
    psycopg.Connection.commit = wrap_end(psycopg.Connection.commit)
    psycopg.Connection.rollback = wrap_end(psycopg.Connection.rollback)
    try:
        psycopg.AsyncCursor.execute = _wrap_async(psycopg.AsyncCursor.execute, add, idle)
        psycopg.AsyncConnection.commit = _wrap_async_end(psycopg.AsyncConnection.commit, add, idle)
        psycopg.AsyncConnection.rollback = _wrap_async_end(psycopg.AsyncConnection.rollback, add, idle)
    except AttributeError:
        pass


def _wrap_async(orig, add, idle):
    async def execute(self, *a, **kw):
        conn = self.connection
        add(1 + (not conn.autocommit and conn.pgconn.transaction_status == idle))
        return await orig(self, *a, **kw)

    return execute


def _wrap_async_end(orig, add, idle):
    async def end(self, *a, **kw):
        if self.pgconn.transaction_status != idle:
            add(1)
        return await orig(self, *a, **kw)

    return end


def read(folder: str) -> int:
    """The sum over every process that counted into `folder`."""
    import struct

    total = 0
    for name in os.listdir(folder):
        try:
            with open(os.path.join(folder, name), "rb") as f:
                total += struct.unpack("q", f.read(8))[0]
        except (OSError, struct.error):
            pass
    return total


if _DIR:
    try:
        _install(_DIR)
    except Exception as exc:  # noqa: BLE001 - a bench aid: say so, never stop the process
        print(f"round-trip counter not installed: {exc}")
