"""A kind from its own package (tests/example_kind, installed by pip for the test run, found
through the `proctor.kinds` entry points) adds a table, a page, an API route, a command, a job,
templates, static files and a migration branch, with no line of the core naming it (issue 9)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import uuid
from importlib.metadata import entry_points

import pytest
from sqlalchemy import select

from app import jobs
from app.kinds import GROUP, KindError, all_kinds, get_kind
from app.studies import assignment, services
from app.studies.models import Item, Study
from tests.conftest import ROOT, TEST_KINDS, login, make_user

SENTENCES = {"a": "one two three", "b": "Proctor counts words here", "c": "hi"}


def items_jsonl() -> bytes:
    return "".join(json.dumps({"id": k, "sentence": v}) + "\n" for k, v in SENTENCES.items()).encode()


def make_study(session, owner, **settings) -> Study:
    study = services.create_study(
        session,
        owner,
        "wordcount",
        services.StudySettings(title="Counting", bundle_size=3, gold_rate=0.0, **settings),
        items_jsonl(),
        "jsonl",
    )
    services.set_state(session, study, "live", owner)
    return study


def answer_all(session, study, worker: str, right: bool) -> None:
    bundle = assignment.enter(session, study, "prolific", worker)
    while (a := assignment.next_item(session, study, bundle.id)) is not None:
        item = session.get(Item, a.item_id)
        words = item.reference["words"] + (0 if right else 1)
        assignment.submit(session, study, bundle.id, a.id, {"words": words}, uuid.uuid4().hex)


def run_cli(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        timeout=300,
    )


def test_the_example_kind_is_an_installed_package_found_by_its_entry_point():
    ep = next(e for e in entry_points(group=GROUP) if e.name == "wordcount")
    assert ep.dist.name == "proctor-wordcount" and ep.dist.version == "0.1.0"
    assert str(TEST_KINDS) in str(ep.dist.locate_file(""))
    # The built-in kinds register the same way, from Proctor's own metadata.
    ours = {e.name: e.value for e in entry_points(group=GROUP) if e.dist and e.dist.name == "proctor"}
    assert ours == {
        "tom": "app.kinds.tom:KIND",
        "navigation": "app.kinds.navigation:KIND",
        "sts": "app.kinds.sts:KIND",
        "hexagons": "app.kinds.hexagons:KIND",
        "a3ds": "app.kinds.a3ds:KIND",
    }
    assert list(all_kinds()) == ["tom", "navigation", "sts", "hexagons", "a3ds", "wordcount"]  # by position


def test_proctor_kinds_narrows_the_registry(monkeypatch):
    from app import kinds

    saved = dict(kinds._registry)
    try:
        kinds._registry.clear()
        monkeypatch.setenv("PROCTOR_KINDS", "wordcount")
        assert list(kinds.all_kinds()) == ["wordcount"]
        kinds._registry.clear()
        monkeypatch.setenv("PROCTOR_KINDS", "wordcount,nosuchkind")
        with pytest.raises(KindError, match="not installed: nosuchkind"):
            kinds.all_kinds()
    finally:
        kinds._registry.clear()
        kinds._registry.update(saved)


def test_a_study_of_the_example_kind_is_scored_by_its_own_rules(session):
    owner = make_user(session, "researcher")
    study = make_study(session, owner)
    answer_all(session, study, "right-1", right=True)
    answer_all(session, study, "wrong-1", right=False)
    from app.leaderboards.service import compute

    board = compute(session, study)
    annotators = sorted((r["answered"], r["accuracy"]["mean"]) for r in board["rows"] if r["type"] == "annotator")
    assert (board["kind"], board["items"]) == ("wordcount", 3)
    assert annotators == [(3, 0.0), (3, 1.0)]  # the exact count is right; one more is wrong


def test_the_kinds_job_page_api_and_static_files(app, client, session):
    from proctor_wordcount.models import Tally

    owner = make_user(session, "researcher")
    study = make_study(session, owner)
    answer_all(session, study, "w-right", right=True)
    answer_all(session, study, "w-wrong", right=False)
    csrf = login(client, owner)

    page = client.get(f"/wordcount/studies/{study.id}/tally")
    assert page.status_code == 200 and "No tally yet" in page.text

    r = client.post(f"/api/v1/wordcount/studies/{study.id}/tally", headers={"X-CSRF-Token": csrf})
    assert r.status_code == 202, r.text
    assert jobs.run_queued_once() == 1
    job = session.get(jobs.Job, r.json()["job"])
    session.refresh(job)
    assert (job.task, job.state, job.result) == ("wordcount.tally", "done", {"items": 3, "answers": 6})
    rows = session.scalars(select(Tally).where(Tally.study_id == study.id).order_by(Tally.item)).all()
    assert [(t.item, t.answers, t.right) for t in rows] == [("a", 2, 1), ("b", 2, 1), ("c", 2, 1)]

    page = client.get(f"/wordcount/studies/{study.id}/tally")
    assert page.status_code == 200
    assert page.text.count('<td class="wordcount-right">1</td>') == 3
    css = client.get("/static/kinds/wordcount/wordcount.css")
    assert css.status_code == 200 and ".wordcount-sentence" in css.text
    # The kind's page is for its own studies: another kind's study is not found there.
    other = services.create_study(
        session,
        owner,
        "tom",
        services.StudySettings(title="ToM"),
        (ROOT / "tests" / "fixtures" / "tom" / "questions.csv").read_bytes(),
        "csv",
    )
    assert client.get(f"/wordcount/studies/{other.id}/tally").status_code == 404
    # The study page offers the kind's own output format; the new-study form its formats.
    assert "Counts (JSONL: {&#34;id&#34;: ..., &#34;words&#34;: n})" in client.get(f"/studies/{study.id}").text
    assert "Word counting: sentences (JSONL {id, sentence})" in client.get("/studies/new").text


def test_the_example_kinds_model_runs_through_the_one_runs_api(client, session):
    """The example kind declares agent runs (a built-in counter as its tiny model): the core's
    runs API starts, lists and reads them, its page shows them, and the counts become an
    agent's outputs on the leaderboard, with no line of the core naming the kind."""
    owner = make_user(session, "researcher")
    study = make_study(session, owner)
    split = services.register_agent(session, owner, "wordcount", "split counter")
    spaces = services.register_agent(session, owner, "wordcount", "spaces counter")
    session.commit()
    csrf = login(client, owner)
    headers = {"X-CSRF-Token": csrf}
    for counter, agent in (("split", split), ("spaces", spaces)):
        r = client.post(
            f"/api/v1/studies/{study.id}/runs", json={"counter": counter, "agent_id": agent.id}, headers=headers
        )
        assert r.status_code == 202 and r.json()["noun"] == "counter run", r.text
    r = client.post(
        f"/api/v1/studies/{study.id}/runs", json={"counter": "guess", "agent_id": split.id}, headers=headers
    )
    assert r.status_code == 422 and r.json()["field"] == "counter"
    assert jobs.run_queued_once() == 2
    runs = client.get("/api/v1/runs", params={"study_id": study.id}).json()
    assert [(x["state"], x["detail"]["counter"], x["detail"]["outputs"]) for x in runs] == [
        ("done", "spaces", 3),
        ("done", "split", 3),
    ]
    page = client.get(f"/studies/{study.id}").text
    assert 'id="counter-runs"' in page and f'id="run-{runs[0]["id"]}"' in page and "3 of 3 sentences" in page
    # "Proctor counts words here" has 4 words and 3 spaces: both counters are right on all three.
    board = client.get(f"/api/v1/studies/{study.id}/leaderboard").json()
    rows = {r["name"]: r for r in board["rows"]}
    assert {"split counter v1", "spaces counter v1"} <= set(rows), board
    assert [
        (rows[n]["accuracy"]["mean"], rows[n]["accuracy"]["n"]) for n in ("split counter v1", "spaces counter v1")
    ] == [(1.0, 3), (1.0, 3)]


def test_bad_items_are_refused_by_line_and_field(client, session):
    owner = make_user(session, "researcher")
    csrf = login(client, owner)
    bad = b'{"id": "a", "sentence": "fine"}\n{"id": "b", "sentence": 7}\n'
    r = client.post(
        "/api/v1/studies",
        headers={"X-CSRF-Token": csrf},
        data={"kind": "wordcount", "settings": json.dumps({"title": "Bad"})},
        files={"file": ("s.jsonl", bad, "application/jsonl")},
    )
    assert r.status_code == 422
    assert r.json()["line"] == 2 and r.json()["field"] == "sentence"
    assert session.scalar(select(Study).where(Study.title == "Bad")) is None


def test_migrations_and_the_command_line_from_a_fresh_database(tmp_path):
    """`proctor migrate` runs the core's revisions and every kind's branch; `proctor kinds`
    lists what each kind adds; the kind's command runs its job and prints the tally."""
    env = {
        "DATABASE_URL": f"sqlite:///{tmp_path / 'p.db'}",
        "STORAGE_URL": f"file://{tmp_path / 'blobs'}",
        "REDIS_URL": "",
    }
    out = run_cli("migrate", env=env)
    assert out.returncode == 0, out.stderr
    con = sqlite3.connect(tmp_path / "p.db")
    heads = {r[0] for r in con.execute("SELECT version_num FROM alembic_version")}
    # nav and sts depend on 0016; the core's 0024 is a head of its own
    assert heads == {"0024", "hex0001", "nav0006", "sts0005", "tom0001", "wc0001"}
    columns = [r[1] for r in con.execute("PRAGMA table_info(wordcount_tallies)")]
    assert columns == ["id", "study_id", "item", "answers", "right", "computed_at"]
    con.close()

    listing = run_cli("kinds", env=env)
    assert listing.returncode == 0, listing.stderr
    block = listing.stdout.split("wordcount: ", 1)[1]
    assert block.startswith("Word counting (example kind) (proctor-wordcount 0.1.0)")
    assert "commands:   proctor wordcount" in block and "jobs:       wordcount.tally" in block
    assert "GET /wordcount/studies/{study_id}/tally" in block
    assert "POST /api/v1/wordcount/studies/{study_id}/tally" in block

    from app.db import get_engine, get_sessionmaker

    url = env["DATABASE_URL"]
    with get_sessionmaker(url)() as s:
        owner = make_user(s, "researcher")
        study = make_study(s, owner)
        answer_all(s, study, "cli-right", right=True)
        study_id = study.id
    get_engine(url).dispose()
    tally = run_cli("wordcount", "tally", str(study_id), env=env)
    assert tally.returncode == 0, tally.stderr
    assert tally.stdout.splitlines() == ["a\t1/1 right", "b\t1/1 right", "c\t1/1 right"]
    missing = run_cli("wordcount", "tally", "999", env=env)
    assert missing.returncode == 1 and "no word-counting study 999" in missing.stderr


def test_jobs_of_an_uninstalled_kind_fail_with_the_reason(session):
    """A queued job whose kind is gone (uninstalled since) ends failed, not running forever."""
    job = jobs.Job(task="hexagons.consolidate", params={})
    session.add(job)
    session.commit()
    assert jobs.run_job(job.id) == "failed"
    session.refresh(job)
    assert job.state == "failed" and "no installed kind offers the job 'hexagons.consolidate'" in job.log


def test_kind_registration_refuses_clashes(monkeypatch):
    """Two kinds of one name, an entry point that loads something else, or a kind whose route
    is already the core's: each is refused at start-up with what clashed."""
    from fastapi import APIRouter

    from app import kinds
    from app.main import create_app
    from app.routes import RouteClash

    example = get_kind("wordcount")
    with pytest.raises(KindError, match="already registered"):
        kinds.register_kind(type(example)())

    class Squatter(type(example)):
        name = "squatter"

        def routers(self):
            r = APIRouter()
            r.get("/healthz")(lambda: "mine")
            return [r]

        def cli(self):
            return None

    kinds.register_kind(Squatter())
    try:
        with pytest.raises(RouteClash, match="GET /healthz is declared twice"):
            create_app()
    finally:
        kinds.unregister_kind("squatter")

    class FakeEntryPoint:
        def __init__(self, name, value, obj):
            self.name, self.value, self._obj = name, value, obj

        def load(self):
            return self._obj

    saved = dict(kinds._registry)
    try:
        for points, message in (
            (
                [FakeEntryPoint("wordcount", "a:KIND", example), FakeEntryPoint("wordcount", "b:KIND", example)],
                "two packages declare the task kind 'wordcount': a:KIND and b:KIND",
            ),
            ([FakeEntryPoint("counting", "a:KIND", example)], "loads the kind named 'wordcount'"),
            ([FakeEntryPoint("thing", "a:THING", object())], "is not a TaskKind"),
            ([], "no task kinds found"),
        ):
            kinds._registry.clear()
            monkeypatch.setattr(kinds, "entry_points", lambda group, p=points: p)
            with pytest.raises(KindError, match=message):
                kinds.all_kinds()
    finally:
        kinds._registry.clear()
        kinds._registry.update(saved)
