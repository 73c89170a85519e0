"""The sandbox off the CPU (issue 26): on a GPU a model's memory limit is RLIMIT_DATA, as CUDA
reserves far more address space than it uses, and RLIMIT_DATA counts private writable memory
only; the filter refuses the memory it would not count (re-attack rounds 9, 11, 12 and 13).

Each test runs on "cpu:0", that path without a GPU, and on CUDA where there is one: bench/gpu.sh
runs this file on a lent GPU machine. It imports only pytest, numpy, torch and the sandbox (no
conftest), so it runs where the application's other packages are not installed:

    python -m pytest --noconftest tests/integration/test_sandbox_off_the_cpu.py

This module is also the probe's loader (`tests.integration.test_sandbox_off_the_cpu:load`).
"""

from __future__ import annotations

import ctypes
import errno
import io
import os
import platform
import resource
from pathlib import Path

import pytest
import torch

from workers.sandbox import SandboxedModel, SandboxError, sandbox_available

ROOT = Path(__file__).resolve().parent.parent.parent
LOADER = "tests.integration.test_sandbox_off_the_cpu:load"
# What the archive's forward() answers at most (the sandbox's cap on an answer).
ANSWERS = {"forward": lambda image, words: [(image.shape[0], 7)]}

pytestmark = [
    pytest.mark.backend_agnostic("the sandbox touches no database"),
    pytest.mark.skipif(
        sandbox_available() is not None or platform.machine() != "x86_64",
        reason=f"no model sandbox here, or not x86-64 (the probe's call numbers): {sandbox_available()}",
    ),
]
DEVICES = [
    "cpu:0",
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")),
]

PROT_NONE, PROT_READ, PROT_WRITE, PROT_EXEC = 0, 1, 2, 4
MAP_SHARED, MAP_PRIVATE, MAP_ANONYMOUS, MAP_GROWSDOWN, MAP_NORESERVE = 0x01, 0x02, 0x20, 0x0100, 0x4000
MADV_NOHUGEPAGE = 15
STEP = 2 << 20  # one page table maps 2 MB


def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    return libc


def _failed(addr) -> bool:
    return addr is None or addr == ctypes.c_void_p(-1).value


class Probe:
    """A "model" that spends memory the ways native code could."""

    def to(self, device):  # as a torch module is moved and set to evaluation
        return self

    def eval(self):
        return self

    def reserve(self, mb: int) -> int:
        """Allocates `mb` MB (untouched, so the machine does not pay for them)."""
        import numpy as np

        return int(np.empty(mb << 20, np.uint8).size)

    def mapped(self, mb: int, flags: int) -> list[int]:
        """MB mapped with mmap's `flags` and written to (each page held), or 0 and the errno."""
        addr = _libc().mmap(None, mb << 20, PROT_READ | PROT_WRITE, flags, -1, 0)
        if _failed(addr):
            return [0, ctypes.get_errno()]
        ctypes.memset(addr, 1, mb << 20)
        return [mb, 0]

    def page_tables(self, gb: int, prot: int, then: int | None = None, mb: int = 0) -> list[int]:
        """GB (plus MB) of anonymous memory mapped with `prot` (then mprotect'ed to `then`), read
        a byte every 2 MB unless inaccessible (each read holds a page table): the reads made,
        or 0 and the errno."""
        libc = _libc()
        size = (gb << 30) + (mb << 20)
        addr = libc.mmap(None, size, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
        if _failed(addr):
            return [0, ctypes.get_errno()]
        if then is not None and libc.mprotect(addr, size, then) != 0:
            return [0, ctypes.get_errno()]
        libc.madvise(addr, size, MADV_NOHUGEPAGE)  # no huge zero page: one table per 2 MB
        if then == PROT_NONE:
            return [0, 0]
        for off in range(0, size, STEP):
            ctypes.string_at(addr + off, 1)
        self._held = addr
        return [size // STEP, 0]

    def stack(self, mb: int) -> list:
        """Raises its stack's limit and writes a byte on each page of `mb` MB of its main
        thread's stack, below the frames in use."""
        try:
            resource.setrlimit(resource.RLIMIT_STACK, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        except (ValueError, OSError):
            pass
        top = ctypes.c_void_p.in_dll(ctypes.CDLL(None), "__libc_stack_end").value
        page = 4096
        below = (top & ~(page - 1)) - 64 * page
        for i in range(mb * 256):
            ctypes.memset(below - i * page, 1, 1)
        return [mb, resource.getrlimit(resource.RLIMIT_STACK)[1]]


def load(fmt: str, data: bytes, config: dict | None):
    if fmt == "torchscript":
        return torch.jit.load(io.BytesIO(data), map_location="cpu")
    return Probe()


@pytest.fixture
def sandbox(request, monkeypatch):
    """The probe in a sandbox on `device`, 512 MB more memory than it holds after warming up."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    boxes = []

    def make(device: str, data: bytes = b"", fmt: str = "probe", memory_mb: int = 512) -> SandboxedModel:
        box = SandboxedModel(LOADER, fmt, data, None, device=device, limits={"memory_mb": memory_mb, "call_s": 60})
        boxes.append(box)
        return box

    yield make
    for box in boxes:
        box.close()


@pytest.mark.parametrize("device", DEVICES)
def test_a_sandbox_off_the_cpu_has_a_memory_limit(device, sandbox):
    """Round 9: on a GPU the sandbox had no memory limit at all (RLIMIT_AS only on the CPU)."""
    model = sandbox(device)
    assert model.call("reserve", 64) == 64 << 20  # within the limit
    with pytest.raises(SandboxError, match="more than its memory limit"):
        model.call("reserve", 8192)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "flags",
    [MAP_SHARED | MAP_ANONYMOUS, MAP_PRIVATE | MAP_ANONYMOUS | MAP_GROWSDOWN],
    ids=["shared anonymous", "growing down"],
)
def test_a_model_off_the_cpu_cannot_map_memory_its_limit_does_not_count(flags, device, sandbox):
    """Round 11: 2 GB held past a 512 MB limit in a shared anonymous mapping, or in one that
    grows down: RLIMIT_DATA counts neither."""
    model = sandbox(device)
    assert model.call("mapped", 1024, flags) == [0, errno.ENOMEM]  # held 1 GB past the 512 MB limit
    assert model.call("mapped", 64, MAP_PRIVATE | MAP_ANONYMOUS) == [64, 0]  # what the limit counts


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "prot, then",
    [
        (PROT_READ, None),
        (PROT_READ | PROT_EXEC, None),
        (PROT_NONE, PROT_READ),
        (PROT_READ | PROT_WRITE, PROT_READ),
    ],
    ids=["read-only", "read and execute", "none, then read", "written, then read-only"],
)
def test_a_model_off_the_cpu_cannot_hold_page_tables_its_limit_does_not_count(prot, then, device, sandbox):
    """Round 12: 512 GB mapped read-only and read every 2 MB held 1 GB of page tables (VmPTE)
    past a 512 MB limit; RLIMIT_DATA counts no memory that cannot be written."""
    model = sandbox(device)
    # 8 GB read every 2 MB held 16 MB of page tables (512 GB: 1 GB).
    assert model.call("page_tables", 8, prot, then) == [0, errno.ENOMEM]
    # Writable memory, which the limit counts, is still the model's, and so is a guard page
    # (made inaccessible: nothing to read, no table).
    assert model.call("page_tables", 0, PROT_READ | PROT_WRITE, None, 256) == [128, 0]
    assert model.call("page_tables", 0, PROT_READ | PROT_WRITE, PROT_NONE, 128) == [0, 0]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("device", DEVICES)
def test_a_model_off_the_cpu_cannot_grow_its_stack_past_its_memory_limit(device, sandbox):
    """Round 13: RLIMIT_DATA does not count the main thread's stack, whose own limit had a soft
    limit only: a model raised it to unlimited and wrote 3,000 MB of stack past a 256 MB limit.
    Its hard limit is now its soft one, at most 8 MB."""
    model = sandbox(device, memory_mb=256)
    assert model.call("stack", 4)[0] == 4  # what a model's calls need is there
    with pytest.raises(SandboxError):
        model.call("stack", 512)


class Layers(torch.nn.Module):
    """What the kinds' architectures compute (convolutions, a GRU, matrix products, sampling):
    on a GPU, each may load a library or a kernel the first time it runs."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.gru = torch.nn.GRU(16, 32, batch_first=True)
        self.head = torch.nn.Linear(32, 7)

    def forward(self, image: torch.Tensor, words: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.conv(image)).mean(dim=(2, 3))  # [B, 16]
        out, h = self.gru(words + x.unsqueeze(1))  # [B, T, 32]
        scores = torch.bmm(out, out.transpose(1, 2)).softmax(-1) @ out
        return torch.log_softmax(self.head(scores[:, -1] + h[0]), -1)


@pytest.mark.parametrize("device", DEVICES)
def test_a_torchscript_model_answers_on_its_device_as_in_process(device, sandbox):
    """The filter and the limits are in place before the archive loads: whatever the device's
    libraries do on a model's first calls (a GPU's load kernels and libraries lazily) must work
    under them, and the answers be the ones the same archive gives in the worker."""
    torch.manual_seed(0)
    buf = io.BytesIO()
    torch.jit.save(torch.jit.script(Layers().eval()), buf)
    model = sandbox(device, buf.getvalue(), "torchscript", memory_mb=1024)
    here = load("torchscript", buf.getvalue(), None).to(device).eval()
    for batch in (1, 64, 128):
        image, words = torch.randn(batch, 3, 7, 7), torch.randn(batch, 5, 16)
        with torch.no_grad():
            expected = here(image.to(device), words.to(device)).cpu()
        got = model.call("forward", image.to(device), words.to(device))
        assert got.device.type == torch.device(device).type  # back on the caller's device
        torch.testing.assert_close(got.cpu(), expected, rtol=1e-4, atol=1e-5)
