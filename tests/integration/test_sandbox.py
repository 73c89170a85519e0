"""Uploaded models are hostile (issue 10): a TorchScript speaker that reads files, prints secrets
into its answers, loops forever or allocates without bound is refused with a verdict that names
the failed check, and nothing it does reaches the worker's files, network or other jobs."""

from __future__ import annotations

import io
import os
import time

import pytest
import torch
from torch import Tensor

from workers.navigation.features import SPECIALS
from workers.navigation.loading import LOADER
from workers.navigation.speaker import Speaker
from workers.navigation.validate import Invalid, validate_bytes
from workers.sandbox import SANDBOX_UID_BASE, ModelRaised, SandboxedModel, SandboxError, sandbox_available
from tests.conftest import ROOT
from tests.integration.test_agent_artifacts import WORDS, scripted

pytestmark = pytest.mark.skipif(sandbox_available() is not None, reason=f"no model sandbox here: {sandbox_available()}")

SECRET = "proctor-secret-" + "x1y2z3"


class FileReadingSpeaker(Speaker):
    """score() reads another upload's blob (or any file) and hides its bytes in the scores."""

    def __init__(self, words, target: str):
        super().__init__(words, hidden=8, embed=8)
        self.target = target

    @torch.jit.export
    def score(self, steps: Tensor, step_mask: Tensor, tokens: Tensor, token_mask: Tensor) -> Tensor:
        stolen = torch.from_file(self.target, shared=False, size=16, dtype=torch.uint8)
        return -stolen[: tokens.shape[0]].to(torch.float32)


class TalkativeSpeaker(Speaker):
    """Its feature version and its errors carry text that must never reach a verdict."""

    @torch.jit.export
    def feature_version(self) -> str:
        return "proctor-secret-x1y2z3"


class RaisingSpeaker(Speaker):
    @torch.jit.export
    def score(self, steps: Tensor, step_mask: Tensor, tokens: Tensor, token_mask: Tensor) -> Tensor:
        raise RuntimeError("proctor-secret-x1y2z3")


class LoopingSpeaker(Speaker):
    @torch.jit.export
    def score(self, steps: Tensor, step_mask: Tensor, tokens: Tensor, token_mask: Tensor) -> Tensor:
        x = torch.zeros(1)
        while bool(x[0] >= 0):
            x = x + 1
        return x


class HungrySpeaker(Speaker):
    @torch.jit.export
    def score(self, steps: Tensor, step_mask: Tensor, tokens: Tensor, token_mask: Tensor) -> Tensor:
        big = torch.ones(1 << 34, dtype=torch.uint8)  # 16 GiB
        return big[: tokens.shape[0]].to(torch.float32)


def test_a_model_cannot_read_the_workers_files(tmp_path):
    blob = tmp_path / "another-researchers-export.jsonl"
    blob.write_text(SECRET * 4)
    os.chmod(blob, 0o644)  # readable by anyone on the machine: only the sandbox stands between
    # Outside the sandbox, the same archive does read it: the test would catch a sandbox that
    # stopped working.
    free = torch.jit.load(io.BytesIO(scripted(FileReadingSpeaker(WORDS, str(blob)))))
    assert (
        bytes(
            free.score(torch.zeros(1), torch.zeros(1), torch.zeros((2, 3), dtype=torch.long), torch.ones((2, 3)))
            .neg()
            .to(torch.uint8)
            .tolist()
        )
        == SECRET.encode()[:2]
    )
    with pytest.raises(Invalid) as refused:
        validate_bytes("speaker", "torchscript", scripted(FileReadingSpeaker(WORDS, str(blob))), None)
    assert str(refused.value) == "score() raised RuntimeError"
    for target in ("/etc/passwd", "/proc/self/environ"):
        with pytest.raises(Invalid, match=r"^score\(\) raised RuntimeError$"):
            validate_bytes("speaker", "torchscript", scripted(FileReadingSpeaker(WORDS, target)), None)


def test_verdicts_never_repeat_the_models_own_text():
    for model in (TalkativeSpeaker(WORDS, hidden=8, embed=8), RaisingSpeaker(WORDS, hidden=8, embed=8)):
        with pytest.raises(Invalid) as refused:
            validate_bytes("speaker", "torchscript", scripted(model), None)
        assert "x1y2z3" not in str(refused.value)
    with pytest.raises(Invalid) as refused:
        validate_bytes("speaker", "torchscript", scripted(RaisingSpeaker(WORDS, hidden=8, embed=8)), None)
    assert str(refused.value) == "score() raised RuntimeError"


def test_a_model_that_never_answers_is_stopped_at_the_wall_clock_limit():
    started = time.monotonic()
    with pytest.raises(Invalid) as refused:
        validate_bytes(
            "speaker", "torchscript", scripted(LoopingSpeaker(WORDS, hidden=8, embed=8)), None, limits={"call_s": 3}
        )
    assert str(refused.value) == "the model did not answer score() within 3 s (wall-clock limit)"
    assert time.monotonic() - started < 60


def test_a_model_that_spins_is_stopped_at_its_cpu_limit():
    with pytest.raises(Invalid) as refused:
        validate_bytes(
            "speaker",
            "torchscript",
            scripted(LoopingSpeaker(WORDS, hidden=8, embed=8)),
            None,
            limits={"cpu_s": 2, "call_s": 120},
        )
    assert str(refused.value).startswith("the model ran past its CPU time limit (2 s)")


def test_a_model_that_allocates_without_bound_is_stopped_at_its_memory_limit():
    with pytest.raises(Invalid) as refused:
        validate_bytes(
            "speaker",
            "torchscript",
            scripted(HungrySpeaker(WORDS, hidden=8, embed=8)),
            None,
            limits={"memory_mb": 2048},
        )
    assert str(refused.value) == "the model used more than its memory limit (2048 MB) in score()"


def test_the_sandboxed_process_has_no_files_no_network_no_exec(monkeypatch):
    """Through a loader of our own (Python, so it can try what TorchScript cannot): every
    attempt to leave the process is refused by the kernel."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    model = SandboxedModel("tests.sandbox_probe:load", "probe", b"", None)
    try:
        for probe in ("read_file", "write_file", "connect", "run_program", "list_folder"):
            with pytest.raises(ModelRaised) as refused:
                model.call(probe)
            assert refused.value.kind == "PermissionError", probe
        uid = model.call("whoami")  # a user of its own under a root worker (nobody if none can be had)
        assert uid >= SANDBOX_UID_BASE or uid == 65534 if os.geteuid() == 0 else uid == os.geteuid()
        assert model.call("add", torch.tensor([1.0, 2.0]), 3).tolist() == [4.0, 5.0]
    finally:
        model.close()


def test_the_parent_never_trusts_what_the_process_sends(monkeypatch):
    """Answers are JSON and raw arrays of plain dtypes, checked before use: a malformed one is
    refused, an object that is not a tensor or a plain value never crosses."""
    import pickle

    from workers.sandbox import _decode

    assert _decode({"t": 0, "dtype": "float32", "shape": [2]}, [b"\0" * 8]).tolist() == [0.0, 0.0]
    for header, bufs in (
        ({"t": 0, "dtype": "object", "shape": [1]}, [pickle.dumps(print)]),
        ({"t": 0, "dtype": "float32", "shape": [3]}, [b"\0" * 8]),
        ({"t": 5, "dtype": "float32", "shape": [2]}, [b"\0" * 8]),
        ({"t": 0, "dtype": "float32", "shape": [-2]}, [b"\0" * 8]),
        ({"__reduce__": "os.system"}, []),
    ):
        with pytest.raises(SandboxError):
            _decode(header, bufs)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    model = SandboxedModel("tests.sandbox_probe:load", "probe", b"", None)
    try:
        with pytest.raises(ModelRaised, match=r"^garbage\(\) raised TypeError$"):
            model.call("garbage")
        assert model.call("add", torch.tensor([1]), 1).tolist() == [2]  # still answering
    finally:
        model.close()


def test_a_sandboxed_speaker_answers_as_it_does_in_process():
    """What generation loads for a TorchScript speaker (a SandboxedModel) gives the same
    vocabulary, scores and greedy samples as the archive run in this process."""
    torch.manual_seed(0)
    speaker = Speaker([*SPECIALS, "go", "left"], hidden=8, embed=8)
    data = scripted(speaker)
    local = torch.jit.load(io.BytesIO(data))
    steps, mask = torch.randn(2, 3, speaker.step_size), torch.ones(2, 3, dtype=torch.bool)
    tokens, tmask = torch.tensor([[4, 5, 2], [5, 2, 0]]), torch.tensor([[1, 1, 1], [1, 1, 0]], dtype=torch.bool)
    boxed = SandboxedModel(LOADER, "torchscript", data, None)
    try:
        assert boxed.vocabulary() == [*SPECIALS, "go", "left"]
        assert torch.allclose(boxed.score(steps, mask, tokens, tmask), local.score(steps, mask, tokens, tmask))
        got_tokens, got_logp = boxed.sample(steps, mask, 5, True, 1.0)
        want_tokens, want_logp = local.sample(steps, mask, 5, True, 1.0)
        assert torch.equal(got_tokens, want_tokens) and torch.allclose(got_logp, want_logp)
        assert boxed.methods["sample"][:5] == ["steps", "step_mask", "max_len", "greedy", "temperature"]
    finally:
        boxed.close()


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the probe's system call numbers are x86-64's")
def test_native_code_in_the_sandbox_finds_every_way_out_refused(tmp_path, monkeypatch):
    """What a crafted archive's native code could try (issue 26.2): files by openat/openat2 and
    io_uring (which seccomp alone never sees), a blob of the store, new processes by fork,
    clone, clone3 and posix_spawn, signals and ptrace on another model's sandbox or on the
    worker. Each is refused by the kernel; threads still work."""
    from app.storage import LocalBlobStore

    store = LocalBlobStore(tmp_path / "blobs", secret_key="k" * 40)
    store.put("exports/7/completions.csv", SECRET.encode())
    blob = str(store.path("exports/7/completions.csv"))
    assert os.stat(blob).st_mode & 0o777 == 0o600  # the store's user's alone
    assert os.stat(store.root).st_mode & 0o777 == 0o700
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    one = SandboxedModel("tests.sandbox_probe:load", "probe", b"", None)
    other = SandboxedModel("tests.sandbox_probe:load", "probe", b"", None)
    try:
        assert one.call("thread") == 42
        victim = other.call("pid")
        refused = {}
        for probe, *args in (
            ("raw_openat", blob),
            ("raw_openat2", blob),
            ("raw_openat", "/etc/passwd"),
            ("io_uring",),
            ("fork",),
            ("raw_clone",),
            ("raw_clone3",),
            ("spawn",),
            ("signal", victim),
            ("raw_signal", victim),
            ("ptrace", victim),
            ("signal", os.getpid()),
        ):
            try:
                got = one.call(probe, *args)
                refused[(probe, *args)] = f"allowed: {got!r}"
            except ModelRaised as exc:
                refused[(probe, *args)] = exc.kind
        # clone3 is "not implemented" (so that glibc falls back to clone, which is checked).
        assert refused.pop(("raw_clone3",)) in ("PermissionError", "OSError")
        assert set(refused.values()) == {"PermissionError"}, refused
        assert other.call("pid") == victim and one.call("thread") == 42  # both still answer
    finally:
        one.close()
        other.close()


def test_an_answer_larger_than_the_call_can_justify_is_refused_unread(monkeypatch):
    """A model answering 200 MB to a call that sent nothing (issue 26.3): refused from the
    sizes it announces, before the worker reads them; the process is ended (its answer is
    still in the pipe) and the next call starts afresh. A method declared to answer tensors
    of the call's shape may answer them, at any dtype, and no more."""
    from workers.sandbox import ANSWER_FRAMING

    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    answers = {"big": lambda n, like: [like.shape]}
    model = SandboxedModel("tests.sandbox_probe:load", "probe", b"", None, answers=answers)
    try:
        assert model.call("pid") > 0
        with pytest.raises(SandboxError, match=r"answer to big\(\) was over its size limit \(64 KB"):
            model.call("big", 200 << 20, torch.zeros(1))
        given = torch.zeros(1 << 18, dtype=torch.uint8)  # 256 KiB: 2 MiB of float64 allowed
        assert model.call("big", 8 * given.numel(), given).numel() == 2 << 20
        with pytest.raises(SandboxError, match="over its size limit"):
            model.call("big", 8 * given.numel() + ANSWER_FRAMING, given)
    finally:
        model.close()
