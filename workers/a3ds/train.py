"""Training the built-in A3DS captioner (`proctor train a3ds-captioner`, the job `a3ds.train`):
scenes drawn by the renderer, captions from a built-in speaker (app/kinds/a3ds/speakers.py),
teacher forcing with cross-entropy; then the pragmatic metrics (app/kinds/a3ds/metrics.py) of
its greedy captions on held-out pairs, beside the speaker it learned from.

The paper's two settings: without the distractor the captioner learns the literal speaker's
exhaustive captions of the target; with it (--with-distractor), the contrastive speaker's
captions, which name just the features that tell target from distractor. Pairs differ in z
features, z uniform from 1 to 6.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import save as save_safetensors

from app.kinds.a3ds.architectures import encode, grammar_words
from app.kinds.a3ds.scenes import FEATURES, Pair, pair_differing_in
from app.kinds.a3ds.train import TRAINING
from workers.a3ds.captioner import Captioner, caption_pairs
from workers.training import Adam, Recipe, descend, job_options, train_and_upload

NAME = "captioner"


def default_speaker(with_distractor: bool) -> str:
    return "contrastive" if with_distractor else "literal"


def make_pairs(n: int, seed: int) -> list[Pair]:
    rng = random.Random(seed)
    return [pair_differing_in(rng, rng.sample(FEATURES, rng.randint(1, 6))) for _ in range(n)]


def _draw(pairs: list[Pair], images: dict[int, np.ndarray], bar=None) -> None:
    from app.kinds.a3ds.render import render

    for p in pairs:
        for s in (p.target, p.distractor):
            if s not in images:
                images[s] = render(s, 64)
        if bar is not None:
            bar.update(1)


def evaluate(model, pairs: list[Pair], images: dict[int, np.ndarray], device="cpu") -> dict:
    """The metrics' means over the model's captions of the pairs (metrics.means)."""
    from app.kinds.a3ds.metrics import means, score_caption

    captions = caption_pairs(model, [(p.target, p.distractor) for p in pairs], 64, device, images)
    return means([score_caption(p.target, p.distractor, c) for p, c in zip(pairs, captions)])


def speaker_metrics(pairs: list[Pair], speaker: str, seed: int) -> dict:
    from app.kinds.a3ds.metrics import means, score_caption
    from app.kinds.a3ds.speakers import speak

    return means([score_caption(p.target, p.distractor, speak(speaker, p, seed)) for p in pairs])


def run_training(
    *,
    pairs: int = 1000,
    dev_pairs: int = 200,
    with_distractor: bool = False,
    speaker: str | None = None,
    device: str = "cpu",
    out: str | Path | None = None,
    name: str = NAME,
    echo: Callable[[str], None] = print,
    epoch_done: Callable[[int, float], None] | None = None,
    bars: bool = True,
    **recipe: Any,
) -> tuple[Captioner, dict]:
    """The whole command: scenes, the speaker's captions, training, held-out metrics, files
    (when `out`). `recipe`: the sizes and schedule (Recipe)."""
    from tqdm import tqdm

    from app.kinds.a3ds.speakers import speak

    r = Recipe.of(TRAINING, recipe)
    seed, epochs, batch = r.seed, r.epochs, r.batch
    speaker = speaker or default_speaker(with_distractor)
    torch.manual_seed(seed)
    train, dev = make_pairs(pairs, seed), make_pairs(dev_pairs, seed + 10_000)
    images: dict[int, np.ndarray] = {}
    with tqdm(total=len(train) + len(dev), desc="drawing scenes", unit="pair", disable=not bars) as bar:
        _draw(train + dev, images, bar)
    words = grammar_words()
    seqs = [encode(speak(speaker, p, seed), words) for p in train]
    length = max(map(len, seqs))
    tokens = torch.zeros(len(seqs), length, dtype=torch.int64)
    for i, s in enumerate(seqs):
        tokens[i, : len(s)] = torch.tensor(s)
    target = torch.from_numpy(np.stack([images[p.target] for p in train]))
    distractor = torch.from_numpy(np.stack([images[p.distractor] for p in train]))
    model = Captioner(words, r.embed, r.hidden, r.channels, with_distractor, max_length=length - 1).to(device)
    opt = Adam(model.parameters(), lr=r.lr)
    loss_fn = torch.nn.CrossEntropyLoss(ignore_index=0)
    gen = torch.Generator().manual_seed(seed)
    echo(
        f"{len(train)} training pairs, {len(dev)} held out, captions from the {speaker} speaker, "
        f"{'with' if with_distractor else 'without'} the distractor, {device}"
    )
    for epoch in range(1, epochs + 1):
        model.train()
        order = torch.randperm(len(train), generator=gen)
        total, n = 0.0, 0
        for s in tqdm(
            range(0, len(train), batch), desc=f"epoch {epoch}/{epochs}", unit="batch", disable=not bars, leave=False
        ):
            idx = order[s : s + batch]
            tok = tokens[idx].to(device)
            logits = model(target[idx].to(device), distractor[idx].to(device), tok[:, :-1])
            loss = loss_fn(logits.reshape(-1, logits.shape[-1]), tok[:, 1:].reshape(-1))
            total, n = total + descend(opt, loss, None, clip=None) * len(idx), n + len(idx)
        echo(f"epoch {epoch}: loss {total / n:.3f}")
        if epoch_done is not None:
            epoch_done(epoch, total / n)
    model = model.cpu().eval()
    report = {
        "speaker": speaker,
        "with_distractor": with_distractor,
        "pairs": len(train),
        "epochs": epochs,
        "held_out": evaluate(model, dev, images),
        "speaker_held_out": speaker_metrics(dev, speaker, seed),
    }
    for label, m in (("captioner", report["held_out"]), (f"{speaker} speaker", report["speaker_held_out"])):
        echo(
            f"held out ({len(dev)} pairs), {label}: discriminativity {m['discriminative']:.3f}, contrastive "
            f"efficiency {m['contrastive_efficiency'] or 0:.3f}, relevance {m['relevance'] or 0:.3f}, optimal "
            f"{m['optimal']:.3f}, features mentioned {m['mentioned']:.2f}, false {m['false']:.2f}, "
            f"unparsed {m['unparsed']}"
        )
    if out is not None:
        folder = Path(out)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.safetensors").write_bytes(weights_bytes(model))
        (folder / f"{name}.json").write_text(json.dumps(model.config(), indent=1))
        (folder / f"{name}-quality.json").write_text(json.dumps(report, indent=1))
        echo(f"wrote {folder / name}.safetensors, .json and -quality.json")
    return model, report


def weights_bytes(model: Captioner) -> bytes:
    return save_safetensors({k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()})


# The training options a queued job may carry (`proctor train a3ds-captioner --agent-id`): the
# keywords of run_training but where it runs, where files go and the callbacks.
JOB_OPTIONS = job_options(run_training, TRAINING)


def run_train_job(session, job, progress) -> dict:
    """The job `a3ds.train`: train as the command does (params: agent_id, and optionally any of
    JOB_OPTIONS and device) and upload the captioner as a new version of the
    agent's model (validated by `a3ds.validate`, like any upload)."""
    return train_and_upload(
        session,
        job,
        progress,
        role="captioner",
        noun="captioner",
        default_epochs=TRAINING["epochs"],
        options=JOB_OPTIONS,
        train=lambda options, device, echo, epoch_done: run_training(
            **options, device=device, echo=echo, epoch_done=epoch_done, bars=False
        ),
        weights_bytes=weights_bytes,
    )
