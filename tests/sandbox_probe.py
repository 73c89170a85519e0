"""A loader for tests/integration/test_sandbox.py: a Python "model" that tries, from inside the
sandboxed process, what TorchScript cannot express (open a file, a socket, run a program)."""

from __future__ import annotations

import os
import socket
import subprocess


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
