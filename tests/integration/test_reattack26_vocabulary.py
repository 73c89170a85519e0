"""Re-attack of issue 26.9: a navigation speaker's vocabulary is bounded where generation reads
it, not only where validation did. Found from a fresh clone: a TorchScript speaker whose
vocabulary() answers the checked list only after feature_version() was asked (validation asks
it first; generation does not) passed validation, and in generation answered words of 16,384
characters with spaces and markup, which `workers/navigation/generate.py` used unchecked
(`Vocabulary(list(speaker.vocabulary()))`; so does rerank.py's ScriptedListener).
"""

from __future__ import annotations

import io
from typing import List

import pytest
from sqlalchemy import select

from app import jobs
from app.kinds.navigation.architectures import MAX_WORD_CHARS
from app.studies.models import Item
from tests.integration.test_generation import _run, _setup, stored_artifact, tiny_models  # noqa: F401 (a fixture)

pytestmark = pytest.mark.backend_agnostic("torch generation over stored artifacts, as test_generation.py")


@pytest.fixture
def setup(session, tiny_models):  # noqa: F811
    return _setup(session, tiny_models)


def test_a_speaker_whose_vocabulary_changes_after_validation_cannot_put_long_words_in_items(
    session,
    setup,
    tiny_models,  # noqa: F811
):
    import torch

    from workers.navigation.train import load_model as load_builtin
    from workers.navigation.validate import validate_bytes

    class TwoFacedSpeaker(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner
            self.asked_version = False

        @torch.jit.export
        def feature_version(self) -> str:
            self.asked_version = True
            return self.inner.feature_version()

        @torch.jit.export
        def vocabulary(self) -> List[str]:
            words = self.inner.vocabulary()
            if self.asked_version:
                return words
            big = "w"
            for _ in range(14):
                big = big + big  # 16,384 characters
            out = words[:4]
            for i in range(4, len(words)):
                out.append("<b>" + big + " spaced " + str(i))
            return out

        @torch.jit.export
        def score(self, steps, step_mask, tokens, token_mask):
            return self.inner.score(steps, step_mask, tokens, token_mask)

        @torch.jit.export
        def sample(self, steps, step_mask, max_len: int, greedy: bool, temperature: float, top_p: float = 1.0):
            return self.inner.sample(steps, step_mask, max_len, greedy, temperature, top_p)

    blob, config = tiny_models["speaker"]
    buf = io.BytesIO()
    torch.jit.save(torch.jit.script(TwoFacedSpeaker(load_builtin(blob, config))), buf)
    data = buf.getvalue()
    assert validate_bytes("speaker", "torchscript", data, None).startswith("speaker with")  # passes validation
    art = stored_artifact(session, setup["owner"], "two-faced-speaker", "speaker", data, "torchscript", {})
    session.commit()
    run = _run(session, {**setup, "speaker": art}, listeners=False)
    state = jobs.run_job(run.job_id)
    session.expire_all()
    texts = [
        str(i.payload)
        for i in session.scalars(select(Item).where(Item.study_id == setup["study"].id, Item.source == "agent"))
    ]
    longest = max((len(w) for t in texts for w in t.split()), default=0)
    assert longest <= MAX_WORD_CHARS + 50, f"run {state}: an item holds a {longest}-character word"
    if state == "failed":
        assert "vocabulary()" in session.get(jobs.Job, run.job_id).log
