"""The `navigation.validate` job: load an uploaded speaker or listener and run a small batch.

The model runs in a sandboxed process of its own (workers/sandbox.py): limits on CPU time,
memory and the time a call may take, no files, no network. Each check stops at the first
problem with a verdict the researcher can act on ("missing method act()", "score() returned
shape [3, 1], expected [3]", "sample() raised RuntimeError", "the model ran past its CPU time
limit"); a verdict names the failed check and never repeats the model's own text (its error
messages or returned strings). An artifact that passes them all is marked valid and may be
loaded by generation (loading.load_artifact). The interfaces are those of speaker.py and
listener.py, written out in docs/agents.md.
"""

from __future__ import annotations

from typing import Any

import torch
from sqlalchemy.orm import Session

from app.kinds.navigation.grammar import describe_path
from app.kinds.navigation.house import generate_house, sample_paths
from workers.navigation.features import FEATURES_VERSION, Vocabulary, World, pad_batch, stack_steps
from app.kinds.navigation.architectures import MAX_SIZE, check_vocabulary
from workers.navigation.loading import LOADER
from workers.validation import Invalid, call_checked, check_interface, record_validation, sandboxed_verdict

BATCH = 3  # paths in the test batch
MAX_LEN = 12  # words sampled per instruction in the test
ACT_STEPS = 3  # listener moves in the test
INTERFACES = {
    "speaker": ("feature_version", "vocabulary", "score", "sample"),
    "listener": ("feature_version", "vocabulary", "encode", "act"),
}
_HOUSE_SEED = 11  # a fixed generated house: every upload is tried on the same batch


def _shape(t: torch.Tensor) -> str:
    return "[" + ", ".join(str(int(n)) for n in t.shape) + "]"


def _tensor(method: str, what: str, value: Any, shape: tuple[int, ...], floating: bool) -> torch.Tensor:
    """Check one returned tensor: type, shape, dtype and (floats) no NaN."""
    label = f"{method}() {what}" if what else f"{method}()"
    if not isinstance(value, torch.Tensor):
        raise Invalid(f"{label} returned {type(value).__name__}, expected a tensor")
    expected = "[" + ", ".join(str(n) for n in shape) + "]"
    if tuple(value.shape) != shape:
        raise Invalid(f"{label} returned shape {_shape(value)}, expected {expected}")
    if floating and not value.is_floating_point():
        raise Invalid(f"{label} returned dtype {value.dtype}, expected a floating-point tensor")
    if not floating and (value.is_floating_point() or value.dtype == torch.bool):
        raise Invalid(f"{label} returned dtype {value.dtype}, expected an integer tensor (int64)")
    if floating and bool(torch.isnan(value).any()):
        raise Invalid(f"{label} returned NaN")
    return value


def _pair(method: str, value: Any) -> tuple[Any, Any]:
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise Invalid(f"{method}() must return a tuple of two tensors, got {type(value).__name__}")
    return value[0], value[1]


def check_common(model: torch.nn.Module, role: str) -> Vocabulary:
    check_interface(model, INTERFACES[role], f"a {role}", "docs/agents.md")
    version = call_checked(model, "feature_version")
    if version != FEATURES_VERSION:  # its text is the model's: not repeated
        raise Invalid(
            f"feature_version() does not return {FEATURES_VERSION!r}, the layout this platform builds (docs/agents.md)"
        )
    words = check_vocabulary(call_checked(model, "vocabulary"))
    if isinstance(words, str):
        raise Invalid(f"vocabulary() {words}")
    return Vocabulary(words)


def _batch():
    """A few paths on a generated house, their step features and grammar instructions."""
    house = generate_house(_HOUSE_SEED)
    world = World.from_house(house)
    paths = sample_paths(house, BATCH, rng=0)
    texts = [describe_path(house, p, rng=k, n=1)[0] for k, p in enumerate(paths)]
    return world, paths, texts


def check_speaker(model: torch.nn.Module, vocab: Vocabulary) -> str:
    world, paths, texts = _batch()
    b, v = len(paths), len(vocab)
    steps, step_mask = stack_steps([world.step_features(p.path, p.heading) for p in paths])
    tokens, token_mask = pad_batch([vocab.encode(t, 60) for t in texts])
    score = _tensor("score", "", call_checked(model, "score", steps, step_mask, tokens, token_mask), (b,), True)
    if not bool(torch.isfinite(score).all()):
        raise Invalid("score() returned an infinite log-probability")
    if bool((score > 1e-3).any()):
        raise Invalid(f"score() returned {float(score.max()):.3g}: a log-probability is at most 0")
    for greedy in (True, False):
        out = call_checked(model, "sample", steps, step_mask, MAX_LEN, greedy, 1.0)
        sampled, logp = _pair("sample", out)
        if (
            not isinstance(sampled, torch.Tensor)
            or sampled.dim() != 2
            or sampled.shape[0] != b
            or not 1 <= sampled.shape[1] <= MAX_LEN
        ):
            got = _shape(sampled) if isinstance(sampled, torch.Tensor) else type(sampled).__name__
            raise Invalid(
                f"sample() returned tokens of shape {got}, expected [{b}, L] with 1 <= L <= max_len = {MAX_LEN}"
            )
        _tensor("sample", "tokens", sampled, tuple(sampled.shape), False)
        if bool(((sampled < 0) | (sampled >= v)).any()):
            raise Invalid(f"sample() returned word ids outside the vocabulary (0..{v - 1})")
        _tensor("sample", "log-probabilities", logp, (b,), True)
    return f"speaker with {v} words: score() and sample() ran on {b} paths"


def check_listener(model: torch.nn.Module, vocab: Vocabulary) -> str:
    from workers.navigation.rerank import Worlds

    world, paths, texts = _batch()
    b, v = len(paths), len(vocab)
    tokens, token_mask = pad_batch([vocab.encode(t, 60) for t in texts])
    length = tokens.shape[1]
    states, h = _pair("encode", call_checked(model, "encode", tokens, token_mask))
    if not isinstance(states, torch.Tensor) or states.dim() != 3:
        got = _shape(states) if isinstance(states, torch.Tensor) else type(states).__name__
        raise Invalid(f"encode() returned states of shape {got}, expected [{b}, {length}, H]")
    hidden = int(states.shape[-1])
    if not 1 <= hidden <= MAX_SIZE:  # the sandbox caps later answers at that (loading.ANSWERS)
        raise Invalid(f"encode() returned states of size H = {hidden}, expected 1 to {MAX_SIZE}")
    _tensor("encode", "states", states, (b, length, hidden), True)
    h = _tensor("encode", "h0", h, (b, hidden), True)
    worlds = Worlds([world], torch.device("cpu"))
    cur = torch.tensor([worlds.index(world.scan, [p.path[0]])[0] for p in paths])
    heading = torch.tensor([p.heading for p in paths], dtype=torch.float32)
    for _ in range(ACT_STEPS):
        nb, actions, action_mask = worlds.actions(cur, heading)
        a = nb.shape[-1]
        out = call_checked(model, "act", states, token_mask, h, worlds.nodes[cur], actions, action_mask)
        logits, h = _pair("act", out)
        logits = _tensor("act", "logits", logits, (b, a + 1), True)
        h = _tensor("act", "h", h, (b, hidden), True)
        # the moves it may take and stop must have a real score; masked moves may be -1e9 or -inf
        open_ = torch.cat([action_mask, torch.ones((b, 1), dtype=torch.bool)], -1)
        if not bool(torch.isfinite(logits[open_]).all()):
            raise Invalid("act() returned an infinite logit for an allowed move or stop")
        choice = logits.argmax(-1)
        stop = choice == a
        picked = choice.clamp(max=a - 1).unsqueeze(-1)
        moved = nb.gather(-1, picked).squeeze(-1)
        heading = torch.where(stop, heading, worlds.headings[cur].gather(-1, picked).squeeze(-1))
        cur = torch.where(stop, cur, moved)
    return f"listener with {v} words: encode() and act() ran on {b} instructions for {ACT_STEPS} steps"


def validate_bytes(role: str, fmt: str, data: bytes, config: dict | None, limits: dict | None = None) -> str:
    """The verdict for a valid artifact; raises Invalid with the verdict otherwise. Every
    format runs sandboxed here: a safetensors upload that passes is known to load and run
    within the limits, so generation may run it in-process (loading.load_artifact)."""

    def check(model) -> str:
        vocab = check_common(model, role)
        return check_speaker(model, vocab) if role == "speaker" else check_listener(model, vocab)

    return sandboxed_verdict(LOADER, fmt, data, config, limits, check, name_architecture=False)


def run_validation(session: Session, job, progress) -> dict:
    return record_validation(session, job, progress, validate_bytes)
