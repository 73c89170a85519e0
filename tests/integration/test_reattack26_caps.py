"""Re-attack of issue 26.3: the cap on a model's answer came from what the call sent (4 MB plus
64 bytes per byte of its tensors), so a navigation speaker given an 8 MB batch could answer
512 MB. The cap is now what the method's declared answer can weigh (workers/sandbox.py,
`ANSWERS` of each kind's loader): a speaker's score() is one float per path.

This module is also the probe's loader (`tests.integration.test_reattack26_caps:load`)."""

from __future__ import annotations

import time

import pytest
import torch

from tests.conftest import ROOT
from workers.navigation.loading import ANSWERS
from workers.sandbox import SandboxedModel, SandboxError, sandbox_available

pytestmark = pytest.mark.skipif(sandbox_available() is not None, reason=f"no model sandbox here: {sandbox_available()}")


class Probe:
    """A speaker and listener answering with the sizes they are told to (`answer`)."""

    rows, hidden = 0, 4096

    def answer(self, rows: int, hidden: int) -> None:
        self.rows, self.hidden = rows, hidden

    def to(self, device):
        return self

    def eval(self):
        return self

    def score(self, steps, step_mask, tokens, token_mask):
        return torch.zeros(self.rows or steps.shape[0], dtype=torch.float32)

    def encode(self, tokens, token_mask):
        b, length = tokens.shape
        states = torch.zeros(b, length, self.hidden, dtype=torch.float64)
        return states, torch.zeros(b, self.hidden, dtype=torch.float64)


def load(fmt: str, data: bytes, config: dict | None) -> Probe:
    return Probe()


@pytest.fixture
def model(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    made = SandboxedModel(
        "tests.integration.test_reattack26_caps:load", "probe", b"", None, limits={"call_s": 60}, answers=ANSWERS
    )
    yield made
    made.close()


def test_a_speakers_score_is_capped_by_its_shape_not_by_its_8_MB_batch(model):
    steps = torch.zeros(64, 111, 295)  # 8 MB of features: 512 MB of answer allowed before
    masks = torch.ones(64, 111, dtype=torch.bool), torch.zeros(64, 5, dtype=torch.int64)
    assert model.score(steps, masks[0], masks[1], masks[1].bool()).shape == (64,)
    started = time.monotonic()
    with pytest.raises(SandboxError, match=r"answer to score\(\) was over its size limit \(64 KB"):
        model.answer(16 << 20, 0)  # 64 MB of floats
        model.score(steps, masks[0], masks[1], masks[1].bool())
    assert time.monotonic() - started < 30  # refused on the sizes it announced, not read


def test_a_listeners_encode_may_answer_its_largest_state_and_no_more(model):
    tokens = torch.ones(2, 7, dtype=torch.int64)
    states, h = model.encode(tokens, tokens.bool())  # H at its most, in float64
    assert states.shape == (2, 7, 4096) and h.shape == (2, 4096)
    with pytest.raises(SandboxError, match=r"answer to encode\(\) was over its size limit"):
        model.answer(0, 2 * 4096)
        model.encode(tokens, tokens.bool())
