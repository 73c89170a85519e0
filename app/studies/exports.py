"""Export job: annotations and scores as JSONL and CSV, worker ids pseudonymised."""

from __future__ import annotations

import csv
import io
import json
import tempfile
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING, Any, BinaryIO, cast

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from app.auth.models import IMPORTED_PLATFORM, User
from app.leaderboards.service import compute
from app.storage import get_store
from app.studies.models import Annotation, Assignment, Bundle, Item, Participant, Study

if TYPE_CHECKING:
    from app.jobs import Job, Progress

ANNOTATION_FIELDS = [
    "annotation_id",
    "item",
    "worker",
    "worker_status",
    "is_gold",
    "category",
    "response",
    "score",
    "excluded",
    "duration_ms",
    "created_at",
]


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def cell(value: object) -> object:
    """A CSV cell that a spreadsheet shows as text: a string it would run as a formula (an item
    id, a name or an answer from an upload starting with =, +, -, @) gets a leading quote. The
    JSONL file keeps every value exactly."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def _annotation_rows(session: Session, study: Study, batch: int = 5000) -> Iterator[dict[str, Any]]:
    q = (
        select(Annotation, Item.external_id, Item.category, User.pseudonym, Participant.status)
        .join(Item, Item.id == Annotation.item_id)
        .join(User, User.id == Annotation.worker_id)
        .join(Participant, (Participant.worker_id == Annotation.worker_id) & (Participant.study_id == study.id))
        .where(Annotation.study_id == study.id)
        .order_by(Annotation.id)
        .execution_options(yield_per=batch)
    )
    for a, ext, cat, pseud, status in session.execute(q):
        yield {
            "annotation_id": a.id,
            "item": ext,
            "worker": pseud,
            "worker_status": status,
            "is_gold": a.is_gold,
            "category": cat,
            "response": a.response,
            "score": a.score,
            "excluded": a.excluded,
            "duration_ms": a.duration_ms,
            "created_at": a.created_at.isoformat(),
        }


COMPLETION_FIELDS = [
    "platform",
    "platform_worker_id",
    "bundle",
    "platform_assignment_id",
    "hit",
    "completion_code",
    "done",
    "size",
    "gold_answered",
    "gold_right",
    "worker_status",
    "finished_at",
]


def _completion_rows(session: Session, study: Study) -> Iterator[dict[str, Any]]:
    """Who completed what, to approve or reject on the crowd platform: the platform's own
    worker id (what the platform pays), the bundle, the code that bundle was shown, how much of
    it was done and its gold (a bundle short of its required items was shown no code, and
    lists none). Imported annotators are not the crowd's: left out."""
    from app.studies.services import code_earned, completion_code

    gold = {
        b: (n, right)
        for b, n, right in session.execute(
            select(
                Assignment.bundle_id,
                func.count(Annotation.id),
                func.coalesce(func.sum(case((Annotation.score == 1.0, 1), else_=0)), 0),
            )
            .join(Annotation, Annotation.assignment_id == Assignment.id)
            .where(Assignment.study_id == study.id, Annotation.is_gold.is_(True))
            .group_by(Assignment.bundle_id)
        ).all()
    }
    q = (
        select(Bundle, User.platform, User.external_id, Participant.status)
        .join(User, User.id == Bundle.worker_id)
        .join(Participant, Participant.id == Bundle.participant_id)
        .where(Bundle.study_id == study.id, User.platform.is_distinct_from(IMPORTED_PLATFORM))
        .order_by(Bundle.id)
    )
    for bundle, platform, external_id, status in session.execute(q):
        answered, right = gold.get(bundle.id, (0, 0))
        yield {
            "platform": platform,
            "platform_worker_id": external_id,
            "bundle": bundle.id,
            "platform_assignment_id": bundle.external_assignment_id,
            "hit": bundle.hit_id,
            "completion_code": (completion_code(study, bundle, platform) if code_earned(bundle) else ""),
            "done": bundle.n_done,
            "size": bundle.size,
            "gold_answered": answered,
            "gold_right": int(right),
            "worker_status": status,
            "finished_at": bundle.finished_at.isoformat() if bundle.finished_at else "",
        }


def run_export(session: Session, job: Job, progress: Progress) -> dict[str, Any]:
    study = session.get(Study, job.study_id)
    assert study is not None  # an export's study (a study's jobs go with it: ON DELETE CASCADE)
    total = session.execute(
        select(func.count()).select_from(Annotation).where(Annotation.study_id == study.id)
    ).scalar_one()
    # Progress counts annotations (the page says "n of N annotations"); the files are written
    # once all are read, while the job still runs.
    progress(0, total, f"exporting {total} annotations of {study.slug}")
    # Spooled to disk past 8 MB: a million annotations never sit in memory at once.
    jsonl = tempfile.SpooledTemporaryFile(8 << 20, mode="w+", encoding="utf-8", newline="")
    rows_csv = tempfile.SpooledTemporaryFile(8 << 20, mode="w+", encoding="utf-8", newline="")
    writer = csv.DictWriter(rows_csv, fieldnames=ANNOTATION_FIELDS)
    writer.writeheader()
    for n, row in enumerate(_annotation_rows(session, study), 1):
        jsonl.write(json.dumps(row, ensure_ascii=False) + "\n")
        writer.writerow(
            {k: cell(v) for k, v in {**row, "response": json.dumps(row["response"], ensure_ascii=False)}.items()}
        )
        if n % 5000 == 0:
            progress(n)
            if progress.cancelled():
                return {"cancelled": True, "annotations": n}
    board = compute(session, study)
    scores_csv = io.StringIO()
    w = csv.writer(scores_csv)
    w.writerow(["type", "name", "metric", "category", "n", "mean", "low", "high", "method"])
    w.writerows([[cell(v) for v in row] for row in score_rows(board)])
    prefix = f"exports/{study.slug}/{job.id}"
    store = get_store()
    completions = io.StringIO()
    done = csv.DictWriter(completions, fieldnames=COMPLETION_FIELDS)
    done.writeheader()
    done.writerows({k: cell(v) for k, v in row.items()} for row in _completion_rows(session, study))
    files: dict[str, str | IO[str]] = {
        "annotations.jsonl": jsonl,
        "annotations.csv": rows_csv,
        "completions.csv": completions.getvalue(),
        "scores.json": json.dumps(board, indent=1, default=str),
        "scores.csv": scores_csv.getvalue(),
    }
    for name, content in files.items():
        if isinstance(content, str):
            store.put(f"{prefix}/{name}", content.encode("utf-8"))
        else:
            content.seek(0)
            # A binary file object, if not typeshed's (nominal) BinaryIO.
            store.put(f"{prefix}/{name}", cast(BinaryIO, _Utf8Reader(content)))
            content.close()
    progress(total, message="done")
    return {"files": {name: f"{prefix}/{name}" for name in files}, "annotations": total}


class _Utf8Reader(io.RawIOBase):
    """Bytes view of a text file, so the store can stream it."""

    def __init__(self, text_file: IO[str]):
        self._f, self._buf = text_file, b""

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:  # a writable buffer (bytearray, memoryview)
        while len(self._buf) < len(b):
            chunk = self._f.read(1 << 16)
            if not chunk:
                break
            self._buf += chunk.encode("utf-8")
        n = min(len(b), len(self._buf))
        b[:n], self._buf = self._buf[:n], self._buf[n:]
        return n


def score_rows(board: dict[str, Any]) -> Iterator[list[Any]]:
    """scores.csv's lines: the generic rows (type, name, accuracy or consistency, category),
    then every estimate of the kind's own tables (type: the table's key, name: the row's first
    cell, metric: the column's label), so the file holds every figure the page shows."""
    for r in board["rows"]:
        yield [r["type"], r["name"], "accuracy", "all", *_flat(r["accuracy"])]
        for cat, est in sorted(r["by_category"].items()):
            yield [r["type"], r["name"], "accuracy", cat, *_flat(est)]
        if r.get("consistency"):
            yield [r["type"], r["name"], "consistency", "all", *_flat(r["consistency"])]
    for t in (board.get("extra") or {}).get("tables", []):
        first = t["columns"][0]["key"]
        for row in t["rows"]:
            for c in t["columns"][1:]:
                v = row.get(c["key"])
                if isinstance(v, dict) and "mean" in v and "n" in v:
                    yield [t["key"], row.get(first), c["label"], "all", *_flat(v)]


def _flat(est: dict[str, Any]) -> list[Any]:
    return [est["n"], est["mean"], est.get("low"), est.get("high"), est.get("method", "")]
