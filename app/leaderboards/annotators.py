"""Dawid-Skene labels beside the per-item majority, and each annotator's confusion matrix.

The people's categorical answers (the field a kind's `label_value()` names, by default its
`agreement_value()`: ToM's Yes/No `answer`, A3DS's pick `choice`, STS's `marker`; Hexagons has
no categorical answer: its verifiers execute boards) are aggregated by Dawid and Skene's EM
model (`crowdkit.aggregation.DawidSkene`): per item a label and its posterior, per annotator
an estimated confusion matrix (rows: the true label, columns: the label given). The majority
row stays the headline (docs/quality.md); this row beside it shows what the annotators'
measured errors change.

Only valid annotations count: gold items never (they check workers), a rejected worker's
annotations never (`excluded`), an answer without the field never (an STS play's actions).
An item with one answer is still labelled: its label is that answer read through its
annotator's estimated confusion matrix (an answer of an annotator who always flips is flipped
back), with the class priors.

The fit is deterministic (EM from the majority vote, at most N_ITER iterations, on a frame
sorted by item and worker). It runs in a background job (`TASK`, the "exports"
queue: app/jobs.py), never on a page or the crowd path: the leaderboard and the review page
read the last result, cached in the job's row and keyed by the study's count of valid
annotations and its last annotation id (`cache_key`), and show it with its age (or
"computing"). The job sweeper (every minute) starts a job for each study whose result is
missing or stale (`refresh`: at most one queued or running per study, at most one every
REFRESH_EVERY_S while answers keep coming).
"""

from __future__ import annotations

import math
from typing import Any
from datetime import datetime, timezone

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.auth.models import User
from app.kinds import get_kind
from app.leaderboards.models import WorkerCategoryTotal
from app.studies.models import Annotation, Item, Study

TASK = "dawid_skene"
# At most N_ITER EM iterations, stopping once the evidence lower bound per answer gains less
# than TOL (crowd-kit's defaults); no randomness anywhere: the same frame gives the same labels.
N_ITER = 100
TOL = 1e-5
NAME = "Dawid-Skene labels"


def fit(frame: Any) -> dict[str, Any]:
    """DawidSkene on a pandas DataFrame (task, worker, label): {"labels": task -> label,
    "posterior": task -> the label's posterior, "labels_order": the classes, "confusion":
    worker -> matrix (rows true label, columns given label, in labels_order), "priors"}."""
    from crowdkit.aggregation import DawidSkene

    frame = frame[["task", "worker", "label"]].sort_values(["task", "worker"], kind="stable").reset_index(drop=True)
    model = DawidSkene(n_iter=N_ITER, tol=TOL).fit(frame)
    labels: Any = model.labels_  # crowd-kit types them Optional: set by fit()
    probas: Any = model.probas_
    priors: Any = model.priors_
    classes = sorted(str(c) for c in probas.columns)
    errors: Any = model.errors_  # index (worker, given label), columns the true label: P(given | true)
    confusion = {}
    for worker in sorted(frame["worker"].unique().tolist()):
        rows = []
        for true in classes:
            rows.append(
                [
                    float(errors.loc[(worker, given), true]) if (worker, given) in errors.index else 0.0
                    for given in classes
                ]
            )
        confusion[worker] = rows
    return {
        "labels": {t: str(v) for t, v in labels.items()},
        "posterior": {t: float(probas.loc[t, labels[t]]) for t in labels.index},
        "labels_order": classes,
        "confusion": confusion,
        "priors": {str(k): float(v) for k, v in priors.items()},
    }


def cache_key(session: Session, study: Study) -> dict[str, int]:
    """What the cached result must match: the study's valid non-gold annotations, counted by
    the running totals (a rejected worker's drop out of them), and its last annotation id."""
    n = (
        session.scalar(
            select(func.coalesce(func.sum(WorkerCategoryTotal.n), 0)).where(WorkerCategoryTotal.study_id == study.id)
        )
        or 0
    )
    last = session.scalar(select(func.max(Annotation.id)).where(Annotation.study_id == study.id))
    return {"annotations": int(n), "last_id": int(last or 0)}


def dawid_skene(session: Session, study: Study) -> dict[str, Any] | None:
    """The study's Dawid-Skene result (see the module's docstring); None for a kind without a
    categorical answer field (`label_value()`), or a study without valid answers in it."""
    import pandas as pd

    from app.leaderboards import rows as shared

    kind = get_kind(study.kind)
    field = kind.label_value()
    if not field:
        return None
    valid = (Annotation.study_id == study.id, Annotation.excluded.is_(False))
    rows = (
        session.connection()
        .execute(
            select(
                Annotation.id,
                Annotation.item_id,
                Annotation.worker_id,
                Annotation.response[field].as_string(),
                Annotation.score,
                Annotation.is_gold,
            )
            .where(*valid)
            .order_by(Annotation.id)
        )
        .all()
    )
    answers = [
        (aid, item, worker, label, score_)
        for aid, item, worker, label, score_, gold in rows
        if not gold and label is not None
    ]
    if not answers:
        return None
    frame = pd.DataFrame(
        [(item, worker, label) for _, item, worker, label, _ in answers], columns=["task", "worker", "label"]
    )
    ds = fit(frame)

    # Per item: each label's (count, score sum, first annotation id), as the majority row reads.
    per_item: dict[int, dict[str, tuple[int, float, int]]] = {}
    for aid, item, _, label, score_ in answers:
        n, total, first = per_item.setdefault(item, {}).get(label, (0, 0.0, aid))
        per_item[item][label] = (n + 1, total + float(score_ or 0.0), min(first, aid))
    where = {
        i: (cat, cluster, payload, ref)
        for i, cat, cluster, payload, ref in session.execute(
            select(Item.id, Item.category, Item.cluster, Item.payload, Item.reference).where(
                Item.study_id == study.id, Item.is_gold.is_(False)
            )
        )
    }

    def majority(values: dict[str, tuple[int, float, int]]) -> str:
        top = max(n for n, _, _ in values.values())
        return min((v for v in values.items() if v[1][0] == top), key=lambda v: v[1][2])[0]

    def score(item: int, label: str) -> float:
        """The label scored as the majority row scores its answer: the kind's score of the
        people who gave it; a label nobody gave on the item, by the kind's scorer."""
        if label in per_item[item]:
            n, total, _ = per_item[item][label]
            return total / n
        _, _, payload, ref = where[item]
        try:
            s = kind.score(payload, ref, {field: label})
        except Exception:  # a scorer that needs more than the field: the label is not credited
            s = None
        return float(s or 0.0)

    items = sorted(i for i in per_item if i in where)
    winners = [(where[i][0], where[i][1], score(i, ds["labels"][i])) for i in items]
    row = shared.majority_sums(iter(winners), shared.item_totals(session, study))
    row.update(type="dawid_skene", name=NAME)

    # Per annotator: answers, the confusion matrix, their gold record.
    gold: dict[int, list[float]] = {}
    for _, _, worker, _, score_, is_gold in rows:
        if is_gold:
            g = gold.setdefault(worker, [0, 0])
            g[0] += 1
            g[1] += (score_ or 0.0) >= 1.0
    counts = frame["worker"].value_counts().to_dict()
    names = dict(session.execute(select(User.id, User.pseudonym).where(User.id.in_(list(ds["confusion"])))).all())
    people = [
        {
            "worker_id": int(w),
            "name": names.get(w, str(w)),
            "answers": int(counts[w]),
            "confusion": [[round(x, 6) for x in r] for r in ds["confusion"][w]],
            "gold": (
                {"n": gold[w][0], "correct": int(gold[w][1]), "accuracy": gold[w][1] / gold[w][0]}
                if w in gold
                else None
            ),
        }
        for w in sorted(ds["confusion"], key=lambda w: (-counts[w], w))
    ]
    differs = sum(ds["labels"][i] != majority(per_item[i]) for i in items)
    return {
        "field": field,
        "labels": ds["labels_order"],
        "row": row,
        "annotations": len(answers),
        "items": len(items),
        "single_answer_items": sum(sum(n for n, _, _ in per_item[i].values()) == 1 for i in items),
        "differs_from_majority": differs,
        "mean_posterior": (sum(ds["posterior"][i] for i in items) / len(items)) if items else None,
        "priors": ds["priors"],
        "annotators": people,
        "item_labels": {int(i): {"label": ds["labels"][i], "posterior": ds["posterior"][i]} for i in items},
    }


# The cached result keeps per-item labels only for studies up to this many items (a job row is
# read by every page view); `dawid_skene` itself always returns them.
CACHED_ITEM_LABELS = 5000


def run_job(session: Session, job: Any, progress: Any) -> dict[str, Any]:
    """The background job (app/jobs.py: TASK): fit, and keep the result in the job's row."""
    study = session.get(Study, job.study_id)
    assert study is not None  # a study's jobs go with it (ON DELETE CASCADE)
    key = cache_key(session, study)
    progress(0, 1, f"Dawid-Skene over {key['annotations']} annotations")
    result = dawid_skene(session, study) or {}
    if len(result.get("item_labels", {})) > CACHED_ITEM_LABELS:
        result["item_labels"] = None
    progress(1, 1)
    return {"key": key, "result": _json_safe(result)}


def _json_safe(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    if isinstance(x, float) and math.isnan(x):
        return None
    return x


def cached(session: Session, study: Study) -> dict[str, Any] | None:
    """What a page shows (it starts nothing: `refresh` does): {"state", "fresh", "pending",
    "key", "computed_at", "age_s", "computed_for"?, "result"?}.

    state: "done" (a result for the study as it is now), "stale" (a result for fewer or other
    annotations; the next `refresh` recomputes it), "computing" (none yet); None for a kind
    without a categorical answer, a study without valid annotations, or one whose last fit
    found none with the field (an STS play study: its answers are actions, not markers)."""
    out = _status(session, study)
    if out is not None and "result" in out and not out["result"]:
        return None
    return out


def _status(session: Session, study: Study) -> dict[str, Any] | None:
    """cached(), with a last result that found nothing to label kept as an empty "result"
    (so `refresh` refits it, at most every REFRESH_EVERY_S, once answers come)."""
    from app import jobs

    kind = get_kind(study.kind)
    if not kind.label_value():
        return None
    key = cache_key(session, study)
    if not key["annotations"]:
        return None
    recent = session.execute(
        select(jobs.Job.id, jobs.Job.state, jobs.Job.result, jobs.Job.finished_at)
        .where(jobs.Job.task == TASK, jobs.Job.study_id == study.id)
        .order_by(jobs.Job.id.desc())
        .limit(20)
    ).all()
    done = next((j for j in recent if j.state == "done" and isinstance((j.result or {}).get("result"), dict)), None)
    fresh = done is not None and done.result.get("key") == key
    out = {
        "state": "done" if fresh else "stale" if done else "computing",
        "fresh": fresh,
        "pending": any(j.state in ("queued", "running") for j in recent),
        "key": key,
        "computed_at": None,
        "age_s": None,
    }
    if done is not None:
        finished = done.finished_at
        if finished.tzinfo is None:
            finished = finished.replace(tzinfo=timezone.utc)
        out.update(
            computed_at=finished.isoformat(),
            result=done.result["result"],
            age_s=max(0.0, (datetime.now(timezone.utc) - finished).total_seconds()),
            computed_for=done.result.get("key"),
        )
    return out


# A study whose answers keep coming is refitted at most this often (the page shows the last
# result's age meanwhile).
REFRESH_EVERY_S = 300


def refresh(min_interval_s: float = REFRESH_EVERY_S) -> list[int]:
    """Start a Dawid-Skene job for each study whose cached result is missing or stale, none
    queued or running, and whose last result is older than `min_interval_s`; the ids of the
    studies started. Run by the job sweeper every minute (the in-process worker's loop,
    Celery beat's sweep task: app/jobs.py, workers/tasks.py), never by a page."""
    from app import jobs
    from app.db import get_sessionmaker
    from app.kinds import all_kinds

    started = []
    installed = all_kinds()
    with get_sessionmaker()() as s:
        answered = (
            select(WorkerCategoryTotal.study_id)
            .where(WorkerCategoryTotal.study_id == Study.id, WorkerCategoryTotal.n > 0)
            .exists()
        )
        for study in s.scalars(select(Study).where(answered).order_by(Study.id)).all():
            if study.kind not in installed:
                continue
            status = _status(s, study)
            if status is None or status["fresh"] or status["pending"]:
                continue
            if status["age_s"] is not None and status["age_s"] < min_interval_s:
                continue
            try:
                jobs.submit(s, jobs.create_job(s, TASK, study_id=study.id))
            except jobs.BrokerUnavailable:
                break  # the sweeper tries again in a minute
            started.append(study.id)
    return started


def board_entry(session: Session, study: Study, rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """For compute(): the cached row put beside the majority row in `rows` (after it), and
    the status without the per-item and per-annotator detail (the review page shows those)."""
    status = cached(session, study)
    if status is None:
        return None
    result = status.pop("result", None) or {}
    row = result.get("row")
    if row:
        at = next((i + 1 for i, r in enumerate(rows) if r.get("type") == "majority"), len(rows))
        rows.insert(at, row)
    status.update(
        {
            k: result.get(k)
            for k in (
                "labels",
                "annotations",
                "items",
                "single_answer_items",
                "differs_from_majority",
                "mean_posterior",
            )
        }
    )
    return status
