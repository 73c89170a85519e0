"""A loader for tests/integration/test_sandbox.py: a Python "model" that tries, from inside the
sandboxed process, what TorchScript cannot express but native code in a crafted archive could
(open a file by any system call, io_uring, a socket, a program, a process, a signal, ptrace).
Each probe raises OSError (PermissionError for EPERM) when the kernel refuses it."""

from __future__ import annotations

import ctypes
import os
import socket
import subprocess
import threading

# Loaded before the sandbox locks (the loader's module is imported first), as native code would be.
LIBC = ctypes.CDLL(None, use_errno=True)
# x86-64 numbers (the test skips elsewhere).
SYS = {
    "openat": 257,
    "openat2": 437,
    "io_uring_setup": 425,
    "clone": 56,
    "clone3": 435,
    "ptrace": 101,
    "kill": 62,
    "tgkill": 234,
}
AT_FDCWD = -100
SIGCHLD = 17


def _syscall(name: str, *args) -> int:
    ret = LIBC.syscall(ctypes.c_long(SYS[name]), *args)
    if ret == -1:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return ret


class Probe:
    def read_file(self):
        with open("/etc/hostname") as f:
            return f.read()

    def write_file(self):
        with open("escaped.txt", "w") as f:
            f.write("out")

    def list_folder(self):
        return os.listdir("/")  # opens the folder

    def connect(self):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.connect(("127.0.0.1", 5432))

    def run_program(self):
        return subprocess.run(["/bin/true"]).returncode

    def raw_openat(self, path: str):
        return _syscall("openat", ctypes.c_int(AT_FDCWD), ctypes.c_char_p(path.encode()), 0, 0)

    def raw_openat2(self, path: str):
        how = (ctypes.c_uint64 * 3)(0, 0, 0)  # struct open_how: flags, mode, resolve
        return _syscall(
            "openat2", ctypes.c_int(AT_FDCWD), ctypes.c_char_p(path.encode()), ctypes.byref(how), ctypes.c_size_t(24)
        )

    def io_uring(self):
        params = ctypes.create_string_buffer(120)  # struct io_uring_params, zeroed
        return _syscall("io_uring_setup", ctypes.c_uint(8), params)

    def fork(self):
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        return pid

    def raw_clone(self):
        pid = _syscall("clone", ctypes.c_ulong(SIGCHLD), None, None, None, None)
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        return pid

    def raw_clone3(self):
        args = (ctypes.c_uint64 * 11)()  # struct clone_args, zeroed: a plain fork
        args[4] = SIGCHLD  # exit_signal
        pid = _syscall("clone3", ctypes.byref(args), ctypes.c_size_t(88))
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        return pid

    def spawn(self):
        return os.posix_spawn("/bin/true", ["/bin/true"], {})  # vfork-style clone, then exec

    def thread(self):
        box = []
        t = threading.Thread(target=lambda: box.append(6 * 7))
        t.start()
        t.join()
        return box[0]

    def signal(self, pid: int):
        os.kill(pid, 0)  # 0: only asks whether a signal would be allowed
        return True

    def raw_signal(self, pid: int):
        return _syscall("tgkill", ctypes.c_int(pid), ctypes.c_int(pid), 0)

    def ptrace(self, pid: int):
        return _syscall("ptrace", ctypes.c_long(16), ctypes.c_long(pid), None, None)  # PTRACE_ATTACH

    def pid(self):
        return os.getpid()

    def big(self, n: int, like=None):
        import torch  # imported before the lock: no file is opened

        return torch.zeros(n, dtype=torch.uint8)

    def whoami(self):
        return os.geteuid()

    def add(self, tensor, n):
        return tensor + n

    def garbage(self):
        return object()  # cannot be sent: the parent must refuse, not unpickle

    def to(self, device):
        return self

    def eval(self):
        return self


def load(fmt: str, data: bytes, config: dict | None) -> Probe:
    return Probe()
