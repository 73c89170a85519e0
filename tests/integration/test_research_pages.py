"""A researcher's pages through the real app: generate a battery from dialogues with a
preview, import agent answers, export in a background job and download the files."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from sqlalchemy import func, select

from app import jobs
from app.kinds.tom.demo import simulate_worker
from app.auth.models import User
from app.studies.models import Annotation, Item, Study
from tests.conftest import login, make_user

ROOT = Path(__file__).resolve().parents[2]
DIALOGUES = ROOT / "app" / "kinds" / "tom" / "demo_data" / "dialogues.jsonl"


def test_generate_preview_create_import_export(client, session):
    researcher = make_user(session, "researcher")
    csrf = login(client, researcher)
    data = DIALOGUES.read_bytes()
    form = {
        "csrf_token": csrf,
        "title": "Generated",
        "kind": "tom",
        "format": "cg",
        "annotations_per_item": "2",
        "bundle_size": "5",
        "gold_rate": "0.2",
        "lease_seconds": "600",
        "action": "preview",
    }
    r = client.post("/studies/new", data=form, files={"file": ("d.jsonl", data)})
    assert r.status_code == 200
    assert 'id="preview"' in r.text
    n = int(re.search(r"<p>(\d+) questions \(", r.text).group(1))
    assert n % 18 == 0 and n > 100
    assert session.scalar(select(func.count()).select_from(Study)) == 0  # preview stores nothing
    token = re.search(r'name="upload_token" value="([0-9a-f]+)"', r.text).group(1)
    r = client.post("/studies/new", data={**form, "action": "create", "upload_token": token}, follow_redirects=False)
    assert r.status_code == 303
    study = session.scalar(select(Study))
    assert session.scalar(select(func.count()).select_from(Item).where(Item.study_id == study.id)) == n

    r = client.post(f"/studies/{study.id}/state", data={"csrf_token": csrf, "state": "live"}, follow_redirects=False)
    assert r.status_code == 303
    session.refresh(study)
    assert study.state == "live"

    answers = "\n".join(
        json.dumps({"question_id": e, "answer": "Yes"})
        for e in session.scalars(select(Item.external_id).where(Item.study_id == study.id))
    )
    r = client.post(
        f"/studies/{study.id}/agents",
        data={"csrf_token": csrf, "name": "yes-man"},
        files={"file": ("a.jsonl", answers.encode())},
        follow_redirects=True,
    )
    assert "Imported" in r.text and "yes-man" in r.text
    for w in range(3):
        simulate_worker(session, study, f"ext-worker-{w}", 0.8, seed=w)

    board = client.get(f"/studies/{study.id}/leaderboard")
    assert board.status_code == 200 and "<svg" in board.text
    # The agent answered Yes everywhere: its accuracy is the share of Yes among the scored
    # (non-gold) items, every one of them answered.
    refs = session.scalars(select(Item.reference).where(Item.study_id == study.id, Item.is_gold.is_(False))).all()
    yes = sum(x["answer"] == "Yes" for x in refs)
    row = re.search(
        r'<tr class="agent"><td>yes-man v1</td><td>agent</td><td>(\d+)</td>'
        r'<td><span title="[^"]*">([0-9.]+) <span class="muted">',
        board.text,
    )
    assert row is not None, board.text
    assert (int(row.group(1)), row.group(2)) == (len(refs), f"{yes / len(refs):.3f}")

    r = client.post(f"/studies/{study.id}/exports", data={"csrf_token": csrf}, follow_redirects=False)
    assert r.status_code == 303
    assert jobs.run_queued_once() == 1  # what the in-process worker thread does
    page = client.get(f"/studies/{study.id}/exports").text
    n_annotations = session.scalar(select(func.count()).select_from(Annotation).where(Annotation.study_id == study.id))
    assert f"{n_annotations} of {n_annotations} annotations" in page  # counted in units
    links = dict((name, href) for href, name in re.findall(r'<a href="([^"]+)">([\w.]+)</a>', page))
    assert {"annotations.jsonl", "annotations.csv", "scores.csv", "scores.json"} <= set(links)
    body = client.get(links["annotations.jsonl"].replace("&amp;", "&"))
    assert body.status_code == 200
    rows = [json.loads(line) for line in body.text.splitlines()]
    # Exactly the stored annotations, in id order, each with its item, response and the
    # worker's pseudonym.
    stored = session.execute(
        select(Annotation, Item.external_id, User.pseudonym)
        .join(Item, Item.id == Annotation.item_id)
        .join(User, User.id == Annotation.worker_id)
        .where(Annotation.study_id == study.id)
        .order_by(Annotation.id)
    ).all()
    assert len(stored) == session.scalar(select(func.count()).select_from(Annotation)) > 0
    assert len(rows) == len(stored)
    for got, (a, ext, pseud) in zip(rows, stored):
        assert (got["annotation_id"], got["item"], got["response"], got["worker"]) == (a.id, ext, a.response, pseud)
        assert (got["is_gold"], got["score"], got["excluded"]) == (a.is_gold, a.score, a.excluded)
        assert pseud.startswith("w-")
    assert "ext-worker" not in body.text  # raw platform ids never leave the database
    assert client.get(links["scores.csv"].replace("&amp;", "&").replace("sig=", "sig=0")).status_code == 403


def test_api_study_with_training_split_rate_and_gold_count(client, session, tom_csv):
    from app.auth.security import create_token
    from app.leaderboards.service import compute

    researcher = make_user(session, "researcher")
    token = create_token(session, researcher)
    session.commit()
    auth = {"Authorization": f"Bearer {token}"}
    r = client.post(
        "/api/v1/studies",
        headers=auth,
        files={"file": ("q.csv", tom_csv)},
        data={"settings": json.dumps({"title": "API"}), "random_yes_rate": "0.3", "gold_count": "4"},
    )
    assert r.status_code == 201, r.text
    study = session.get(Study, r.json()["id"])
    assert study.kind_settings["random_yes_rate"] == 0.3
    assert (
        session.scalar(select(func.count()).select_from(Item).where(Item.study_id == study.id, Item.is_gold.is_(True)))
        == 4
    )
    base = next(row for row in compute(session, study)["rows"] if row["type"] == "baseline")
    assert base["name"] == "Random baseline (Yes rate 0.30, given at study creation)"
    # Expected accuracy of answering Yes with p=0.3: 0.3 on Yes items, 0.7 on No items.
    refs = session.scalars(select(Item.reference).where(Item.study_id == study.id, Item.is_gold.is_(False))).all()
    expect = sum(0.3 if x["answer"] == "Yes" else 0.7 for x in refs) / len(refs)
    assert base["accuracy"]["mean"] == pytest.approx(expect)
    bad = client.post(
        "/api/v1/studies",
        headers=auth,
        files={"file": ("q.csv", tom_csv)},
        data={"settings": json.dumps({"title": "API"}), "random_yes_rate": "1.5"},
    )
    assert bad.status_code == 422 and bad.json()["field"] == "random_yes_rate"  # the name sent


def _every_field(html: str) -> dict:
    """What a browser without JavaScript sends from the new-study form: every kind's fieldset,
    each field at its default (blank here; a select's first option is blank too)."""
    start = html.index('id="new-study"')
    form = html[start : html.index("</form>", start)]
    return {
        name: "" for name in re.findall(r'<(?:input|select|textarea)\b[^>]*\bname="([^"]+)"', form) if name != "file"
    }


def test_without_javascript_a_study_takes_only_its_own_kinds_options(client, session, tom_csv):
    """Kinds share option names (gold_count) and a page without JavaScript sends every kind's
    fieldset: another kind's field, even a bad value in it, does not reach the study."""
    researcher = make_user(session, "researcher")
    csrf = login(client, researcher)
    fields = _every_field(client.get("/studies/new").text)
    gold = [name for name in fields if name.rsplit(".", 1)[-1] == "gold_count"]
    assert {"a3ds.gold_count", "tom.gold_count"} <= set(gold), gold
    others = {name: "many" for name in gold}
    design = json.dumps({"pairs": {"z": {"1": 2, "2": 1}}, "speakers": ["literal"], "seed": 2}).encode()
    r = client.post(
        "/studies/new",
        files={"file": ("design.json", design)},
        data={
            **fields,
            **others,
            "a3ds.gold_count": "",
            "csrf_token": csrf,
            "title": "A3DS",
            "kind": "a3ds",
            "format": "design",
            "action": "create",
        },
        follow_redirects=False,
    )
    assert r.status_code == 303, r.text[-800:]
    r = client.post(
        "/studies/new",
        files={"file": ("q.csv", tom_csv)},
        data={
            **fields,
            **others,
            "tom.gold_count": "3",
            "csrf_token": csrf,
            "title": "ToM",
            "kind": "tom",
            "format": "csv",
            "action": "create",
        },
        follow_redirects=False,
    )
    assert r.status_code == 303, r.text[-800:]
    study = session.scalar(select(Study).where(Study.title == "ToM"))
    assert (
        session.scalar(select(func.count()).select_from(Item).where(Item.study_id == study.id, Item.is_gold.is_(True)))
        == 3
    )
    # The chosen kind's own bad value is refused under the name the form sent (the form's
    # check or the importer's), and a typed one is kept.
    for name, value in (("tom.gold_count", "-1"), ("tom.random_yes_rate", "1.5"), ("tom.random_yes_split", "dev")):
        r = client.post(
            "/studies/new",
            files={"file": ("q.csv", tom_csv)},
            data={
                **fields,
                name: value,
                "csrf_token": csrf,
                "title": "Bad",
                "kind": "tom",
                "format": "csv",
                "action": "create",
            },
        )
        assert r.status_code == 422 and f"field &#39;{name}&#39;" in r.text, r.text[-800:]
        if not name.endswith("split"):  # a select keeps only its own options
            assert re.search(rf'name="{re.escape(name)}"[^>]*value="{re.escape(value)}"', r.text)
    assert session.scalar(select(func.count()).select_from(Study).where(Study.title == "Bad")) == 0
