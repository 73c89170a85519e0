"""Issue 26, round nine of the re-attack: the sandbox.

- A model that forged answers on its answer pipe and then stopped reading its requests hung the
  worker for good: the parent's write of a request (4 MB, past the pipe's 64 KB) blocked with no
  deadline; and its sandbox outlived a worker that died (reparented to init, asleep).
- A forged tensor whose dimensions multiply to 2^64 ([2^29, 2^29, 64]) wrapped to 0 in int64:
  a 0-byte buffer passed the size check and `reshape` raised ValueError, which escaped to the
  job and left the process (its real answer still in the pipe) for the next call.
- On a GPU the sandbox had no memory limit at all (RLIMIT_AS only on the CPU): tested in
  test_sandbox_off_the_cpu.py, on a GPU too.

This module is also the probe's loader (`tests.integration.test_reattack26_round9:load`).
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import struct
import subprocess
import sys
import threading
import time

import pytest

from tests.conftest import ROOT
from tests.integration.test_reattack26_round3 import needs_sandbox
from tests.integration.test_reattack26_round8 import ANSWERS_FD, Round8Probe

LOADER = "tests.integration.test_reattack26_round9:load"


class Round9Probe(Round8Probe):
    def forge_and_hang(self, n: int):
        """Writes n answers of its own (result 7) and never reads a request again."""
        head = b'{"result": 7}'
        os.write(ANSWERS_FD, (struct.pack("<QI", len(head), 0) + head) * n)
        time.sleep(10**6)

    def block(self):
        time.sleep(10**6)

    def prctl(self, option: int, arg: int) -> int:
        """0, or the errno of prctl(option, arg)."""
        libc = ctypes.CDLL(None, use_errno=True)
        return ctypes.get_errno() if libc.prctl(option, arg, 0, 0, 0) == -1 else 0

    def echo(self, x):
        return 1

    def forge_empty(self, header: str):
        """A forged answer whose one buffer is empty."""
        head = header.encode()
        os.write(ANSWERS_FD, struct.pack("<QI", len(head), 1) + head + struct.pack("<Q", 0))
        return None


def load(fmt: str, data: bytes, config: dict | None) -> Round9Probe:
    return Round9Probe()


@pytest.fixture
def sandbox(monkeypatch):
    from workers.sandbox import SandboxedModel

    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    model = SandboxedModel(LOADER, "probe", b"", None, limits={"call_s": 5})
    yield model
    model.close()


@needs_sandbox
def test_a_model_that_stops_reading_its_requests_does_not_hang_the_worker(sandbox):
    import torch

    from workers.sandbox import SandboxError

    assert sandbox.call("forge_and_hang", 50) == 7  # its own answer, and it reads no more
    outcome: list[BaseException | object] = []

    def call() -> None:
        try:
            outcome.append(sandbox.call("echo", torch.zeros(1 << 20)))  # 4 MB: past the pipe
        except BaseException as exc:
            outcome.append(exc)

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    caller.join(60)
    hung = caller.is_alive()
    if hung:
        sandbox.close()  # ends the blocked write (a broken pipe) so the test can finish
        caller.join(30)
    assert not hung, "the request's write blocked past the call's deadline"
    assert isinstance(outcome[0], SandboxError), outcome
    assert "did not read its request to echo() within 5 s" in str(outcome[0])
    assert sandbox._proc is None  # the process is ended
    assert sandbox.call("pid") > 0  # a fresh one answers


def _tensor(shape) -> str:
    return json.dumps({"result": {"t": 0, "dtype": "uint8", "shape": shape}})


@needs_sandbox
@pytest.mark.parametrize("shape", [[2**29, 2**29, 64], [2**29, 2**29, 64, 0], [2**29, 2**29, 2**29]])
def test_dimensions_whose_product_wraps_are_a_malformed_answer(sandbox, shape):
    from workers.sandbox import SandboxError

    pid = sandbox.call("pid")
    with pytest.raises(SandboxError, match="malformed|does not match"):
        sandbox.call("forge_empty", _tensor(shape))
    assert sandbox._proc is None  # its real answer was still in the pipe: the process is done
    assert sandbox.call("pid") != pid


# A worker holding a sandbox whose model sleeps in a call; it prints the sandbox's pid.
HOLDER = """
import sys
from workers.sandbox import SandboxedModel
m = SandboxedModel("tests.integration.test_reattack26_round9:load", "probe", b"", None)
print(m.call("pid"), flush=True)
m.call("block")
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            return not any(line.startswith("State:\tZ") for line in f)
    except FileNotFoundError:
        return False


@needs_sandbox
def test_a_sandbox_dies_with_its_worker():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    holder = subprocess.Popen([sys.executable, "-c", HOLDER], stdout=subprocess.PIPE, env=env, cwd=ROOT, text=True)
    child = int(holder.stdout.readline())
    assert _alive(child)
    time.sleep(1)  # the model is asleep in block()
    holder.kill()
    holder.wait()
    for _ in range(100):
        if not _alive(child):
            break
        time.sleep(0.1)
    else:
        os.kill(child, 9)
        pytest.fail("the sandbox outlived its worker")


@needs_sandbox
def test_a_model_cannot_undo_dying_with_its_worker(sandbox):
    assert sandbox.call("prctl", PR_SET_PDEATHSIG, 0) == errno.EPERM


PR_SET_PDEATHSIG = 1
