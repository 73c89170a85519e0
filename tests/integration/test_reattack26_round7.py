"""Issue 26, round seven of the re-attack (from a fresh clone): the sandbox probed again.

- A model could raise its own RLIMIT_NOFILE to the hard limit (20,000 here, a million in some
  containers) and fill pipes, a page of kernel memory apiece that its address-space limit
  never sees: 9,997 pipes held 63 MB of the machine's memory here, and a million descriptors
  would hold gigabytes.
- An answer's JSON header within its 4 MB floor could still hold 290,000 empty lists, which the
  worker decoded into 131 MB (tracemalloc: about 100 MB of Python objects).

This module is also the probe's loader (`tests.integration.test_reattack26_round7:load`),
imported in the sandboxed child before the lock, as native code in an archive would be.
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource

import pytest

from tests.conftest import ROOT
from tests.integration.test_reattack26_round3 import LIBC, Probe, _errno, needs_sandbox

MFD_CLOEXEC = 1


class Round7Probe(Probe):
    def pipes(self, n: int):
        """Pipes with a byte in each (a page of kernel memory apiece): how many it could make."""
        made = []
        try:
            for _ in range(n):
                r, w = os.pipe()
                os.write(w, b"x")
                made += [r, w]
        except OSError as exc:
            return [len(made) // 2, exc.errno]
        finally:
            for fd in made:
                os.close(fd)
        return [len(made) // 2, 0]

    def lists(self, n: int):
        return [[] for _ in range(n)]

    def words(self, n: int):
        return [f"w{i}" for i in range(n)]

    def raise_nofile(self):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (OSError, ValueError) as exc:
            return [soft, hard, getattr(exc, "errno", -1) or -1]
        return [soft, hard, 0]

    def memfd(self, size: int):
        """memfd_create, then grow it by ftruncate, fallocate and write: the errno of each."""
        fd = LIBC.memfd_create(b"x", MFD_CLOEXEC)
        if fd == -1:
            return [ctypes.get_errno(), -1, -1, -1]
        try:
            grown = _errno(LIBC.ftruncate(fd, ctypes.c_long(size)))
            alloc = _errno(LIBC.fallocate(fd, 0, ctypes.c_long(0), ctypes.c_long(size)))
            try:
                os.write(fd, b"x" * 4096)
                wrote = 0
            except OSError as exc:
                wrote = exc.errno
            return [0, grown, alloc, wrote]
        finally:
            os.close(fd)


def load(fmt: str, data: bytes, config: dict | None) -> Round7Probe:
    return Round7Probe()


@pytest.fixture
def sandbox(monkeypatch):
    from workers.sandbox import SandboxedModel

    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    model = SandboxedModel("tests.integration.test_reattack26_round7:load", "probe", b"", None)
    yield model
    model.close()


@needs_sandbox
def test_a_model_cannot_hold_kernel_memory_in_descriptors(sandbox):
    soft, hard, _ = sandbox.call("raise_nofile")
    assert soft == hard <= 256, (soft, hard)
    made, err = sandbox.call("pipes", 100_000)
    assert made < 128 and err == errno.EMFILE, (made, err)
    # memfd_create works (torch may use it) but holds nothing: no file grows past 0 bytes.
    assert sandbox.call("memfd", 1 << 30) == [0, errno.EFBIG, errno.EFBIG, errno.EFBIG]
    assert sandbox.call("pid") > 0  # the model still answers


@needs_sandbox
def test_a_header_of_many_small_objects_is_refused_before_it_is_decoded(sandbox):
    import tracemalloc

    from workers.sandbox import SandboxError

    assert len(sandbox.call("words", 50_000)) == 50_000  # a large vocabulary is one list
    assert len(sandbox.call("lists", 20_000)) == 20_000
    tracemalloc.start()
    try:
        with pytest.raises(SandboxError, match="over its size limit"):
            sandbox.call("lists", 290_000)  # 4 MB of {"list": []}: under the floor in bytes
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, peak  # the header's bytes, not its objects
