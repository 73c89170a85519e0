"""Prior human annotations (issue 9): people's results from an earlier study load into a study as
the work of external annotators, marked as imported, scored by the same code as the study's own
workers, shown on the same leaderboard, and left out of the study's progress."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import func, select

from app.auth.models import IMPORTED_PLATFORM, User
from app.kinds.navigation.environments import import_connectivity
from app.leaderboards.service import compute
from app.studies import assignment, services
from app.studies.imports import import_annotations
from app.studies.models import Annotation, Item, Participant
from tests.conftest import ROOT, create_tom_study, login, make_user

DATA = ROOT.parent / "shared" / "data" / "r2r"
CONN = DATA / "connectivity"
R2R = DATA / "R2R_val_seen.json"
METRICS = ("ne", "success", "spl", "ndtw", "sdtw", "path_length")


def _nav_score(references: Path, predictions: Path) -> dict:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "app.cli",
            "nav",
            "score",
            "--connectivity",
            str(CONN),
            "--references",
            str(references),
            "--predictions",
            str(predictions),
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=dict(os.environ),
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.skipif(not (CONN.is_dir() and R2R.exists()), reason=f"R2R data not found under {DATA}")
def test_imported_follower_paths_score_exactly_as_proctor_nav_score(session, client, tmp_path):
    """Real R2R val_seen paths on their Matterport3D buildings: two followers' paths, imported
    in the R2R predictions format with a worker id, give per follower exactly the metrics
    `proctor nav score` gives for the same paths."""
    paths = json.loads(R2R.read_text())[:5]
    for scan in sorted({p["scan"] for p in paths}):
        import_connectivity(session, CONN / f"{scan}_connectivity.json")
    refs = tmp_path / "refs.json"
    refs.write_text(json.dumps(paths))
    owner = make_user(session, "researcher")
    study = services.create_study(
        session, owner, "navigation", services.StudySettings(title="Prior"), refs.read_bytes(), "r2r"
    )
    # alice walks every reference path of the first three paths; bob stops one viewpoint short
    # on every instruction he follows, and takes the reference on the last one.
    follows = {
        "alice": {f"{p['path_id']}_{k}": p["path"] for p in paths[:3] for k in range(3)},
        "bob": {f"{p['path_id']}_{k}": p["path"][:-1] if k < 2 else p["path"] for p in paths for k in range(3)},
    }
    records = [
        {"instr_id": i, "trajectory": [[v, 0.0, 0.0] for v in path], "worker_id": who}
        for who, mine in follows.items()
        for i, path in mine.items()
    ]
    progress_before = assignment.progress(session, study)
    done = import_annotations(session, study, owner, json.dumps(records).encode(), "r2r-followers")
    assert done == {"annotators": 2, "annotations": 24, "source": "r2r-followers"}

    for who, mine in follows.items():
        pred = tmp_path / f"{who}.json"
        pred.write_text(
            json.dumps([{"instr_id": i, "trajectory": [[v, 0.0, 0.0] for v in path]} for i, path in mine.items()])
        )
        expected = _nav_score(refs, pred)
        worker = session.scalar(
            select(User).where(
                User.platform == IMPORTED_PLATFORM, User.external_id == f"{study.id}:r2r-followers:{who}"
            )
        )
        got = dict(
            session.execute(
                select(Item.external_id, Annotation.scores)
                .join(Item, Item.id == Annotation.item_id)
                .where(Annotation.worker_id == worker.id)
            ).all()
        )
        assert set(got) == set(mine) == set(expected["per_instruction"])
        for instr, metrics in expected["per_instruction"].items():
            for key in METRICS:
                assert got[instr][key] == pytest.approx(metrics[key], rel=1e-9, abs=1e-12), (who, instr, key)
        for key in METRICS:
            mean = sum(float(got[i][key]) for i in got) / len(got)
            assert mean == pytest.approx(expected["mean"][key], rel=1e-9, abs=1e-12), (who, key)

    # On the leaderboard beside the study's own workers, marked as imported; not progress.
    board = compute(session, study)
    imported = sorted(
        (r["name"], r["answered"])
        for r in board["rows"]
        if r["type"] == "annotator" and r["name"].endswith(" (imported)")
    )
    assert sorted(n for _, n in imported) == sorted(len(m) for m in follows.values())
    assert assignment.progress(session, study) == progress_before
    # The navigation page leads with the followers' metrics per speaker (no per-annotator
    # table: its columns only repeat SR); the imported follows count there like any other.
    section = {t["key"]: t for t in board["extra"]["tables"]}["navigation_metrics"]
    assert sum(r["n"] for r in section["rows"]) == session.scalar(
        select(func.count())
        .select_from(Annotation)
        .where(Annotation.study_id == study.id, Annotation.is_gold.is_(False))
    )
    login(client, owner)
    page = client.get(f"/studies/{study.id}/leaderboard").text
    assert 'id="navigation_metrics"' in page and " (imported)" not in page
    # Imported work takes none of the crowd's quota.
    assert session.scalar(select(func.sum(Item.n_active)).where(Item.study_id == study.id)) == 0


def _prior_tom(ids: list[str], answers: dict[str, list[str]]) -> bytes:
    return "".join(
        json.dumps({"question_id": q, "answer": a, "annotator": who}) + "\n"
        for who, given in answers.items()
        for q, a in zip(ids, given)
    ).encode()


def test_imported_tom_answers_are_scored_and_ranked_like_the_studys_own(session, client):
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, title="Prior ToM", gold_rate=0.0)
    rows = session.execute(
        select(Item.external_id, Item.reference, Item.is_gold).where(Item.study_id == study.id).order_by(Item.id)
    ).all()
    ids = [r.external_id for r in rows if not r.is_gold][:10]
    right = {r.external_id: r.reference["answer"] for r in rows}
    flip = {"Yes": "No", "No": "Yes"}
    # ann-1 is right on all ten; ann-2 on the first four only.
    answers = {
        "ann-1": [right[q] for q in ids],
        "ann-2": [right[q] if k < 4 else flip[right[q]] for k, q in enumerate(ids)],
    }
    csrf = login(client, owner)
    r = client.post(
        f"/api/v1/studies/{study.id}/annotations/import",
        headers={"X-CSRF-Token": csrf},
        data={"source": "earlier-run"},
        files={"file": ("p.jsonl", _prior_tom(ids, answers))},
    )
    assert r.status_code == 201, r.text
    assert r.json() == {"annotators": 2, "annotations": 20, "source": "earlier-run"}
    board = compute(session, study)
    rows_by_acc = sorted(
        (r["accuracy"]["mean"], r["answered"])
        for r in board["rows"]
        if r["type"] == "annotator" and r["name"].endswith(" (imported)")
    )
    assert rows_by_acc == [(0.4, 10), (1.0, 10)]
    statuses = session.scalars(
        select(Participant.status)
        .join(User, User.id == Participant.worker_id)
        .where(User.platform == IMPORTED_PLATFORM)
    ).all()
    assert statuses == ["approved", "approved"]
    # The page's form does the same, and says what it stored.
    page = client.get(f"/studies/{study.id}")
    assert 'action="/studies/%d/annotations/import"' % study.id in page.text
    again = client.post(
        f"/studies/{study.id}/annotations/import",
        data={"csrf_token": csrf, "source": "second-run"},
        files={"file": ("p.jsonl", _prior_tom(ids[:2], {"ann-3": ["Yes", "No"]}))},
        follow_redirects=True,
    )
    assert "Imported 2 annotations by 1 annotators from second-run." in again.text


def test_bad_prior_annotations_are_refused_by_line_and_field_and_nothing_is_stored(session, client):
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, title="Prior bad", gold_rate=0.0)
    ids = session.scalars(select(Item.external_id).where(Item.study_id == study.id).limit(3)).all()
    csrf = login(client, owner)

    def post(data: bytes, source: str = "s"):
        return client.post(
            f"/api/v1/studies/{study.id}/annotations/import",
            headers={"X-CSRF-Token": csrf},
            data={"source": source},
            files={"file": ("p.jsonl", data)},
        )

    good = json.dumps({"question_id": ids[0], "answer": "Yes", "annotator": "a"}) + "\n"
    cases = [
        (good + json.dumps({"question_id": ids[1], "answer": "Yes"}) + "\n", 2, "annotator"),
        (good + json.dumps({"question_id": "nope", "answer": "Yes", "annotator": "a"}) + "\n", 2, "question_id"),
        (good + json.dumps({"question_id": ids[1], "answer": "Maybe", "annotator": "a"}) + "\n", 2, "answer"),
        (good + good, 2, "question_id"),  # one annotator, one question, twice
        (good + json.dumps({"question_id": ids[1], "answer": "No", "annotator": ""}) + "\n", 2, "annotator"),
    ]
    for text, line, field in cases:
        r = post(text.encode())
        assert r.status_code == 422, text
        assert (r.json()["line"], r.json()["field"]) == (line, field), r.json()
    assert session.scalar(select(func.count()).select_from(User).where(User.platform == IMPORTED_PLATFORM)) == 0
    assert post(good.encode()).status_code == 201
    twice = post(good.encode())
    assert twice.status_code == 422 and twice.json()["field"] == "annotator"
    assert "already imported" in twice.json()["detail"]
    assert post(good.encode(), source="bad:source").json()["field"] == "source"
    assert session.scalar(select(func.count()).select_from(Annotation).where(Annotation.study_id == study.id)) == 1


def test_a_kind_without_an_importer_says_so(session, client):
    from tests.integration.test_example_kind import make_study

    owner = make_user(session, "researcher")
    study = make_study(session, owner)
    csrf = login(client, owner)
    r = client.post(
        f"/api/v1/studies/{study.id}/annotations/import",
        headers={"X-CSRF-Token": csrf},
        data={"source": "x"},
        files={"file": ("p.jsonl", b'{"id": "a"}\n')},
    )
    assert r.status_code == 422 and "do not import earlier annotations" in r.json()["detail"]
    assert 'id="prior"' not in client.get(f"/studies/{study.id}").text
