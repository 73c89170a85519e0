"""Issue 26, round four of the re-attack (from a fresh clone): what was found, each with the
test that failed before its fix.

- Native code in the sandbox could still call `modify_ldt` (it read the process's segment
  descriptors: 0) and `memfd_secret` (it got a descriptor), kernel surface no model needs and
  Docker's default profile refuses.

This module is also the probe's loader (`tests.integration.test_reattack26_round4:load`), round
three's probe with a raw call: native calls through ctypes, made after the lock as native code
in an archive would make them.
"""

from __future__ import annotations

import ctypes
import errno

import pytest

from tests.conftest import ROOT
from tests.integration.test_reattack26_round3 import LIBC, Probe, _errno, needs_sandbox

# x86-64 numbers and arguments that succeed where the call is allowed.
CALLS = {"modify_ldt": (154, 0, 0, 0), "memfd_secret": (447, 0, 0, 0)}


class RawProbe(Probe):
    def raw_syscall_errno(self, number: int, *args: int):
        return _errno(LIBC.syscall(ctypes.c_long(number), *(ctypes.c_long(a) for a in args)))

    def open_tree_attr_errno(self, path: str):
        """open_tree_attr(AT_FDCWD, path, 0, NULL, 0): a descriptor for the file by name."""
        return _errno(
            LIBC.syscall(
                ctypes.c_long(467), ctypes.c_long(-100), ctypes.c_char_p(path.encode()), ctypes.c_long(0), None, 0
            )
        )

    def null_arguments_errno(self, number: int):
        """The call with NULL pointers: EFAULT where the kernel reached it."""
        return _errno(LIBC.syscall(ctypes.c_long(number), None, None, ctypes.c_long(0), ctypes.c_long(0)))


def load(fmt: str, data: bytes, config: dict | None) -> RawProbe:
    return RawProbe()


@pytest.fixture
def sandbox(monkeypatch):
    from workers.sandbox import SandboxedModel

    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    model = SandboxedModel("tests.integration.test_reattack26_round4:load", "probe", b"", None)
    yield model
    model.close()


@needs_sandbox
@pytest.mark.parametrize("name", sorted(CALLS))
def test_kernel_surface_no_model_needs_is_refused(sandbox, name):
    assert sandbox.call("raw_syscall_errno", *CALLS[name]) == errno.EPERM


@needs_sandbox
def test_calls_newer_than_the_filters_names_are_refused_by_number(sandbox):
    """Round five: pyseccomp could not name open_tree_attr (Linux 6.15), so the rule was
    skipped and a model opened /etc/passwd by name; listmount and statmount listed mounts.
    Every number past the names it knows is "not implemented" now."""
    assert sandbox.call("open_tree_attr_errno", "/etc/passwd") == errno.ENOSYS
    for number in (457, 458, 463, 466, 469):  # statmount, listmount, setxattrat, removexattrat
        assert sandbox.call("null_arguments_errno", number) == errno.ENOSYS, number
    # A call a model needs still works: the probe answers at all, and its clock reads.
    assert sandbox.call("raw_syscall_errno", 228, 1, 0) != errno.ENOSYS  # clock_gettime
