"""The job `a3ds.generate`: a captioner's caption of every pair of a study, each added as an
item named by the captioner (app/kinds/a3ds/generation.py starts it); with `listener` in its
params, a model listener's picks instead (workers/a3ds/listen.py).

The job's study; params: captioner (the items' name for it), and speaker (a built-in one) or
artifact_id (a valid captioner model), batch_size (pairs per forward pass and per transaction).

Pairs go in chunks, each chunk's items committed in one transaction under external ids made of
the captioner and the pair, so a worker killed mid-job and run again skips what is stored and
duplicates nothing. Between chunks the job's state is read: "cancelled" stops it (what is
stored stays).
"""

from __future__ import annotations

from contextlib import nullcontext

from sqlalchemy import select
from sqlalchemy.orm import Session

from app import jobs
from app.agents.models import AgentArtifact
from app.kinds import get_kind
from app.kinds.a3ds.captions import parse
from app.kinds.a3ds.formats import MAX_CAPTION
from app.kinds.a3ds.generation import item_prefix, study_pairs
from app.kinds.a3ds.metrics import score_mentions
from app.kinds.a3ds.scenes import Pair
from app.kinds.a3ds.speakers import speak
from app.studies.models import Item, Study
from app.studies.services import add_items
from workers.runs import Chunks, model_on


def _captions(model, speaker, pairs, batch_size, device, seed) -> list[str]:
    if speaker is not None:
        return [speak(speaker, Pair(t, d), seed) for t, d, _ in pairs]
    from workers.a3ds.captioner import caption_pairs

    return caption_pairs(model, [(t, d) for t, d, _ in pairs], batch_size, device)


def run_generation(session: Session, job: jobs.Job, progress: jobs.Progress) -> dict:
    p = dict(job.params)
    if p.get("listener"):  # a model listener's picks, not captions (workers/a3ds/listen.py)
        from workers.a3ds.listen import run_listening

        return run_listening(session, job, progress)
    study = session.get(Study, job.study_id) if job.study_id else None
    if study is None:
        return {"skipped": "the study was deleted"}
    captioner, speaker, batch_size = p["captioner"], p.get("speaker"), int(p["batch_size"])
    artifact = None
    if speaker is None:
        artifact = session.get(AgentArtifact, p["artifact_id"])
        if artifact is None:
            return {"skipped": "the artifact was deleted"}
    kind = get_kind(study.kind)
    settings = study.kind_settings or {}
    seed, cant_tell = int(settings.get("seed", 0)), bool(settings.get("cant_tell", True))
    prefix = item_prefix(p)
    pairs = study_pairs(session, study)
    stored = set(
        session.scalars(
            select(Item.external_id).where(
                Item.study_id == study.id, Item.external_id.startswith(prefix, autoescape=True)
            )
        )
    )
    todo = [x for x in pairs if f"{prefix}{x[0]}-{x[1]}" not in stored]
    loaded = nullcontext((None, "cpu"))  # a built-in speaker: no torch
    if artifact is not None:
        from workers.a3ds.captioner import load_artifact

        loaded = model_on(session, artifact, load_artifact)
    with loaded as (model, device):
        chunks = Chunks(todo, batch_size, progress, len(pairs) - len(todo), len(pairs), "pairs")
        progress(
            chunks.done,
            len(pairs),
            f"captioner {captioner!r} on {len(pairs)} pairs ({chunks.done} stored), batch {batch_size}, {device}",
        )
        for part in chunks:
            specs = []
            for (t, d, design), caption in zip(part, _captions(model, speaker, part, batch_size, device, seed)):
                if not caption.strip() or len(caption) > MAX_CAPTION:  # as an imported caption would be
                    raise ValueError(
                        f"the captioner's caption of pair {t}-{d} is "
                        f"{'empty' if not caption.strip() else f'over {MAX_CAPTION} characters'}"
                    )
                pair = Pair(t, d)
                metrics = score_mentions(pair, parse(caption, pair.target)).stored()
                specs.append(
                    kind._item(
                        f"{prefix}{t}-{d}", pair, caption, captioner, design, metrics, seed, cant_tell, gold=False
                    )
                )
            add_items(session, study, specs)
            session.commit()
    if chunks.cancelled:
        return {"items": chunks.done, "pairs": len(pairs), "cancelled": True}
    progress(chunks.done, None, f"done: {chunks.done} pairs captioned by {captioner!r}")
    return {"items": chunks.done, "pairs": len(pairs), "captioner": captioner}
