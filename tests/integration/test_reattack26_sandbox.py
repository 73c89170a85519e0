"""Re-attack of issue 26.2: one sandbox must not reach another process without a signal, and
must not write the file system without an open call.

Found from a fresh clone: a model's process (nobody) set another sandbox's RLIMIT_CPU to 1 s
with prlimit64, and that sandbox died at its next call with a false verdict ("ran past its CPU
time limit (3600 s)"); setpriority and sched_setaffinity reniced and pinned it; mknod made files
in world-writable folders and rmdir removed folders, neither needing an open call.

This module is also the probe's loader (`tests.integration.test_reattack26_sandbox:load`),
imported in the sandboxed child before the lock, as native code in an archive would be.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT
from workers.sandbox import ModelRaised, SandboxedModel, SandboxError, sandbox_available

pytestmark = [
    pytest.mark.skipif(sandbox_available() is not None, reason=f"no model sandbox here: {sandbox_available()}"),
    pytest.mark.skipif(platform.machine() != "x86_64", reason="the probe's system call numbers are x86-64's"),
]

LIBC = ctypes.CDLL(None, use_errno=True)
NR = {
    "prlimit64": 302,
    "setpriority": 141,
    "sched_setaffinity": 203,
    "mknod": 133,
    "mknodat": 259,
    "rmdir": 84,
    "chmod": 90,
    "chown": 92,
    "shmget": 29,
    "msgget": 68,
    "semget": 64,
}
IPC_PRIVATE, IPC_CREAT = 0, 0o1000
RLIMIT_CPU = 0
S_IFREG = 0o100000


def _syscall(name: str, *args) -> int:
    ret = LIBC.syscall(ctypes.c_long(NR[name]), *args)
    if ret == -1:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return ret


class _RLimit(ctypes.Structure):
    _fields_ = [("cur", ctypes.c_uint64), ("max", ctypes.c_uint64)]


class Probe:
    def to(self, device):
        return self

    def eval(self):
        return self

    def pid(self):
        return os.getpid()

    def burn(self, seconds: float):
        end = time.process_time() + seconds
        while time.process_time() < end:
            pass
        return True

    def own_limit(self):
        import resource

        return list(resource.getrlimit(resource.RLIMIT_CPU))  # glibc: prlimit64(0, ...)

    def set_cpu_limit(self, pid: int, seconds: int):
        new = _RLimit(seconds, seconds)
        return _syscall("prlimit64", ctypes.c_int(pid), ctypes.c_int(RLIMIT_CPU), ctypes.byref(new), None)

    def read_cpu_limit(self, pid: int):
        old = _RLimit()
        _syscall("prlimit64", ctypes.c_int(pid), ctypes.c_int(RLIMIT_CPU), None, ctypes.byref(old))
        return old.cur

    def renice(self, pid: int):
        return _syscall("setpriority", ctypes.c_int(0), ctypes.c_int(pid), ctypes.c_int(19))

    def renice_user(self):
        """PRIO_USER, who 0: every process of its user, another model's sandbox included."""
        return _syscall("setpriority", ctypes.c_int(2), ctypes.c_int(0), ctypes.c_int(19))

    def pin(self, pid: int):
        mask = ctypes.c_ulong(1)
        return _syscall("sched_setaffinity", ctypes.c_int(pid), ctypes.c_size_t(8), ctypes.byref(mask))

    def errno_of(self, method: str, *args):
        """The kernel's answer to a call: 0 when it worked, else its errno (EPERM: the filter)."""
        try:
            getattr(self, method)(*args)
            return 0
        except OSError as exc:
            return exc.errno

    def make_file(self, path: str):
        return _syscall("mknod", ctypes.c_char_p(path.encode()), ctypes.c_uint(S_IFREG | 0o666), ctypes.c_ulong(0))

    def make_file_at(self, path: str):
        return _syscall(
            "mknodat",
            ctypes.c_int(-100),
            ctypes.c_char_p(path.encode()),
            ctypes.c_uint(S_IFREG | 0o666),
            ctypes.c_ulong(0),
        )

    def remove_folder(self, path: str):
        return _syscall("rmdir", ctypes.c_char_p(path.encode()))

    def shared_memory(self, size: int):
        return _syscall("shmget", ctypes.c_int(IPC_PRIVATE), ctypes.c_size_t(size), ctypes.c_int(IPC_CREAT | 0o600))

    def message_queue(self):
        return _syscall("msgget", ctypes.c_int(IPC_PRIVATE), ctypes.c_int(IPC_CREAT | 0o600))

    def semaphores(self):
        return _syscall("semget", ctypes.c_int(IPC_PRIVATE), ctypes.c_int(1), ctypes.c_int(IPC_CREAT | 0o600))


def load(fmt: str, data: bytes, config: dict | None) -> Probe:
    return Probe()


LOADER = "tests.integration.test_reattack26_sandbox:load"


def _outcome(model, *call):
    try:
        return f"allowed: {model.call(*call)!r}"
    except ModelRaised as exc:
        return exc.kind


def test_one_sandbox_cannot_change_another_processes_limits_priority_or_cpus(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    one = SandboxedModel(LOADER, "probe", b"", None)
    other = SandboxedModel(LOADER, "probe", b"", None)
    try:
        victim = other.call("pid")
        assert one.call("own_limit")[0] > 0  # its own limits stay readable (getrlimit)
        outcomes = {
            (probe, *args): _outcome(one, probe, *args)
            for probe, *args in (
                ("read_cpu_limit", victim),
                ("set_cpu_limit", victim, 1),
                ("renice", victim),
                ("renice_user",),
                ("pin", victim),
                ("set_cpu_limit", os.getpid(), 1),
            )
        }
        assert set(outcomes.values()) == {"PermissionError"}, outcomes
        # The other model still runs, with its own limits.
        try:
            assert other.call("burn", 1.5) is True
        except SandboxError as exc:
            pytest.fail(f"one model's process ended another's: {exc}")
    finally:
        one.close()
        other.close()


def test_a_sandbox_cannot_make_or_remove_files_without_opening_them(request, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    import shutil
    import tempfile

    # Reachable by the sandbox's user (tmp_path's parents are 0700: EACCES would hide the hole).
    shared = Path(tempfile.mkdtemp(prefix="proctor-reattack26-"))
    request.addfinalizer(lambda: shutil.rmtree(shared, ignore_errors=True))
    os.chmod(shared, 0o1777)  # like /tmp or /dev/shm
    empty = shared / "empty"
    empty.mkdir()
    if os.geteuid() == 0:
        os.chown(empty, 65534, 65534)  # the sandbox's user's own
    model = SandboxedModel(LOADER, "probe", b"", None)
    try:
        outcomes = {
            "mknod": model.call("errno_of", "make_file", str(shared / "made")),
            "mknodat": model.call("errno_of", "make_file_at", str(shared / "made-at")),
            "rmdir": model.call("errno_of", "remove_folder", str(empty)),
        }
    finally:
        model.close()
    assert outcomes == dict.fromkeys(outcomes, errno.EPERM), outcomes
    assert sorted(p.name for p in shared.iterdir()) == ["empty"]


def test_a_sandbox_cannot_make_system_v_ipc_objects(monkeypatch):
    """Round 2 of the re-attack: shmget made 256 MB segments that outlived the sandbox (outside
    its memory limit, owned by the user every sandbox shares); message queues and semaphores
    the same. All three are refused now."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    model = SandboxedModel(LOADER, "probe", b"", None)
    try:
        outcomes = {
            m: model.call("errno_of", m, *a)
            for m, *a in (("shared_memory", 1 << 20), ("message_queue",), ("semaphores",))
        }
    finally:
        model.close()
    assert outcomes == dict.fromkeys(outcomes, errno.EPERM), outcomes
