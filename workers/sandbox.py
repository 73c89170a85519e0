"""Uploaded models run in a process of their own (docs/security.md).

A TorchScript archive is code: its methods can call torch ops that read files
(`torch.from_file`), allocate without bound or loop forever. So a model is loaded and run only
in a child process (`python -m workers.sandbox`) that, before it reads a byte of the upload:

- has resource limits: CPU seconds, as many CPUs as its threads, address space (on the CPU;
  private memory on a GPU), no file writes, no core files, a few more threads for its user;
- works in an empty temporary folder, as a user of its own when the worker runs as root;
- is killed by the kernel when the worker dies (PR_SET_PDEATHSIG, which it may not clear);
- has imported and warmed up everything it needs, then installs a seccomp filter (libseccomp,
  through `pyseccomp`) that refuses with EPERM opening any file (io_uring too), sockets, exec,
  any new process (threads only), signals to or memory of other processes (a file's owner
  for SIGIO too), message queues, AIO contexts and vmsplice (pages held by a pipe). The blob store
  (files 0600 of its own user), the database and the network are out of reach; the model's
  bytes come through a pipe.

The parent talks to it over stdin/stdout: method calls with tensors and plain values. It never
unpickles what the child sends: a header of JSON and raw arrays of whitelisted dtypes. A child
that dies, runs out of its limits or does not answer in time ends with a `SandboxError` naming
the limit; a model's exception comes back as its type only. The model's own text (an error
message, a returned string) never reaches a verdict unless the caller checks it first.
"""

from __future__ import annotations

import builtins
import ctypes
import errno
import importlib
import json
import math
import os
import resource
import select
import signal
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

# dtypes that cross the pipe (numpy names); anything else is refused.
DTYPES = ("float32", "float64", "float16", "int64", "int32", "int16", "int8", "uint8", "bool")
MAX_MESSAGE = 512 << 20  # what either side reads in one message (the model's bytes included)
# What an answer may weigh, checked against the sizes it announces before its bytes are read,
# so a model cannot make the worker hold 512 MB. A kind declares, next to its LOADER, the
# shapes of the tensors each method of its interface answers, from the call's own arguments
# (`ANSWERS`: a speaker's score() one float per path, a listener's encode() [B, L, H] with H
# at most the documented state size); such an answer may weigh those shapes at the widest
# dtype plus ANSWER_FRAMING (its JSON header and buffer sizes). Any other method answers with
# plain values (a vocabulary, a version) within ANSWER_FLOOR.
ANSWER_FLOOR = 4 << 20
ANSWER_FRAMING = 64 << 10
# Objects and arrays an answer's header may hold, counted by their opening brackets before it is
# decoded: a tensor is two ({"t", "shape": [...]}), and an answer has at most 10,000 of them. A
# 4 MB header of 290,000 empty lists made the worker hold 131 MB (issue 26, re-attack round 7).
MAX_HEADER_CONTAINERS = 50_000
# ... and values, counted by their separators (commas and colons, in strings too): within 4 MB
# and 50,000 containers a header held 900,000 floats ("0.5,"), 84 MB once decoded twice over
# (issue 26, round 14). The largest plain answer, a vocabulary of 50,000 words, has 50,000; a
# tensor's entry has 5.
MAX_HEADER_VALUES = 120_000
MAX_DIMS = 32
WIDEST_DTYPE = max(np.dtype(d).itemsize for d in ("float32", "float64", "int64"))
# Numbers from statmount (457, Linux 6.8) to the end of the common table (x32's start at 512).
FIRST_UNKNOWN_SYSCALL, LAST_SYSCALL = 457, 511
DENIED_SYSCALLS = (
    "open",
    "openat",
    "openat2",
    "creat",
    "socket",
    "socketpair",
    "connect",
    "bind",
    "listen",
    "accept",
    "accept4",
    "execve",
    "execveat",
    "fork",
    "vfork",
    "ptrace",
    "mount",
    "umount2",
    "unshare",
    "setns",
    "chroot",
    "pivot_root",
    "symlink",
    "symlinkat",
    "link",
    "linkat",
    "unlink",
    "unlinkat",
    "rename",
    "renameat",
    "renameat2",
    "mkdir",
    "mkdirat",
    "truncate",
    "rmdir",
    "mknod",
    "mknodat",
    # A file's metadata by name (its owner, mode, times, attributes).
    "chmod",
    "fchmodat",
    "fchmodat2",
    "chown",
    "lchown",
    "fchownat",
    "utime",
    "utimes",
    "utimensat",
    "futimesat",
    "setxattr",
    "lsetxattr",
    "removexattr",
    "lremovexattr",
    # The kernel's log, where the host lets any user read it (Docker's default profile refuses
    # it too; issue 26, re-attack round 10).
    "syslog",
    # io_uring opens and reads files without a system call seccomp could see.
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    # Other processes (another model's sandbox runs as the same user): no signals,
    # no reading or writing their memory, no handles on them.
    "kill",
    "tkill",
    "rt_sigqueueinfo",
    "pidfd_open",
    "pidfd_send_signal",
    "pidfd_getfd",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    # Files by handle or watched by name, and kernel facilities a model never needs.
    "name_to_handle_at",
    "open_by_handle_at",
    "inotify_add_watch",
    "fanotify_init",
    "fanotify_mark",
    "userfaultfd",
    "bpf",
    "perf_event_open",
    "keyctl",
    "add_key",
    "request_key",
    # System V IPC: its segments outlive the process, outside its memory limit,
    # and every sandbox's user could reach them (the issue-26 re-attack, round 2).
    "shmget",
    "shmat",
    "shmdt",
    "shmctl",
    "msgget",
    "msgsnd",
    "msgrcv",
    "msgctl",
    "semget",
    "semop",
    "semtimedop",
    "semctl",
    "ipc",
    # POSIX message queues too (round 3), kernel AIO contexts (one machine-wide pool,
    # aio-max-nr) and open_tree (a file opened by name, as O_PATH).
    "mq_open",
    "mq_unlink",
    "mq_timedsend",
    "mq_timedreceive",
    "mq_notify",
    "mq_getsetattr",
    "io_setup",
    "io_submit",
    "io_getevents",
    "io_pgetevents",
    "io_cancel",
    "io_destroy",
    "open_tree",
    # Round 4: kernel surface no model needs, which Docker's default profile refuses too:
    # modify_ldt (segment descriptors, a past source of kernel bugs) and memfd_secret.
    "modify_ldt",
    "memfd_secret",
    # Round 14: vmsplice gives a pipe references to the model's own pages, which stay after
    # it unmaps them, outside RLIMIT_AS and RLIMIT_DATA; a byte of a transparent huge page
    # holds all 2 MB (960 one-byte splices held 1.9 GB past a 1,024 MB limit). A model writes
    # to its pipes instead: a copy, within the pipe's 64 KB.
    "vmsplice",
    # Round 15: sync and syncfs write back every dirty page of the machine's file systems (the
    # database's among them) when the model likes; inotify instances, with nothing left to watch
    # (inotify_add_watch is refused above), are only a share of its user's 128, which under a
    # worker that is not root is the worker's own.
    "sync",
    "syncfs",
    "inotify_init",
    "inotify_init1",
)
# fcntl and ioctl commands that name a process to signal when a file is ready: with O_ASYNC
# the kernel sends it SIGIO (or any signal F_SETSIG chose, SIGKILL too) past the kill filter.
F_SETOWN, F_SETSIG, F_SETOWN_EX = 8, 10, 15
# A pipe grown by F_SETPIPE_SZ to 1 MB holds that much kernel memory, which RLIMIT_AS never
# counts: 128 pipes (MAX_DESCRIPTORS) held 67 MB (issue 26, re-attack round 8); at the default
# 64 KB a pipe they hold 8 MB.
F_SETPIPE_SZ = 1031
FIOSETOWN, SIOCSPGRP = 0x8901, 0x8902
# The signal the kernel sends the sandbox when its worker dies (round 9: one outlived its worker,
# asleep, holding its memory); refused to the model, which could clear it.
PR_SET_PDEATHSIG = 1
# Signals queued to it and POSIX timers (each timer holds a queued signal): kernel memory that
# RLIMIT_AS never counts, bounded only by RLIMIT_SIGPENDING, which is the machine's default
# (96,551 timers held 37 MB; issue 26, re-attack round 10). The kernel's own signals and kill()s
# are not counted, so a model needs none of these.
MAX_PENDING_SIGNALS = 64
# Threads only: a clone without CLONE_THREAD is a new process (glibc's fork and posix_spawn).
CLONE_THREAD = 0x00010000
# mmap's flags (MAP_SHARED_VALIDATE, 0x03, holds MAP_SHARED's bit).
MAP_SHARED, MAP_ANONYMOUS, MAP_GROWSDOWN = 0x01, 0x20, 0x0100
# mmap's and mprotect's protections: read, write, execute; those that read without writing.
PROT_ANY = 0x07
READABLE_ONLY = (0x01, 0x04, 0x05)
# Processes of the sandbox's user, threads included (RLIMIT_NPROC counts both), on top of those
# it already has: torch's pools and a few more, never a fork bomb's worth.
NPROC_HEADROOM = 64
# Descriptors it may hold, beyond those open when it locks (CUDA's devices): a pipe or an
# eventfd holds kernel memory that RLIMIT_AS never counts (a page a pipe with a byte in it), so
# a model that raised its own RLIMIT_NOFILE to the hard limit held 63 MB in 10,000 pipes (issue
# 26, re-attack round 7); a model opens no file, and its threads need a few.
MAX_DESCRIPTORS = 256
# Under a root worker each sandbox runs as a user of its own, SANDBOX_UID_BASE + its pid (pids
# are unique among live processes), so no model can signal another or use up its threads;
# where that user cannot be had (a user namespace mapping few ids) it runs as nobody.
SANDBOX_UID_BASE = 1 << 20
NOBODY = 65534


# The exception names a verdict may show: Python's own, and torch's few. The name comes from the
# model's process, where a class of the model's own, or an answer forged on the pipe, may name
# itself anything: up to 100 characters of its words stood in the verdict (issue 26, round 14).
SHOWN_ERRORS = frozenset(
    name for name, obj in vars(builtins).items() if isinstance(obj, type) and issubclass(obj, BaseException)
) | {"OutOfMemoryError", "AcceleratorError", "SafetensorError"}


def shown_error(kind: object) -> str:
    """The exception's name as a verdict shows it: one of SHOWN_ERRORS, else "an error of its own"."""
    return kind if isinstance(kind, str) and kind in SHOWN_ERRORS else "an error of its own"


class SandboxError(RuntimeError):
    """The model's process failed: the message names the check (a limit, a missing method, an
    error type), never what the model printed or returned."""


class ModelRaised(SandboxError):
    """A method of the model raised; `kind` is the exception's type name."""

    def __init__(self, method: str, kind: str):
        super().__init__(f"{method}() raised {kind}")
        self.method, self.kind = method, kind


# -- the wire: a JSON header, then raw buffers -----------------------------------------------


def _encode(obj: Any, bufs: list[bytes]) -> Any:
    import torch

    if isinstance(obj, torch.Tensor):
        t = obj.detach().to("cpu")
        if t.dtype == torch.bfloat16:
            t = t.float()
        arr = t.contiguous().numpy()
        if arr.dtype.name not in DTYPES:
            raise TypeError(f"tensors of dtype {arr.dtype.name} do not cross the sandbox")
        bufs.append(arr.tobytes())
        return {"t": len(bufs) - 1, "dtype": arr.dtype.name, "shape": list(arr.shape)}
    if isinstance(obj, (bool, int, float, str)) or obj is None:
        return obj
    if isinstance(obj, (list, tuple)):
        return {"list" if isinstance(obj, list) else "tuple": [_encode(x, bufs) for x in obj]}
    raise TypeError(f"a {type(obj).__name__} does not cross the sandbox")


def _decode(obj: Any, bufs: list[bytes]) -> Any:
    import torch

    if isinstance(obj, dict):
        if "t" in obj:
            dtype, shape = obj.get("dtype"), obj.get("shape")
            # A dimension is a plain int no larger than a message (a bool is an int to Python;
            # past int64 numpy overflows), and no more of them than numpy takes (issue 26,
            # re-attack round 8: each raised its own error, not a malformed-answer verdict).
            if (
                dtype not in DTYPES
                or not isinstance(shape, list)
                or len(shape) > MAX_DIMS
                or not all(type(n) is int and 0 <= n <= MAX_MESSAGE for n in shape)
            ):
                raise SandboxError("the model's process sent a malformed tensor")
            index = obj["t"]
            if not isinstance(index, int) or not 0 <= index < len(bufs):
                raise SandboxError("the model's process sent a malformed tensor")
            # Elements counted in Python's ints: in int64 [2^29, 2^29, 64] wrapped to 0 and a
            # 0-byte buffer passed (round 9).
            itemsize = np.dtype(dtype).itemsize
            if len(bufs[index]) % itemsize or len(bufs[index]) // itemsize != math.prod(shape):
                raise SandboxError("the model's process sent a tensor whose size does not match its shape")
            arr = np.frombuffer(bufs[index], dtype=np.dtype(dtype))
            arr = arr.reshape(shape)
            # The answer's own buffer (a bytearray: writable), not a copy of it.
            return torch.from_numpy(arr if isinstance(bufs[index], bytearray) else arr.copy())
        for key, kind in (("list", list), ("tuple", tuple)):
            if key in obj and isinstance(obj[key], list):
                return kind(_decode(x, bufs) for x in obj[key])
        raise SandboxError("the model's process sent a malformed value")
    if isinstance(obj, (bool, int, float, str)) or obj is None:
        return obj
    raise SandboxError("the model's process sent a malformed value")


def _frame(header: dict, bufs: Sequence[bytes] = ()) -> list[bytes]:
    head = json.dumps(header).encode()
    parts = [struct.pack("<QI", len(head), len(bufs)), head]
    for b in bufs:
        parts += [struct.pack("<Q", len(b)), b]
    return parts


def _write(stream, header: dict, bufs: Sequence[bytes] = ()) -> None:
    stream.write(b"".join(_frame(header, bufs)))
    stream.flush()


def _send(fd: int, parts: list[bytes], deadline: float) -> None:
    """Writes `parts` to the non-blocking `fd` by `deadline` (time.monotonic()), else raises
    TimeoutError: a model may stop reading its requests (issue 26, re-attack round 9: native
    code forged its answers, then slept, and the worker's write blocked for good)."""
    for part in parts:
        view = memoryview(part)
        while view:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([], [fd], [], left)[1]:
                raise TimeoutError
            try:
                view = view[os.write(fd, view[: 1 << 20]) :]
            except BlockingIOError:  # room for less than PIPE_BUF: wait for more
                continue


def _read_exact(read, n: int) -> bytearray:
    out = bytearray(n)  # filled in place: the answer is held once
    view, pos = memoryview(out), 0
    while pos < n:
        chunk = read(n - pos)
        if not chunk:
            raise EOFError
        view[pos : pos + len(chunk)] = chunk
        pos += len(chunk)
    return out


def _read(read, limit: int = MAX_MESSAGE, header_limit: int | None = None) -> tuple[dict, list[bytearray]]:
    """One message; its announced sizes are checked against `limit` (its JSON header also
    against `header_limit`) before its bytes are read."""
    n_head, n_bufs = struct.unpack("<QI", _read_exact(read, 12))
    if n_head > min(limit, header_limit or limit) or n_bufs > 10_000:
        raise SandboxError("the model's process sent an answer over the size limit")
    total = n_head
    head = _read_exact(read, n_head)
    if header_limit is not None and (
        head.count(b"{") + head.count(b"[") > MAX_HEADER_CONTAINERS
        or head.count(b",") + head.count(b":") > MAX_HEADER_VALUES
    ):
        raise SandboxError("the model's process sent an answer over the size limit")
    header = json.loads(head)
    bufs = []
    for _ in range(n_bufs):
        (size,) = struct.unpack("<Q", _read_exact(read, 8))
        total += size
        if total > limit:
            raise SandboxError("the model's process sent an answer over the size limit")
        bufs.append(_read_exact(read, size))
    if not isinstance(header, dict):
        raise SandboxError("the model's process sent a malformed answer")
    return header, bufs


# A method's answer declared as the shapes of its tensors, given the call's arguments.
AnswerShapes = Callable[..., Sequence[Sequence[int]]]


def answer_limit(shapes: Sequence[Sequence[int]]) -> int:
    """The most an answer holding tensors of at most these shapes may weigh."""
    elements = sum(math.prod(int(n) for n in shape) for shape in shapes)
    return min(MAX_MESSAGE, ANSWER_FRAMING + WIDEST_DTYPE * elements)


def _size(n: int) -> str:
    return f"{n >> 20} MB" if n >= 1 << 20 else f"{n >> 10} KB"


def sandbox_available() -> str | None:
    """None when models can be sandboxed here, else why not."""
    if not sys.platform.startswith("linux"):
        return "model sandboxing needs Linux (seccomp)"
    try:
        import pyseccomp  # noqa: F401

        pyseccomp.SyscallFilter(defaction=pyseccomp.ALLOW)
    except Exception as exc:  # the package or libseccomp is missing
        return f"model sandboxing needs libseccomp and the pyseccomp package ({type(exc).__name__})"
    return None


class SandboxedModel:
    """A model loaded from an upload's bytes in a sandboxed child process; its methods are
    called like the model's own (tensors and plain values in, the same out). Results come back
    on the device of the call's first tensor argument."""

    def __init__(
        self,
        loader: str,
        fmt: str,
        data: bytes,
        config: dict | None,
        *,
        device: str = "cpu",
        limits: dict | None = None,
        answers: Mapping[str, AnswerShapes] | None = None,
    ):
        """`answers`: the interface's declared answers (ANSWERS above); by default the
        `ANSWERS` of the loader's module."""
        from app.config import get_settings

        s = get_settings()
        self.limits = {
            "cpu_s": s.sandbox_cpu_seconds,
            "memory_mb": s.sandbox_memory_mb,
            "call_s": s.sandbox_call_seconds,
            **(limits or {}),
        }
        self._spec = {"loader": loader, "fmt": fmt, "config": config or {}}
        self._data = data
        if answers is None:
            answers = getattr(importlib.import_module(loader.partition(":")[0]), "ANSWERS", {})
        self.answers = dict(answers)
        self.device = str(device)
        self._proc: subprocess.Popen | None = None
        self._dir: tempfile.TemporaryDirectory | None = None
        self.methods: dict[str, list[str]] = {}

    # The generation code moves models with .to(dev) and sets .eval(); both are the child's.
    def to(self, device) -> "SandboxedModel":
        device = str(device)
        if device != self.device:
            self.close()
            self.device = device
        return self

    def eval(self) -> "SandboxedModel":
        return self

    def start(self) -> "SandboxedModel":
        if self._proc is not None:
            return self
        why = sandbox_available()
        if why:
            raise SandboxError(why)
        self._dir = tempfile.TemporaryDirectory(prefix="proctor-sandbox-")
        os.chmod(self._dir.name, 0o711)
        env = {
            k: v for k, v in os.environ.items() if k in ("PATH", "PYTHONPATH", "LANG", "LC_ALL", "CUDA_VISIBLE_DEVICES")
        }
        # The child imports the loader from this very tree, not from whichever copy of the
        # project is installed (a checkout beside an editable install would load the other's).
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        paths = [root, *env.get("PYTHONPATH", "").split(os.pathsep)]
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(filter(None, paths)))
        env["OMP_NUM_THREADS"] = str(self.limits.get("threads", 1))
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "workers.sandbox"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=self._dir.name,
            env=env,
            start_new_session=True,
        )
        os.set_blocking(self._proc.stdin.fileno(), False)  # requests are written by a deadline
        try:
            timeout = self.limits["call_s"] + 60
            deadline = time.monotonic() + timeout
            spec = {**self._spec, "device": self.device, "limits": self.limits, "workdir": self._dir.name}
            self._request({**spec, "parent": os.getpid()}, [self._data], deadline, "loading the model", timeout)
            header, _ = self._answer("loading the model", timeout, ANSWER_FLOOR, deadline)
        except BaseException:
            self.close()
            raise
        if "error" in header:
            from app.jobs import redact

            kind = shown_error(header["error"])
            detail = header.get("detail") if self._spec["fmt"] == "safetensors" else ""
            # Our loader's words, yet they may name a file of the server (a lazy import refused
            # under the filter) or a credential: redacted as a failed job's reason is (round 14).
            detail = redact(detail) if isinstance(detail, str) else ""
            self.close()
            raise SandboxError(f"could not load the model: {kind}" + (f": {detail[:300]}" if detail else ""))
        methods = header.get("methods")
        if not isinstance(methods, dict):
            self.close()
            raise SandboxError("the model's process sent a malformed answer")
        self.methods = {
            str(k)[:100]: [str(a)[:100] for a in v] for k, v in list(methods.items())[:200] if isinstance(v, list)
        }
        return self

    def _answer(
        self, what: str, timeout: float, limit: int = MAX_MESSAGE, deadline: float | None = None
    ) -> tuple[dict, list[bytearray]]:
        """The answer to `what`, within `timeout` seconds (by `deadline`: the request's
        write shares it)."""
        proc = self._proc
        fd = proc.stdout.fileno()
        deadline = time.monotonic() + timeout if deadline is None else deadline

        def read(n: int) -> bytes:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
            return os.read(fd, min(n, 1 << 20))

        try:
            # Decoded, a header is some 25 times its bytes ("[{},{},...]"), and no answer needs
            # more than the floor's worth of plain values (a vocabulary): tensors are buffers.
            return _read(read, limit, ANSWER_FLOOR)
        except SandboxError:
            self.close()  # the rest of the answer is still in the pipe: this process is done
            raise SandboxError(
                f"the model's answer to {what} was over its size limit ({_size(limit)} for this call)"
            ) from None
        except RecursionError:  # a header nested past what json (or Python) decodes
            self.close()  # the rest of the answer may still be in the pipe
            raise SandboxError(f"the model's process sent a malformed answer to {what}") from None
        except TimeoutError:
            self.close()
            raise SandboxError(f"the model did not answer {what} within {timeout:g} s (wall-clock limit)") from None
        except (EOFError, json.JSONDecodeError, struct.error, UnicodeDecodeError):
            code = self._reap()
            raise SandboxError(self._death(code, what)) from None
        except ValueError:  # an int of 5,000 digits, past what Python converts (round 8)
            self.close()
            raise SandboxError(f"the model's process sent a malformed answer to {what}") from None

    def _request(self, header: dict, bufs: Sequence[bytes], deadline: float, what: str, timeout: float) -> None:
        """Sends a request by the call's deadline; a model that does not read it in time is
        ended like one that does not answer."""
        try:
            _send(self._proc.stdin.fileno(), _frame(header, bufs), deadline)
        except TimeoutError:
            self.close()
            raise SandboxError(
                f"the model did not read its request to {what} within {timeout:g} s (wall-clock limit)"
            ) from None
        except OSError:  # a broken pipe: it died
            raise SandboxError(self._death(self._reap(), f"calling {what}")) from None

    def _death(self, code: int | None, what: str) -> str:
        if code is not None and code < 0 and -code in (signal.SIGXCPU, signal.SIGKILL):
            return f"the model ran past its CPU time limit ({self.limits['cpu_s']} s) while {what}"
        if code == 3:
            return f"the model used more than its memory limit ({self.limits['memory_mb']} MB) while {what}"
        if code is not None and code < 0:
            return f"the model's process was killed by {signal.Signals(-code).name} while {what}"
        return f"the model's process ended (exit status {code}) while {what}"

    def _reap(self) -> int | None:
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        try:
            code = proc.wait(5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            code = proc.wait()
        self._cleanup()
        return code

    def call(self, method: str, *args):
        self.start()
        if method not in self.methods:
            raise AttributeError(method)
        bufs: list[bytes] = []
        payload = [_encode(a, bufs) for a in args]
        device = next((a.device for a in args if hasattr(a, "device")), None)
        timeout = self.limits["call_s"]
        deadline = time.monotonic() + timeout
        self._request({"call": method, "args": payload}, bufs, deadline, f"{method}()", timeout)
        shapes = self.answers.get(method)
        limit = answer_limit(shapes(*args)) if shapes else ANSWER_FLOOR
        header, out = self._answer(f"{method}()", timeout, limit, deadline)
        if "error" in header:
            kind = shown_error(header["error"])
            if kind == "MemoryError":
                raise SandboxError(
                    f"the model used more than its memory limit ({self.limits['memory_mb']} MB) in {method}()"
                )
            raise ModelRaised(method, kind)
        try:
            result = _decode(header.get("result"), out)
        except SandboxError:
            self.close()  # a forged answer: what the model really answered may still be in the pipe
            raise
        except Exception:  # any other error decoding it (RecursionError, numpy's ValueError)
            self.close()
            raise SandboxError(f"the model's process sent a malformed answer to {method}()") from None
        return _to_device(result, device) if device is not None and str(device) != "cpu" else result

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        self.start()
        if name not in self.methods:
            raise AttributeError(name)
        return lambda *args: self.call(name, *args)

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
        self._cleanup()

    def _cleanup(self) -> None:
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def _to_device(obj, device):
    if hasattr(obj, "to") and hasattr(obj, "device"):
        return obj.to(device)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_device(x, device) for x in obj)
    return obj


# -- the child's side ------------------------------------------------------------------------


MAX_STACK = 8 << 20  # the main thread's stack (Linux's default soft limit)


def _limit(cpu_s: int, memory_mb: int, device: str, uid: int) -> None:
    """From now on: cpu_s more CPU seconds (start-up is not the model's), no more memory than
    memory_mb of address space (off the CPU: memory_mb more private memory), no file written,
    no core dumped, and no more than NPROC_HEADROOM new processes or threads for the user it
    runs as (`uid`), nor more than MAX_DESCRIPTORS descriptors (soft and hard: it cannot raise
    them), nor more than MAX_PENDING_SIGNALS signals queued or timers (kernel memory), nor a
    main stack past MAX_STACK."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    spent = int(usage.ru_utime + usage.ru_stime) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (spent + cpu_s, spent + cpu_s + 5))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    nproc = _tasks_of(uid) + NPROC_HEADROOM
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    descriptors = max(MAX_DESCRIPTORS, len(os.listdir("/proc/self/fd")) + 64)
    resource.setrlimit(resource.RLIMIT_NOFILE, (descriptors, descriptors))
    resource.setrlimit(resource.RLIMIT_SIGPENDING, (MAX_PENDING_SIGNALS, MAX_PENDING_SIGNALS))
    # The main thread's stack, which RLIMIT_DATA (off the CPU) does not count: its soft limit
    # alone bounded it, and a model raised that to unlimited and wrote 3,000 MB of stack past
    # a 256 MB limit (issue 26, re-attack round 13). Hard and soft now, at most 8 MB.
    soft = resource.getrlimit(resource.RLIMIT_STACK)[0]
    stack = MAX_STACK if soft == resource.RLIM_INFINITY else min(soft, MAX_STACK)
    resource.setrlimit(resource.RLIMIT_STACK, (stack, stack))
    if device == "cpu":
        resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))
    else:
        # CUDA reserves far more address space than it uses (PROT_NONE), so RLIMIT_AS would
        # refuse it; RLIMIT_DATA counts only private writable memory, where the model's own
        # allocations on the host go. It had no limit at all (issue 26, re-attack round 9):
        # now memory_mb more than torch and CUDA hold after warming up.
        data = _data_size() + (memory_mb << 20)
        resource.setrlimit(resource.RLIMIT_DATA, (data, data))


def _pin(threads: int) -> list[int]:
    """Runs every thread of the process, and those it starts, on `threads` of the worker's CPUs
    (chosen by the pid, so sandboxes spread over the machine); the filter then refuses
    sched_setaffinity. RLIMIT_CPU counts CPU seconds, not the cores taken at once: a model that
    left a thread computing on each CPU kept every core of the machine busy (issue 26, round 14)."""
    allowed = sorted(os.sched_getaffinity(0))
    n = max(1, min(threads, len(allowed)))
    start = os.getpid() % len(allowed)
    cpus = [allowed[(start + i) % len(allowed)] for i in range(n)]
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except OSError:  # ended meanwhile
            continue
    return cpus


def _data_size() -> int:
    """The bytes RLIMIT_DATA counts for this process now (VmData)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmData:"):
                return int(line.split()[1]) << 10
    return 0


def _tasks_of(uid: int) -> int:
    """Processes and threads whose real user is `uid`, as RLIMIT_NPROC counts them."""
    count = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
            if int(fields["Uid"].split()[0]) == uid:
                count += int(fields["Threads"])
        except (OSError, KeyError, ValueError):
            continue  # gone meanwhile, or not ours to read
    return count


def _die_with_parent(parent: int) -> None:
    """SIGKILL when the worker dies (the thread that started it: a sandbox is started and used
    by its job's one thread). Set after the change of user, which clears it."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
    if os.getppid() != parent:  # it died before that: nobody is left to read the answers
        os._exit(0)


def _sandbox_uid() -> int:
    """The user the model runs as: one of its own when the worker is root, else the worker's."""
    return SANDBOX_UID_BASE + os.getpid() if os.geteuid() == 0 else os.getuid()


def _drop_privileges(uid: int) -> int:
    """Becomes `uid` when root (nobody where that id cannot be had); the user it runs as."""
    if os.geteuid() != 0:
        return os.getuid()
    os.setgroups([])
    os.setgid(NOBODY)
    try:
        os.setuid(uid)  # not root: blobs are the store's user's alone (0600), so out of reach
    except OSError:  # EINVAL: a user namespace without this id
        os.setuid(NOBODY)
    return os.getuid()


def _seccomp_filter(device: str = "cpu"):
    """Built before privileges are dropped (the library's files may be out of reach after)."""
    import pyseccomp as seccomp

    f = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    deny = seccomp.ERRNO(errno.EPERM)
    if device != "cpu":
        # Off the CPU only RLIMIT_DATA bounds memory (_limit), and it counts private writable
        # mappings: a shared anonymous one (shmem) or one that grows down (a stack's) held 2 GB
        # past a 512 MB limit (issue 26, re-attack round 11). Refused as the limit would be.
        for flags in (MAP_SHARED | MAP_ANONYMOUS, MAP_GROWSDOWN):
            f.add_rule(seccomp.ERRNO(errno.ENOMEM), "mmap", seccomp.Arg(3, seccomp.MASKED_EQ, flags, flags))
        # Nor does it count memory that can be read and not written, where each page read
        # holds a page table (4 KB for 2 MB) in the kernel: 512 GB mapped read-only held 1 GB
        # (round 12), whether mapped so or made so by mprotect. Refused too; none (a guard
        # page) and writable (counted) stay.
        for prot in READABLE_ONLY:
            mapped = seccomp.Arg(3, seccomp.MASKED_EQ, MAP_ANONYMOUS, MAP_ANONYMOUS)
            f.add_rule(seccomp.ERRNO(errno.ENOMEM), "mmap", seccomp.Arg(2, seccomp.MASKED_EQ, PROT_ANY, prot), mapped)
            for name in ("mprotect", "pkey_mprotect"):
                f.add_rule(seccomp.ERRNO(errno.ENOMEM), name, seccomp.Arg(2, seccomp.MASKED_EQ, PROT_ANY, prot))
    named = set()
    for name in DENIED_SYSCALLS:
        try:
            named.add(seccomp.resolve_syscall(seccomp.Arch.NATIVE, name))
        except Exception:  # a call this architecture does not have (x86-64's "ipc")
            continue
        f.add_rule(deny, name)
    # Calls newer than this libseccomp's names (open_tree_attr opens a file by name, listmount
    # and statmount list the mounts; issue 26, re-attack round 5), numbered alike on every
    # architecture since Linux 5.1: refused by number from statmount on, as "not implemented",
    # so that a library that tries one falls back.
    for number in range(FIRST_UNKNOWN_SYSCALL, LAST_SYSCALL + 1):
        if number not in named:
            f.add_rule(seccomp.ERRNO(errno.ENOSYS), number)
    f.add_rule(deny, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, CLONE_THREAD, 0))
    # clone3's flags sit in memory seccomp cannot read: "not implemented" makes glibc fall back
    # to clone (checked above) for threads and processes alike.
    f.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    # Limits, priority, CPUs and memory placement of its own process only (pid 0): another
    # model's sandbox runs as the same user, and prlimit64 lowering its RLIMIT_CPU ends it as
    # surely as a signal (issue 26, re-attack). glibc's getrlimit and setrlimit pass 0.
    for name, arg in (
        ("prlimit64", 0),
        ("sched_setscheduler", 0),
        ("sched_setparam", 0),
        ("sched_setattr", 0),
        ("migrate_pages", 0),
        ("move_pages", 0),
        ("setpriority", 1),
        ("ioprio_set", 1),
    ):
        try:
            f.add_rule(deny, name, seccomp.Arg(arg, seccomp.NE, 0))
        except Exception:  # a call this architecture does not have
            pass
    # Its CPUs are chosen before the lock (_pin), its own threads' included (round 14).
    f.add_rule(deny, "sched_setaffinity")
    # ... and by process, not by group or user (who 0 with PRIO_USER is all of its user's).
    f.add_rule(deny, "setpriority", seccomp.Arg(0, seccomp.NE, 0))  # PRIO_PROCESS
    f.add_rule(deny, "ioprio_set", seccomp.Arg(0, seccomp.NE, 1))  # IOPRIO_WHO_PROCESS
    for cmd in (F_SETOWN, F_SETSIG, F_SETOWN_EX, F_SETPIPE_SZ):
        f.add_rule(deny, "fcntl", seccomp.Arg(1, seccomp.EQ, cmd))
    for cmd in (FIOSETOWN, SIOCSPGRP):
        f.add_rule(deny, "ioctl", seccomp.Arg(1, seccomp.EQ, cmd))
    # The signal that ends it with its worker stays (round 9).
    f.add_rule(deny, "prctl", seccomp.Arg(0, seccomp.EQ, PR_SET_PDEATHSIG))
    # A thread may signal its own process (raise, abort), nobody else's.
    f.add_rule(deny, "tgkill", seccomp.Arg(0, seccomp.NE, os.getpid()))
    f.add_rule(deny, "rt_tgsigqueueinfo", seccomp.Arg(0, seccomp.NE, os.getpid()))
    return f


def _warm_up(device: str) -> None:
    """Everything torch opens lazily (cpuinfo, kernels, CUDA), before files are out of reach."""
    import torch

    # On a GPU too: CUDA's libraries load their parts (cuDNN's convolutions and RNNs, cuBLAS's
    # kernels) the first time each runs, by file, which the filter then refuses.
    for dev in dict.fromkeys(("cpu", device)):
        x = torch.randn(4, 8, device=dev)
        y = (x @ x.T).softmax(-1)
        y.multinomial(1)
        torch.bmm(x.unsqueeze(0), x.T.unsqueeze(0)).log_softmax(-1).argmax(-1).tolist()
        torch.nn.GRUCell(8, 8).to(dev)(x)
        torch.nn.GRU(8, 8, batch_first=True).to(dev)(x.unsqueeze(0))
        torch.nn.functional.embedding(torch.tensor([0, 1], device=dev), torch.randn(3, 8, device=dev))
        if dev != "cpu":
            torch.nn.Conv2d(3, 4, 3, padding=1).to(dev)(torch.randn(2, 3, 7, 7, device=dev)).sum().item()


def _kind(exc: Exception) -> str:
    """The exception's type as the researcher knows it; its message stays here (it is the
    model's text), read only to tell a failed allocation from other errors."""
    text = str(exc)
    if "can't allocate memory" in text or "not enough memory" in text:
        return "MemoryError"
    if type(exc).__module__.startswith("torch") and type(exc).__name__ in ("Error", "JITException"):
        return "RuntimeError"  # raised inside TorchScript code
    return type(exc).__name__


def _methods(model) -> dict[str, list[str]]:
    import inspect

    out = {}
    names = (
        model._c._method_names()
        if hasattr(model, "_c")
        else [n for n in dir(model) if not n.startswith("_") and callable(getattr(model, n, None))]
    )
    for name in names:
        if name.startswith("_"):
            continue
        fn = getattr(model, name, None)
        schema = getattr(fn, "schema", None)
        if schema is not None:
            out[name] = [a.name for a in schema.arguments][1:]  # without self
        else:
            try:
                out[name] = list(inspect.signature(fn).parameters)
            except (TypeError, ValueError):
                out[name] = []
    return out


def child_main() -> int:
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    # Nothing the model prints may corrupt the answers: stdout is ours alone from here on.
    answers = os.fdopen(os.dup(stdout.fileno()), "wb")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    try:
        spec, bufs = _read(stdin.read, MAX_MESSAGE * 2)
        limits, device = spec["limits"], spec.get("device", "cpu")
        import torch

        torch.set_num_threads(int(limits.get("threads", 1)))
        module, func = spec["loader"].split(":")
        loader = getattr(importlib.import_module(module), func)
        _warm_up(device)
        _pin(int(limits.get("threads", 1)))
        lock = _seccomp_filter(device)
        uid = _drop_privileges(_sandbox_uid())
        _limit(int(limits["cpu_s"]), int(limits["memory_mb"]), device, uid)
        _die_with_parent(int(spec["parent"]))
        lock.load()  # from here: no files, sockets, exec, processes or signals (and no_new_privs)
    except MemoryError:
        return 3
    try:
        # Loading runs the archive's code too (TorchScript __setstate__): inside the lock.
        model = loader(spec["fmt"], bytes(bufs.pop()), spec.get("config")).to(device).eval()
        methods = _methods(model)
    except MemoryError:
        return 3
    except Exception as exc:
        # Weights (safetensors) are data read by our own code: its message says what does not
        # fit. An archive is code: only the error's type.
        detail = (
            " ".join(line.strip() for line in str(exc).strip().splitlines()[:3])[:300]
            if spec["fmt"] == "safetensors"
            else ""
        )
        _write(answers, {"error": type(exc).__name__, "detail": detail})
        return 0
    _write(answers, {"methods": methods})
    while True:
        try:
            request, bufs = _read(stdin.read, MAX_MESSAGE * 2)
        except EOFError:
            return 0
        try:
            args = [_decode(a, bufs) for a in request["args"]]
            args = [a.to(device) if isinstance(a, torch.Tensor) else a for a in args]
            with torch.no_grad():
                result = getattr(model, request["call"])(*args)
            out: list[bytes] = []
            _write(answers, {"result": _encode(result, out)}, out)
        except MemoryError:
            _write(answers, {"error": "MemoryError"})
        except Exception as exc:
            _write(answers, {"error": _kind(exc)})


if __name__ == "__main__":
    sys.exit(child_main())
