"""Export job: annotations and scores as JSONL and CSV, worker ids pseudonymised."""

from __future__ import annotations

import csv
import io
import json

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.auth.models import User
from app.leaderboards.service import compute
from app.storage import get_store
from app.studies.models import Annotation, Item, Participant, Study

ANNOTATION_FIELDS = ["annotation_id", "item", "worker", "worker_status", "is_gold", "category",
                     "response", "score", "excluded", "duration_ms", "created_at"]


def _annotation_rows(session: Session, study: Study, batch: int = 5000):
    q = (select(Annotation, Item.external_id, Item.category, User.pseudonym, Participant.status)
         .join(Item, Item.id == Annotation.item_id)
         .join(User, User.id == Annotation.worker_id)
         .join(Participant, (Participant.worker_id == Annotation.worker_id)
               & (Participant.study_id == study.id))
         .where(Annotation.study_id == study.id).order_by(Annotation.id)
         .execution_options(yield_per=batch))
    for a, ext, cat, pseud, status in session.execute(q):
        yield {"annotation_id": a.id, "item": ext, "worker": pseud, "worker_status": status,
               "is_gold": a.is_gold, "category": cat, "response": a.response, "score": a.score,
               "excluded": a.excluded, "duration_ms": a.duration_ms,
               "created_at": a.created_at.isoformat()}


def run_export(session: Session, job, progress) -> dict:
    study = session.get(Study, job.study_id)
    total = session.scalar(select(func.count()).select_from(Annotation)
                           .where(Annotation.study_id == study.id))
    progress(0, total + 1, f"exporting {total} annotations of {study.slug}")
    jsonl, rows_csv = io.StringIO(), io.StringIO()
    writer = csv.DictWriter(rows_csv, fieldnames=ANNOTATION_FIELDS)
    writer.writeheader()
    for n, row in enumerate(_annotation_rows(session, study), 1):
        jsonl.write(json.dumps(row, ensure_ascii=False) + "\n")
        writer.writerow({**row, "response": json.dumps(row["response"], ensure_ascii=False)})
        if n % 5000 == 0:
            progress(n)
    board = compute(session, study)
    scores_csv = io.StringIO()
    w = csv.writer(scores_csv)
    w.writerow(["type", "name", "metric", "category", "n", "mean", "low", "high"])
    for r in board["rows"]:
        w.writerow([r["type"], r["name"], "accuracy", "all", *_flat(r["accuracy"])])
        for cat, est in sorted(r["by_category"].items()):
            w.writerow([r["type"], r["name"], "accuracy", cat, *_flat(est)])
        if r.get("consistency"):
            w.writerow([r["type"], r["name"], "consistency", "all", *_flat(r["consistency"])])
    prefix = f"exports/{study.slug}/{job.id}"
    store = get_store()
    files = {
        "annotations.jsonl": jsonl.getvalue(), "annotations.csv": rows_csv.getvalue(),
        "scores.json": json.dumps(board, indent=1, default=str), "scores.csv": scores_csv.getvalue(),
    }
    for name, text in files.items():
        store.put(f"{prefix}/{name}", text.encode("utf-8"))
    progress(total + 1, message="done")
    return {"files": {name: f"{prefix}/{name}" for name in files}, "annotations": total}


def _flat(est: dict) -> list:
    return [est["n"], est["mean"], est["low"], est["high"]]
