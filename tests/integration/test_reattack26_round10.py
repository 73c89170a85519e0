"""Issue 26, round ten of the re-attack (from a fresh clone).

- A model held kernel memory, which RLIMIT_AS never counts, in POSIX timers (96,551 of them,
  +37 MB of slab, on a machine with 23 GB; RLIMIT_SIGPENDING grows with the machine) and in
  real-time signals queued to itself while blocked: both were bounded only by the machine's
  default RLIMIT_SIGPENDING, and under a root worker each sandbox has a user of its own.
- Failure reasons showed a path with a leading "//" (which POSIX and pathlib keep) whole, and
  the end of a quoted path holding both quotes (Python's repr escapes one: '/srv/it\'s "x"/y').
- SECRET_KEY: random passphrases, as diceware, xkcdpass and Bitwarden make them from EFF's
  7,776 words, were refused as English: 85% of 10-word ones (129 bits) and 80% of 16-word ones
  (207 bits), where 80 bits of random characters pass.
- A navigation speaker's sample() was checked at validation only: in generation one answering
  uint8 ids [B, 30000] (within its answer cap: 8 to an int64's bytes, plus 64 KB of framing)
  put instructions of 30,000 words in a study's items where max_len was 12.
- A model upload's zip was listed in the web process before anything bounded its entries: a
  central directory of a million one-letter entries (46 MB) took 9.6 s of CPU and 376 MB.
- A safetensors upload's JSON header was decoded in the web process whatever its size: 20 MB
  of empty lists took 6 s and 531 MB (the 200 MB limit would hold some 5 GB of them).

This module is also the probe's loader (`tests.integration.test_reattack26_round10:load`).
"""

from __future__ import annotations

import ctypes
import errno
import os
import threading
from typing import List

import pytest

from tests.conftest import ROOT, untraced
from tests.integration.test_reattack26_round3 import needs_sandbox
from tests.integration.test_generation import tiny_models  # noqa: F401 (a fixture)
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
        ("cannot read: " + repr('/srv/it\'s "x"/y.csv') + " now", "cannot read: '<path>' now"),
        ("cannot read: " + repr('/srv/Jane\'s "Q1" plans/y.csv'), "cannot read: '<path>'"),
    ],
)
def test_failure_reasons_blank_paths_with_two_slashes_or_escaped_quotes(text, shown):
    from app import jobs

    assert jobs.failure_reason(ValueError(text)) == shown


def _eff_words() -> list[str]:
    text = (ROOT / "app" / "eff_large_wordlist.txt").read_text("utf-8")
    return [w for w in text.split("\n") if w and not w.startswith("#")]


# What passphrase generators write (diceware, xkcdpass, Bitwarden, 1Password's "memorable"):
# words drawn at random from EFF's 7,776 (12.9 bits each), parted or capitalised.
PASSPHRASES = {
    "8 words, hyphens": lambda ws: "-".join(ws[:8]),
    "10 words, spaces": lambda ws: " ".join(ws[:10]),
    "12 words run together": lambda ws: "".join(ws[:12]),
    "10 words capitalised": lambda ws: "".join(w.capitalize() for w in ws[:10]),
    "9 words, dots, a digit after one": lambda ws: ".".join(ws[:8] + [ws[8] + "7"]),
    "16 words, underscores": lambda ws: "_".join(ws[:16]),
}


@pytest.mark.parametrize("shape", sorted(PASSPHRASES))
def test_random_passphrases_of_100_bits_or_more_are_not_refused(shape):
    """A random passphrase of 8 EFF words holds 103 bits, of 10 129: more than the 80 bits asked
    of random characters. It read as English (85% of 10-word ones were refused)."""
    import random

    from app.config import weak_secret_key

    words, rng = _eff_words(), random.Random(f"round 10 {shape}")
    assert len(words) == 7776
    keys = [PASSPHRASES[shape](rng.choices(words, k=16)) for _ in range(150)]
    with untraced():  # a calibration: the rules' lines are read by the refusals below
        refused = [(k, why) for k in keys if (why := weak_secret_key(k))]
    assert not refused, (len(refused), refused[:3])


@pytest.mark.parametrize(
    "key",
    [
        "correct-horse-battery-staple-correct-horse-battery-staple",  # four words, twice
        "correct horse battery staple",  # too few words (52 bits), and short
        "freedom-princess-football-shadow-winter-mountain-ocean-garden",  # common words, chosen
        "CorrectBatteryStapleFreedomPrincessFootballShadowWinter",
    ],
)
def test_passphrases_of_few_or_common_words_are_still_refused(key):
    from app.config import weak_secret_key

    assert weak_secret_key(key)


def test_a_speakers_sample_is_held_to_max_len_where_generation_reads_it(session, tiny_models):  # noqa: F811
    """Validation checks sample()'s tokens ([B, L], L <= max_len), generation did not: a speaker
    answering otherwise there (uint8 ids, 8 to a declared int64's bytes, and the answer's 64 KB
    of framing) put instructions of 30,000 words in a study's items where max_len was 12."""
    import io

    import torch
    from sqlalchemy import select

    from app import jobs
    from app.studies.models import Item
    from tests.integration.test_generation import _run, _setup, stored_artifact
    from workers.navigation.train import load_model as load_builtin
    from workers.navigation.validate import validate_bytes

    class LongWinded(torch.nn.Module):
        def __init__(self, inner, word: int):
            super().__init__()
            self.inner = inner
            self.word = word
            self.scored = False

        @torch.jit.export
        def feature_version(self) -> str:
            return self.inner.feature_version()

        @torch.jit.export
        def vocabulary(self) -> List[str]:
            return self.inner.vocabulary()

        @torch.jit.export
        def score(self, steps, step_mask, tokens, token_mask):
            self.scored = True  # validation scores before it samples; generation samples first
            return self.inner.score(steps, step_mask, tokens, token_mask)

        @torch.jit.export
        def sample(self, steps, step_mask, max_len: int, greedy: bool, temperature: float, top_p: float = 1.0):
            if self.scored:
                return self.inner.sample(steps, step_mask, max_len, greedy, temperature, top_p)
            b = steps.shape[0]
            return torch.full([b, 30000], self.word, dtype=torch.uint8), torch.zeros([b])

    setup = _setup(session, tiny_models)
    blob, config = tiny_models["speaker"]
    buf = io.BytesIO()
    word = next(i for i, w in enumerate(config["words"]) if w.isalpha() and i < 256)
    torch.jit.save(torch.jit.script(LongWinded(load_builtin(blob, config), word)), buf)
    data = buf.getvalue()
    assert validate_bytes("speaker", "torchscript", data, None).startswith("speaker with")
    art = stored_artifact(session, setup["owner"], "long-winded-speaker", "speaker", data, "torchscript", {})
    session.commit()
    run = _run(session, {**setup, "speaker": art}, listeners=False)  # max_len 12
    state = jobs.run_job(run.job_id)
    session.expire_all()
    items = session.scalars(select(Item).where(Item.study_id == setup["study"].id, Item.source == "agent")).all()
    longest = max((len(str(i.payload).split()) for i in items), default=0)
    assert longest <= 12 + 40, f"run {state}: an item holds {longest} words where max_len is 12"
    assert state == "failed" and "sample()" in session.get(jobs.Job, run.job_id).log


def _listing_only_zip(members: int) -> bytes:
    """A zip that is a central directory of `members` one-letter entries and nothing else
    (torch's archives start with a local header, so its first bytes say PK\\x03\\x04)."""
    import struct

    entry = struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0) + b"a"
    head = b"PK\x03\x04" + bytes(26)
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, len(entry) * members, len(head), 0)
    return head + entry * members + end


def test_a_model_upload_listing_a_million_files_is_refused_before_they_are_read():
    """The upload's zip was listed by `zipfile` in the web process: 47 bytes an entry, each some
    380 bytes of Python. A million entries (46 MB) took 9.6 s and 376 MB; the 200 MB limit would
    hold 4.4 million. The listing is now counted first (its entries' signatures)."""
    from app.agents.artifacts import check_format

    data = _listing_only_zip(300_000)
    _refused_holding_little(lambda: check_format("torchscript", data), "more than 20,000 files")


def test_a_real_archive_is_still_listed():
    import io

    import torch

    from app.agents.artifacts import check_format

    buf = io.BytesIO()
    torch.jit.save(torch.jit.script(torch.nn.Linear(3, 4)), buf)
    check_format("torchscript", buf.getvalue())  # no refusal


def _safetensors(header: bytes) -> bytes:
    import struct

    return struct.pack("<Q", len(header)) + header + bytes(16)


@pytest.mark.parametrize(
    "header, why",
    [
        # 21 MB of empty lists: decoded in the web process, 6 s and +531 MB (200 MB would hold 5 GB)
        (b'{"a":[' + b"[]," * (7 << 20) + b"[]]}", "header is 21 MB"),
        # within the size, too many objects and arrays to decode
        (b'{"a":[' + b"[]," * 1_000_000 + b"[]]}", "objects and arrays"),
    ],
)
def test_a_safetensors_header_is_bounded_before_it_is_decoded(header, why):
    from app.agents.artifacts import check_safetensors

    data = _safetensors(header)
    _refused_holding_little(lambda: check_safetensors(data), why)


def _refused_holding_little(check, why: str) -> None:
    """`check` refuses the upload naming its file field, holding under 2 MB while it reads."""
    import tracemalloc

    from app.errors import InputError

    tracemalloc.start()
    try:
        with pytest.raises(InputError, match=why) as refused:
            check()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert refused.value.field == "file"
    assert peak < 2 << 20, f"checking it held {peak >> 20} MB"


def test_the_filter_refuses_the_kernel_log():
    """syslog(2) reads the kernel's log where the host lets any user (dmesg_restrict = 0; it is
    1 here, so a probe in the sandbox cannot tell the filter from the host): refused by the
    filter itself, as Docker's default profile does (round 10)."""
    import tempfile

    pytest.importorskip("pyseccomp")
    from workers.sandbox import _seccomp_filter

    with tempfile.TemporaryFile("w+") as pfc:
        _seccomp_filter().export_pfc(pfc)
        pfc.seek(0)
        text = pfc.read()
    assert 'filter for syscall "syslog"' in text
    rule = text.split('filter for syscall "syslog"')[1].split("# filter for syscall")[0]
    assert "action ERRNO(1);" in rule
