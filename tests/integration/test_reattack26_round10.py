"""Issue 26, round ten of the re-attack (from a fresh clone).

- A model held kernel memory, which RLIMIT_AS never counts, in POSIX timers (96,551 of them,
  +37 MB of slab, on a machine with 23 GB; RLIMIT_SIGPENDING grows with the machine) and in
  real-time signals queued to itself while blocked: both were bounded only by the machine's
  default RLIMIT_SIGPENDING, and under a root worker each sandbox has a user of its own.
- Failure reasons showed a path with a leading "//" (which POSIX and pathlib keep) whole, and
  the end of a quoted path holding both quotes (Python's repr escapes one: '/srv/it\'s "x"/y').

This module is also the probe's loader (`tests.integration.test_reattack26_round10:load`).
"""

from __future__ import annotations

import ctypes
import errno
import os
import threading

import pytest

from tests.conftest import ROOT
from tests.integration.test_reattack26_round3 import needs_sandbox
from tests.integration.test_reattack26_round9 import Round9Probe

LOADER = "tests.integration.test_reattack26_round10:load"
CLOCK_MONOTONIC = 1
SI_QUEUE = -1
NR_RT_TGSIGQUEUEINFO = 297  # x86-64


class Round10Probe(Round9Probe):
    def timers(self, n: int) -> list[int]:
        """POSIX timers made (each held in kernel memory), and the errno that stopped them."""
        libc = ctypes.CDLL(None, use_errno=True)
        made, err = 0, 0
        tid = ctypes.c_void_p()
        for _ in range(n):
            if libc.timer_create(CLOCK_MONOTONIC, None, ctypes.byref(tid)) != 0:
                err = ctypes.get_errno()
                break
            made += 1
        return [made, err]

    def queue_signals(self, n: int) -> list[int]:
        """Real-time signals queued to itself while blocked (each held in kernel memory), and
        the errno that stopped them; then taken back, as they would end the process."""
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        sig = signal.SIGRTMIN
        signal.signal(sig, lambda *_: None)
        signal.pthread_sigmask(signal.SIG_BLOCK, [sig])
        info = (ctypes.c_int * 32)(sig, 0, SI_QUEUE)
        made, err = 0, 0
        try:
            for _ in range(n):
                if libc.syscall(NR_RT_TGSIGQUEUEINFO, os.getpid(), threading.get_native_id(), sig, info) != 0:
                    err = ctypes.get_errno()
                    break
                made += 1
        finally:
            while signal.sigtimedwait([sig], 0) is not None:
                pass
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
        return [made, err]


def load(fmt: str, data: bytes, config: dict | None) -> Round10Probe:
    return Round10Probe()


@pytest.fixture
def sandbox(monkeypatch):
    from workers.sandbox import SandboxedModel

    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    model = SandboxedModel(LOADER, "probe", b"", None, limits={"call_s": 30})
    yield model
    model.close()


def _slab_kb() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("Slab:"):
                return int(line.split()[1])
    return 0


@needs_sandbox
def test_a_model_cannot_hold_kernel_memory_in_timers_or_queued_signals(sandbox):
    before = _slab_kb()
    made, err = sandbox.call("timers", 1_000_000)
    held_mb = (_slab_kb() - before) >> 10
    assert made <= 64 and err == errno.EAGAIN, (made, errno.errorcode.get(err), f"slab +{held_mb} MB")
    made, err = sandbox.call("queue_signals", 1_000_000)
    assert made <= 64 and err == errno.EAGAIN, (made, errno.errorcode.get(err))
    assert sandbox.call("pid") > 0  # the model still answers


@pytest.mark.parametrize(
    "text, shown",
    [
        # POSIX keeps a leading "//" (pathlib too: str(Path("//srv/x")) is "//srv/x")...
        ("could not read //srv/proctor/x.csv now", "could not read <path> now"),
        ("No such file or directory: '//home/jane/keys'", "No such file or directory: '<path>'"),
        # ...and a URL's "//host/path" stays a URL
        ("see https://example.org/var/x", "see https://example.org/var/x"),
        # Python's repr of a path holding both quotes escapes the one it is quoted with
        ("cannot read: " + repr("/srv/it's \"x\"/y.csv") + " now", "cannot read: '<path>' now"),
        ("cannot read: " + repr("/srv/Jane's \"Q1\" plans/y.csv"), "cannot read: '<path>'"),
    ],
)
def test_failure_reasons_blank_paths_with_two_slashes_or_escaped_quotes(text, shown):
    from app import jobs

    assert jobs.failure_reason(ValueError(text)) == shown
