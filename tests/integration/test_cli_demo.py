"""The command line as a user types it: the demo seeds a usable study; the checker counts."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import select

from tests.nav_fixtures import connectivity_dir

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "tom" / "questions.csv"


def run_cli(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        timeout=300,
    )


def test_tom_check_counts_disagreements(tmp_path):
    ok = run_cli("tom", "check", str(FIXTURE))
    assert ok.returncode == 0, ok.stderr
    lines = ok.stdout.strip().splitlines()
    assert lines[-1].startswith("0 of ") and lines[-1].endswith("questions disagree with the rules")
    rows = list(csv.DictReader(io.StringIO(FIXTURE.read_text(encoding="utf-8"))))
    for r in rows[:3]:
        r["answer"] = "No" if r["answer"] == "Yes" else "Yes"
    bad = tmp_path / "flipped.csv"
    with bad.open("w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    out = run_cli("tom", "check", str(bad))
    assert out.returncode == 1
    assert out.stdout.strip().splitlines()[-1] == f"3 of {len(rows)} questions disagree with the rules"
    for r in rows[:3]:
        assert r["question_id"] in out.stdout


def test_demo_seeds_a_live_study_with_a_leaderboard(tmp_path):
    env = {
        "DATABASE_URL": f"sqlite:///{tmp_path / 'demo.db'}",
        "STORAGE_URL": f"file://{tmp_path / 'blobs'}",
        "REDIS_URL": "",
    }
    out = run_cli("demo", "--no-serve", env=env)
    assert out.returncode == 0, out.stderr
    assert "researcher login: researcher@example.org  password: " in out.stdout
    assert "admin login:      admin@example.org  password: " in out.stdout

    from app.db import get_sessionmaker
    from app.leaderboards.service import compute
    from app.studies.models import Study

    # One demo study per installed kind, the example kind's package (tests/example_kind) too.
    # Hexagons's demo needs the released data beside the checkout (never copied into it), and
    # makes a description study beside its execution study.
    hexagons = ("hexagons",) if (ROOT.parent / "shared" / "data" / "hexagons" / "dev.jsonl").exists() else ()
    _check_demo_links(out.stdout, env["DATABASE_URL"], 9 + 2 * len(hexagons), "http://127.0.0.1:8000")
    with get_sessionmaker(env["DATABASE_URL"])() as s:
        study = s.scalar(select(Study).where(Study.kind == "tom"))
        assert study.state == "live"
        nav = s.scalar(select(Study).where(Study.title == "Demo: Navigation following"))
        assert nav.title == "Demo: Navigation following" and nav.state == "live"
        assert (nav.bundle_size, nav.gold_rate, nav.annotations_per_item) == (6, 0.0, 3)
        assert "do not explore" in nav.instructions.lower()
        from app.studies.models import Item

        assert len(s.scalars(select(Item).where(Item.study_id == nav.id)).all()) == 24
        board = compute(s, study)
        _check_demo_review(s, study, nav)
        # As test_the_demo_leaderboards_of_sts_a3ds_and_hexagons_have_figures, which seeds
        # PostgreSQL: this demo is SQLite's, its seed the same (seed() returns these studies).
        demo_studies = s.scalars(select(Study).where(Study.title.startswith("Demo: ")).order_by(Study.id)).all()
        _check_lead_tables_have_figures(s, demo_studies)
    _check_newcomers(env)
    types = {r["type"] for r in board["rows"]}
    assert {"agent", "annotator", "majority", "baseline"} <= types
    assert sum(r["type"] == "agent" for r in board["rows"]) == 2
    out = run_cli("export", str(study.id), "--out", str(tmp_path / "out"), env=env)
    assert out.returncode == 0, out.stderr
    assert "exporting" in out.stderr  # the progress bar
    from app.auth.models import User
    from app.studies.models import Annotation

    rows = [json.loads(line) for line in (tmp_path / "out" / "annotations.jsonl").read_text().splitlines()]
    with get_sessionmaker(env["DATABASE_URL"])() as s:
        stored = s.execute(
            select(Annotation.id, Item.external_id, Annotation.response, User.pseudonym)
            .join(Item, Item.id == Annotation.item_id)
            .join(User, User.id == Annotation.worker_id)
            .where(Annotation.study_id == study.id)
            .order_by(Annotation.id)
        ).all()
    assert stored  # the demo's simulated annotators answered
    assert [(r["annotation_id"], r["item"], r["response"], r["worker"]) for r in rows] == [tuple(x) for x in stored]
    assert all(r["worker"].startswith("w-") for r in rows)
    table = list(csv.DictReader(io.StringIO((tmp_path / "out" / "annotations.csv").read_text())))
    assert [(int(r["annotation_id"]), r["worker"]) for r in table] == [(x[0], x[3]) for x in stored]
    assert "demo-annotator" not in (tmp_path / "out" / "annotations.csv").read_text()
    assert run_cli("export", "999", env=env).returncode != 0
    _check_sts_demo(env["DATABASE_URL"])
    # Running the demo again does not duplicate the study, and prints fresh passwords; on
    # another port, and with BASE_URL set, the links follow.
    again = run_cli("demo", "--no-serve", "--port", "8100", env=env)
    assert again.returncode == 0
    _check_demo_links(again.stdout, env["DATABASE_URL"], 9 + 2 * len(hexagons), "http://127.0.0.1:8100")
    behind = run_cli("demo", "--no-serve", env={**env, "BASE_URL": "https://proctor.example.org"})
    _check_demo_links(behind.stdout, env["DATABASE_URL"], 9 + 2 * len(hexagons), "https://proctor.example.org")
    with get_sessionmaker(env["DATABASE_URL"])() as s:
        kinds = sorted(s.scalars(select(Study.kind)).all())
        # One per kind; Hexagons has a description study beside its execution study, STS a
        # side-by-side study and the play study of its human row beside its single one, and
        # navigation a side-by-side study (followed) beside its following study, and A3DS an
        # adaptive ranking study beside its reference game.
        assert kinds == sorted(
            ["navigation", "navigation", "sts", "sts", "sts", "tom", "wordcount", "a3ds", "a3ds", *hexagons, *hexagons]
        )
        if hexagons:
            desc = s.scalar(select(Study).where(Study.title == "Demo: Hexagons description"))
            assert desc.state == "live" and desc.kind_settings["mode"] == "description"
    # The README's counts: the built-in kinds' studies (not the test's wordcount), with the
    # Hexagons data and without it.
    words = {"four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}
    said = re.search(
        r"each of the (\w+)\s+demo studies \((\w+) where the Hexagons data is absent", (ROOT / "README.md").read_text()
    )
    builtin = len(kinds) - 1
    assert (words[said[1]] if hexagons else words[said[2]]) == builtin
    assert words[said[1]] - words[said[2]] == 2  # execution and description


def _check_demo_links(stdout: str, url: str, n: int, base: str) -> None:
    """The demo says how many studies it made and prints each one's title, kind and entry link."""
    from app.db import get_sessionmaker
    from app.studies.models import Study

    lines = stdout.splitlines()
    start = lines.index(f"  {n} studies, live; a worker's entry link to each (another PROLIFIC_PID is another worker):")
    with get_sessionmaker(url)() as s:
        studies = s.scalars(select(Study).order_by(Study.id)).all()
    assert len(studies) == n
    assert lines[start + 1 : start + 1 + 2 * n] == [
        line
        for st in studies
        for line in (f"  {st.title} ({st.kind})", f"    {base}/s/{st.slug}?PROLIFIC_PID=you&STUDY_ID=demo&SESSION_ID=1")
    ]


def _check_newcomers(env: dict) -> None:
    """Room for people trying the demo: in every demo study a newcomer gets an item, and in the
    navigation study six newcomers each walk a whole task of 6 paths (the simulated followers
    once took every path, and a newcomer's task ended after 0 of 6)."""
    from app.config import get_settings
    from app.db import get_sessionmaker
    from app.demo import simulate_task
    from app.storage import clear_store_cache
    from app.studies import assignment, services
    from app.studies.models import Item, Study

    def walk(item: Item, rng) -> dict:
        return {"path": list(item.reference["path"]), "rating": 4}

    with pytest.MonkeyPatch.context() as mp, get_sessionmaker(env["DATABASE_URL"])() as s:
        # The demo's blob folder: an answer's path is checked on the house stored there.
        mp.setenv("STORAGE_URL", env["STORAGE_URL"])
        get_settings.cache_clear()
        clear_store_cache()
        nav = s.scalar(select(Study).where(Study.title == "Demo: Navigation following"))
        done = [simulate_task(s, nav, f"newcomer-{k}", walk, 30.0, seed=k) for k in range(6)]
        assert done == [6] * 6
        for study in s.scalars(select(Study).where(Study.title == "Demo: Hexagons description")).all():
            # Every task can be completed (its targets with one instructor each once left a task
            # of 2 ending after 1, with no code).
            assert services.study_fill_warning(s, study) is None
        for study in s.scalars(select(Study).where(Study.title != "Demo: Navigation following")).all():
            bundle = assignment.enter(s, study, "prolific", "newcomer-0")
            assert assignment.next_item(s, study, bundle.id) is not None, study.title
    get_settings.cache_clear()
    clear_store_cache()


def _check_demo_review(s, tom, nav) -> None:
    """The simulated workers take realistic times, so the review queue's signals mean
    something: the one who answers "Yes" to everything, fast, comes first among the
    annotators; the follower who never moves comes first among the navigation study's six, and
    the navigation leaderboard has its followers' rows."""
    from app.auth.models import User
    from app.kinds import get_kind
    from app.quality import service as quality

    queue = quality.review_queue(s, tom)
    clicker = s.scalar(select(User.pseudonym).where(User.external_id == "demo-clicker"))
    assert queue[0]["worker"] == clicker
    assert any(f.startswith("fast") for f in queue[0]["flags"])
    assert all(3.0 < w["median_seconds"] < 30.0 for w in queue[1:])
    assert not any(f.startswith("fast") for w in queue[1:] for f in w["flags"])
    followers = quality.review_queue(s, nav)
    assert len(followers) == 6 and all(w["annotations"] == 6 for w in followers)
    idler = s.scalar(select(User.pseudonym).where(User.external_id == "demo-idler"))
    assert followers[0]["worker"] == idler and followers[0]["median_seconds"] < 10.0
    assert all(w["median_seconds"] > 15.0 for w in followers[1:])
    section = get_kind("navigation").extra_leaderboard(s, nav)
    assert any(t["rows"] for t in section["tables"])
    everyone = quality.review_queue_all(s, "pending")
    assert {tom.id, nav.id} <= {w["study_id"] for w in everyone}


def _check_sts_demo(url: str) -> None:
    """The STS demo study comes from a published suite of the demo researcher's: 4+ level
    families, C continuations of every scenario by the expert, random and (where torch is
    installed) the trained baseline, C plays of every scenario by people (the human row, from
    the demo's live play study), and the live study's items are those continuations."""
    import importlib.util

    from app.agents.models import Agent
    from app.auth.models import User
    from app.db import get_sessionmaker
    from app.kinds.sts.demo import REFERENCE, SUITE_CONTINUATIONS
    from app.kinds.sts.models import Continuation, Suite, SuiteVersion
    from app.kinds.sts.suites import scenarios_of
    from app.studies.models import Item, Study

    from app.kinds import get_kind
    from app.kinds.sts.demo import PLAY_TITLE
    from app.studies.models import Annotation

    generated = {"expert", "random"} | ({"bc"} if importlib.util.find_spec("torch") else set())
    names = generated | {"people"}
    with get_sessionmaker(url)() as s:
        study = s.scalar(select(Study).where(Study.title == f"Demo: {get_kind('sts').title}"))
        assert study.state == "live" and s.get(User, study.owner_id).email == "researcher@example.org"
        suite = s.get(Suite, study.kind_settings["suite"]["id"])
        assert suite.owner_id == study.owner_id
        version = s.scalar(select(SuiteVersion).where(SuiteVersion.suite_id == suite.id, SuiteVersion.number == 1))
        assert version.state == "published" and study.kind_settings["suite"]["version"] == 1
        scenarios = {f"s{sc.id}": sc for sc in scenarios_of(s, version)}
        categories = {sc.category for sc in scenarios.values()}
        assert len(categories) >= 4 and len(scenarios) >= 8
        agents = {
            a.id: a.name for a in s.scalars(select(Agent).where(Agent.owner_id == suite.owner_id, Agent.kind == "sts"))
        }
        assert set(agents.values()) == names
        stored = {(agents[c.agent_id], f"s{c.scenario_id}", str(c.index)): c for c in s.scalars(select(Continuation))}
        for name in names:
            assert sorted(k[1:] for k in stored if k[0] == name) == sorted(
                (sc, str(i)) for sc in scenarios for i in range(SUITE_CONTINUATIONS)
            ), name
        items = s.scalars(select(Item).where(Item.study_id == study.id)).all()
        agent_items = [i for i in items if not i.is_gold]
        assert len(agent_items) == len(names) * len(scenarios) * SUITE_CONTINUATIONS
        for i in items:  # each item is a stored continuation of the suite, with its outcome
            ref = i.reference
            c = stored[(ref["agent"], ref["scenario"], ref["continuation"])]
            assert i.category == scenarios[ref["scenario"]].category and ref["suite_version"] == 1
            assert ref["success_step"] == c.success_step and ref["length"] == len(c.actions)
        gold = sorted((i.reference["agent"], i.reference["label"]) for i in items if i.is_gold)
        assert (
            gold
            == [("expert", "success")] * REFERENCE["expert_successes"]
            + [("random", "failure")] * REFERENCE["random_failures"]
        )
        assert {i.category for i in agent_items} == categories
        # The human row: people's continuations are the plays of the demo's play study, stored
        # through the path a real one takes (one continuation a play, its notes naming it).
        play = s.scalar(select(Study).where(Study.title == PLAY_TITLE))
        assert play.state == "live" and play.kind_settings["mode"] == "play" and not play.adaptive
        assert play.kind_settings["suite"] == study.kind_settings["suite"]
        plays = s.scalars(select(Annotation).where(Annotation.study_id == play.id)).all()
        assert len(plays) == SUITE_CONTINUATIONS * len(scenarios) and play.annotations_per_item > SUITE_CONTINUATIONS
        people = [c for (name, *_), c in stored.items() if name == "people"]
        assert len(people) == len(plays) and all(c.notes.startswith(f"play:{play.id}:") for c in people)
        assert 0 < sum(c.end == "success" for c in people) < len(people)  # the hasty player slips
        # People mark part of each agent's continuations and the simulator all of them: the
        # leaderboard shows people, the simulator and PPI++ with what it is worth (issue 28).
        ppi = next(t for t in get_kind("sts").extra_leaderboard(s, study)["tables"] if t["key"] == "sts_ppi")
        # The side-by-side study of the same version: every two agents, people among them (the
        # human row), on every scenario, live, ranked by its simulated judges with intervals,
        # with pairs left for newcomers.
        from app.kinds.sts.demo import PAIRS_TITLE

        pairs = s.scalar(select(Study).where(Study.title == PAIRS_TITLE))
        assert pairs.state == "live" and pairs.kind_settings["mode"] == "pairs"
        assert pairs.kind_settings["suite"] == study.kind_settings["suite"]
        pair_items = [i for i in s.scalars(select(Item).where(Item.study_id == pairs.id)) if not i.is_gold]
        assert len(pair_items) == len(scenarios) * len(names) * (len(names) - 1) // 2
        tables = {t["key"]: t for t in get_kind("sts").extra_leaderboard(s, pairs)["tables"]}
        rated = {r["agent"]: r for r in tables["sts_pair_ratings"]["rows"]}
        assert set(rated) == names and all(r["rating"]["low"] is not None for r in rated.values()), rated
        assert rated["expert"]["rating"]["mean"] > rated["random"]["rating"]["mean"]
        assert "sts_pair_wins" in tables and "single_success" in rated["expert"]
        rows = {r["agent"]: r for r in ppi["rows"]}
        assert set(rows) == names
        for r in rows.values():
            assert r["judged"] == len(scenarios) * SUITE_CONTINUATIONS > r["people"]["n"] >= 10, r
        shown = [r for r in rows.values() if "mean" in r["ppi"]]
        assert shown and all(
            0 <= r["ppi"]["low"] <= r["ppi"]["mean"] <= r["ppi"]["high"] <= 1 and r["worth"] > 0 for r in shown
        ), rows


def test_nav_import_graphs(tmp_path):
    import pytest

    folder = ROOT.parent / "shared" / "data" / "r2r" / "connectivity"
    if not folder.is_dir():
        pytest.skip(f"the Matterport3D connectivity files are not at {folder}")
    env = {
        "DATABASE_URL": f"sqlite:///{tmp_path / 'nav.db'}",
        "STORAGE_URL": f"file://{tmp_path / 'blobs'}",
        "REDIS_URL": "",
    }
    assert run_cli("migrate", env=env).returncode == 0
    out = run_cli("nav", "import-graphs", str(folder), env=env)
    assert out.returncode == 0, out.stderr
    n = len(list(folder.glob("*_connectivity.json")))
    assert n == 90 and f"imported {n} buildings" in out.stdout
    assert "importing buildings" in out.stderr  # the progress bar

    from app.db import get_sessionmaker
    from app.kinds.navigation.models import Environment

    with get_sessionmaker(env["DATABASE_URL"])() as s:
        envs = s.scalars(select(Environment)).all()
    assert len(envs) == 90 and all(e.source == "matterport" and e.n_viewpoints > 0 for e in envs)
    assert (tmp_path / "blobs" / "environments" / "17DRP5sb8fy" / "connectivity.json").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run_cli("nav", "import-graphs", str(empty), env=env).returncode != 0


def refs_by_instr(path: Path) -> dict[str, list[str]]:
    return {
        f"{r['path_id']}_{k}": r["path"] for r in json.loads(path.read_text()) for k in range(len(r["instructions"]))
    }


def grid_scores(reference: list[str], trajectory: list[str]) -> dict:
    """R2R's metrics from their definitions, on the test grid (Manhattan distances)."""

    def dedupe(path):
        return [v for k, v in enumerate(path) if k == 0 or v != path[k - 1]]

    def d(a: str, b: str) -> float:
        return float(abs(int(a[1]) - int(b[1])) + abs(int(a[2]) - int(b[2])))

    ref, traj = dedupe(reference), dedupe(trajectory)
    ne = d(traj[-1], ref[-1])
    success = ne <= 3.0
    length = sum(d(a, b) for a, b in zip(traj, traj[1:]))
    shortest = d(ref[0], ref[-1])
    spl = shortest / max(shortest, length) if success else 0.0
    inf = float("inf")
    dtw = [[inf] * (len(traj) + 1) for _ in range(len(ref) + 1)]
    dtw[0][0] = 0.0
    for i in range(1, len(ref) + 1):
        for j in range(1, len(traj) + 1):
            dtw[i][j] = d(ref[i - 1], traj[j - 1]) + min(dtw[i - 1][j], dtw[i][j - 1], dtw[i - 1][j - 1])
    ndtw = math.exp(-dtw[-1][-1] / (len(ref) * 3.0))
    return {
        "ne": ne,
        "success": success,
        "spl": spl,
        "ndtw": ndtw,
        "sdtw": ndtw if success else 0.0,
        "path_length": length,
    }


def test_nav_score_command(tmp_path):

    fx = ROOT / "tests" / "fixtures" / "nav"
    args = [
        "nav",
        "score",
        "--connectivity",
        str(connectivity_dir()),
        "--references",
        str(fx / "R2R_grid.json"),
        "--predictions",
        str(fx / "predictions_grid.json"),
    ]
    table = run_cli(*args)
    assert table.returncode == 0, table.stderr
    result = run_cli(*args, "--json")
    data = json.loads(result.stdout)
    # The same numbers computed here from the definitions: on the grid the shortest-path
    # distance is the Manhattan distance between "gXY" viewpoints.
    expected = {
        p["instr_id"]: grid_scores(
            refs_by_instr(fx / "R2R_grid.json")[p["instr_id"]],
            [v if isinstance(v, str) else v[0] for v in p["trajectory"]],
        )
        for p in json.loads((fx / "predictions_grid.json").read_text())
    }
    assert set(data["per_instruction"]) == set(expected) == {"1_0", "1_1", "2_0"}
    for instr_id, want in expected.items():
        got = data["per_instruction"][instr_id]
        assert set(got) == set(want)
        for key, value in want.items():
            assert got[key] == pytest.approx(value, abs=1e-12), (instr_id, key)
    for key in want:
        assert data["mean"][key] == pytest.approx(sum(float(e[key]) for e in expected.values()) / 3, abs=1e-12)
    assert data["unpredicted"] == ["2_1"]
    # Hand-checked anchors: 1_0 ends 2 m from the goal (success) with DTW 0+0+1+2 = 3;
    # 1_1 stops 4 m short; 2_0 (a repeated viewpoint and a bare id) follows exactly.
    assert expected["1_0"]["ndtw"] == pytest.approx(math.exp(-3 / (4 * 3.0)))
    assert [expected[i]["success"] for i in ("1_0", "1_1", "2_0")] == [True, False, True]
    # The table shows the same values.
    rows = {line.split()[0]: line.split()[1:] for line in table.stdout.splitlines()[2:5]}
    for instr_id, want in expected.items():
        assert rows[instr_id] == [
            f"{want['ne']:.3f}",
            str(int(want["success"])),
            f"{want['spl']:.3f}",
            f"{want['ndtw']:.3f}",
            f"{want['sdtw']:.3f}",
            f"{want['path_length']:.3f}",
        ]
    preds = json.loads((fx / "predictions_grid.json").read_text())
    preds[0]["trajectory"][0][0] = "no-such-viewpoint"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(preds))
    out = run_cli(
        "nav",
        "score",
        "--connectivity",
        str(connectivity_dir()),
        "--references",
        str(fx / "R2R_grid.json"),
        "--predictions",
        str(bad),
    )
    assert out.returncode == 2 and preds[0]["instr_id"] in out.stderr


def test_serve_starts_and_its_inprocess_worker_runs_jobs(tmp_path):
    """`proctor serve` as a user starts it: the page answers and a queued export gets done
    by the worker thread inside the web process."""
    import socket
    import time
    import urllib.request

    from app.db import get_sessionmaker
    from app.demo import ensure_user
    from app.jobs import Job, create_job
    from tests.conftest import create_tom_study

    env = {
        "DATABASE_URL": f"sqlite:///{tmp_path / 'serve.db'}",
        "STORAGE_URL": f"file://{tmp_path / 'blobs'}",
        "REDIS_URL": "",
    }
    assert run_cli("migrate", env=env).returncode == 0
    with get_sessionmaker(env["DATABASE_URL"])() as s:
        owner = ensure_user(s, "r@example.org", "researcher", "pw-xxxxxxxx")
        study = create_tom_study(s, owner)
        job_id = create_job(s, "export", study_id=study.id).id
        s.commit()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        state = None
        for _ in range(150):
            time.sleep(0.2)
            try:
                ok = urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2).status == 200
            except OSError:
                continue
            with get_sessionmaker(env["DATABASE_URL"])() as s:
                state = s.get(Job, job_id).state
            if ok and state == "done":
                break
        assert state == "done", proc.stdout and proc.poll()
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=10)
    assert "Traceback" not in out, out


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_the_demo_leaderboards_of_sts_a3ds_and_hexagons_have_figures(session):
    """A new user opening the demo's STS, A3DS and Hexagons execution leaderboards sees their
    lead tables filled (simulated annotators and executors), not "no figures yet". On
    PostgreSQL, seeded here; SQLite's demo, made by `proctor demo`, is checked the same way in
    test_demo_seeds_a_live_study_with_a_leaderboard (one seed of a minute less).

    The seed runs without coverage's tracer (untraced): `proctor demo` in that test runs the
    same code traced (its subprocess is measured; the report of this file lost no line but
    PostgreSQL's branch of serialised_writes, which the engine's tests take), and tracing made
    this seed half again as long (54.5 s against 37.3 s); the checks of the boards are traced."""
    from app.demo import seed
    from tests.conftest import untraced

    with untraced():
        studies = seed(session)["studies"]
    _check_lead_tables_have_figures(session, studies)


def _check_lead_tables_have_figures(session, made) -> None:
    from app.kinds import get_kind
    from app.kinds.a3ds import RANKING_TITLE
    from app.kinds.sts.demo import PAIRS_TITLE
    from app.leaderboards.service import compute

    studies = {s.kind: s for s in made if s.title not in ("Demo: Hexagons description", PAIRS_TITLE, RANKING_TITLE)}
    for kind in ("sts", "a3ds", "hexagons"):
        if kind not in studies:  # Hexagons: only where its released data lies beside the checkout
            assert kind == "hexagons"
            continue
        board = compute(session, studies[kind])
        lead = {t["key"]: t for t in (board["extra"] or {}).get("tables", [])}[get_kind(kind).primary_table]
        figures = [v for r in lead["rows"] for v in r.values() if isinstance(v, dict) and v.get("mean") is not None]
        assert figures, (kind, lead["rows"])
