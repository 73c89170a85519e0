"""Re-attack of issue 26.3: a model's answer the worker cannot decode is a verdict, whatever its
shape. Found from a fresh clone: an answer whose JSON header nests 100,000 deep (well under the
size limit) made `SandboxedModel.call` raise RecursionError, so a validation ended as "an internal
error (RecursionError)" instead of an "invalid" verdict naming the failed check.

This module is also the probe's loader (`tests.integration.test_reattack26_answer:load`),
imported in the sandboxed child before the lock, as native code in an archive would be; it
writes its answer to the answers pipe itself, as native code could.
"""

from __future__ import annotations

import fcntl
import os
import stat
import struct
import time

import pytest

from tests.conftest import ROOT
from workers.sandbox import SandboxedModel, SandboxError, sandbox_available

pytestmark = pytest.mark.skipif(sandbox_available() is not None, reason=f"no model sandbox here: {sandbox_available()}")


def _answers_fd() -> int:
    """The child's answers: the one write-only pipe it holds."""
    for fd in range(3, 64):
        try:
            flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        except OSError:
            continue
        if stat.S_ISFIFO(os.fstat(fd).st_mode) and flags & os.O_ACCMODE == os.O_WRONLY:
            return fd
    raise RuntimeError("no answers pipe")


def _raw_answer(head: bytes) -> None:
    fd = _answers_fd()
    data = memoryview(struct.pack("<QI", len(head), 0) + head)
    while data:
        data = data[os.write(fd, data) :]
    time.sleep(30)  # no second answer: the parent must not wait for one


class Probe:
    def to(self, device):
        return self

    def eval(self):
        return self

    def pid(self):
        return os.getpid()

    def deep_json(self, depth: int):
        _raw_answer(b'{"result": ' + b"[" * depth + b"]" * depth + b"}")

    def deep_value(self, depth: int):
        _raw_answer(b'{"result": ' + b'{"list": [' * depth + b"]}" * depth + b"}")


def load(fmt: str, data: bytes, config: dict | None) -> Probe:
    return Probe()


# Depths past the decoder's recursion limit and under MAX_HEADER_CONTAINERS (deeper, the count of
# brackets refuses the answer as over its size first: test_reattack26_round7.py).
@pytest.mark.parametrize("call", [("deep_json", 40_000), ("deep_value", 5_000)])
def test_an_answer_nested_too_deep_is_a_malformed_answer_not_an_internal_error(call, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    model = SandboxedModel("tests.integration.test_reattack26_answer:load", "probe", b"", None, limits={"call_s": 20})
    try:
        started = time.monotonic()
        with pytest.raises(SandboxError, match="malformed"):
            model.call(*call)
        assert time.monotonic() - started < 15  # decided from the answer, not by the wall clock
        assert model.call("pid") > 0  # the next call starts afresh
    finally:
        model.close()
