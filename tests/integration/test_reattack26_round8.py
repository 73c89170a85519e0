"""Issue 26, round eight of the re-attack (from a fresh clone).

- The answer protocol: a model (native code writing to its answer pipe) could send a tensor of
  a dimension past 2^63, of 65 dimensions, or of a dimension `true`, or a header with a number
  of 5,000 digits: the worker raised OverflowError, ValueError or TypeError instead of the
  malformed-answer verdict, and kept the process, the rest of the answer still in its pipe.
- Failure reasons: a URL's password holding "/" or "@", `key=value` secrets other than a
  password (`aws_secret_access_key=`, `X-Amz-Signature=`) and a bearer token were shown.

This module is also the probe's loader (`tests.integration.test_reattack26_round8:load`).
"""

from __future__ import annotations

import json
import os
import struct

import pytest

from tests.conftest import ROOT, untraced, SeededSecrets
from tests.integration.test_reattack26_round3 import Probe, needs_sandbox

# The child's answer pipe: stdout duplicated before stdout went to /dev/null.
ANSWERS_FD = 3


class Round8Probe(Probe):
    def forge(self, header: str):
        """Writes an answer of its own making ahead of the real one, as native code could."""
        head = header.encode()
        os.write(ANSWERS_FD, struct.pack("<QI", len(head), 1) + head + struct.pack("<Q", 1) + b"\x00")
        return None

    def fill_pipes(self, n: int, size: int):
        """Pipes grown to `size` by F_SETPIPE_SZ and filled: the bytes they held at once."""
        import fcntl

        held, fds = 0, []
        try:
            for _ in range(n):
                r, w = os.pipe()
                fds += [r, w]
                try:
                    fcntl.fcntl(w, F_SETPIPE_SZ, size)
                except OSError:
                    pass
                os.set_blocking(w, False)
                try:
                    while True:
                        held += os.write(w, b"x" * 65536)
                except BlockingIOError:
                    pass
        except OSError:  # out of descriptors
            pass
        finally:
            for fd in fds:
                os.close(fd)
        return held


F_SETPIPE_SZ = 1031


def load(fmt: str, data: bytes, config: dict | None) -> Round8Probe:
    return Round8Probe()


@pytest.fixture
def sandbox(monkeypatch):
    from workers.sandbox import SandboxedModel

    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    model = SandboxedModel("tests.integration.test_reattack26_round8:load", "probe", b"", None)
    yield model
    model.close()


def _tensor(shape) -> str:
    return json.dumps({"result": {"t": 0, "dtype": "uint8", "shape": shape}})


@needs_sandbox
@pytest.mark.parametrize(
    "header",
    [
        _tensor([1 << 64]),  # past int64: OverflowError
        _tensor([1] * 65),  # past numpy's dimensions: ValueError
        _tensor([True]),  # a bool is an int to Python: TypeError
        '{"result": ' + "9" * 5000 + "}",  # past Python's digits for an int: ValueError
    ],
    ids=["dim-2^64", "65-dims", "dim-true", "5000-digits"],
)
def test_a_forged_answer_is_a_malformed_answer_and_ends_the_process(sandbox, header):
    from workers.sandbox import SandboxError

    pid = sandbox.call("pid")
    with pytest.raises(SandboxError, match="malformed"):
        sandbox.call("forge", header)
    assert sandbox._proc is None  # its real answer was still in the pipe: the process is done
    assert sandbox.call("pid") != pid  # a fresh one answers in protocol


@needs_sandbox
def test_a_model_cannot_grow_pipes_to_hold_kernel_memory(sandbox):
    # Its 256 descriptors are 128 pipes; grown to 1 MB each they held 67 MB of the machine's
    # memory (the kernel's 64 MB a user, pipe-user-pages-soft), which RLIMIT_AS never counts.
    held = sandbox.call("fill_pipes", 200, 1 << 20)
    assert held <= 128 * 65536, held  # the default 64 KB a pipe
    assert sandbox.call("pid") > 0


def test_failure_reasons_blank_credentials_of_every_shape():
    from app.jobs import failure_reason

    shown = failure_reason(
        ValueError(
            "could not reach postgresql://proctor:pa/ss@db:5432/proctor nor redis://u:p@ss@redis:6379/0;"
            " aws_secret_access_key=AbCdSECRET1 session_token=TOKEN2"
            " https://b.s3.example.com/x?X-Amz-Credential=AKIAKEY3&X-Amz-Signature=SIG4"
            " Authorization: Bearer BEARER5"
        )
    )
    for secret in ("pa/ss", "ss@redis", "SECRET1", "TOKEN2", "AKIAKEY3", "SIG4", "BEARER5"):
        assert secret not in shown, (secret, shown)
    assert "db:5432" in shown or "<credentials>" in shown  # still says what it could not reach


def _digest(name: str, text: bytes) -> str:
    import hashlib

    return getattr(hashlib, name)(text).hexdigest()


def _b64_digest(text: bytes) -> str:
    import base64
    import hashlib

    return base64.b64encode(hashlib.sha256(text).digest()).decode()


@pytest.mark.parametrize(
    "key",
    [
        "qazwsxedcrfvtgbyhnujmikolpqazwsxedc",  # down the keyboard's columns, no digits
        "074f88a8-ebcb-11f1-9382-02fc00000001",  # a UUID v1: a time and a MAC address
        "00000000-0000-0000-0000-000000000000",
        "<your-secret-key-of-at-least-32-chars>",  # a template's placeholder
        "django-insecure-abcdefghijklmnopqrstuvwxyz",
        "python -c 'import secrets; print(secrets.token_hex(32))'",  # the command, not its output
        "${SECRET_KEY:-please-set-a-real-secret-key-123}",
        _digest("sha256", b"hunter2"),
        _digest("sha256", b"my secret key"),
        _digest("sha256", b"foobar"),
        _digest("md5", b"proctor-dev"),
        _digest("sha256", b"proctor-secret"),
        _b64_digest(b"proctor"),  # a digest in base64 (openssl dgst -binary | base64)
        _b64_digest(b"password"),
    ],
)
def test_round_eight_weak_keys_are_refused(key):
    from app.config import weak_secret_key

    assert weak_secret_key(key), key


def test_random_uuids_and_base64_digests_of_random_bytes_pass():
    import base64
    import uuid

    from app.config import weak_secret_key

    secrets = SeededSecrets(8)

    with untraced():  # a calibration
        refused = [
            k
            for _ in range(500)
            for k in (
                str(uuid.UUID(bytes=secrets.token_bytes(16), version=4)),
                base64.b64encode(secrets.token_bytes(32)).decode(),
                secrets.token_hex(32),
            )
            if weak_secret_key(k)
        ]
    assert refused == []
