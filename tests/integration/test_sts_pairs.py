"""Side by side (issue 30) on both backends: a pairwise STS study built from a published suite
version (matched continuations of two agents, sides drawn per pair and kept off the page,
reference pairs as gold), answered on the real pages and through the engine, its leaderboard
checked against a hand-worked Davidson fit, and which pair comes next under adaptive
allocation: the one whose agents' ratings are least separated."""

from __future__ import annotations

import json
import math
import re

import pytest
from sqlalchemy import select

from app import jobs
from app.kinds.sts.demo import demo_lines
from app.studies import assignment, services
from app.studies.models import Assignment, Item, Study
from tests.conftest import consent_version_of, login, make_user
from tests.integration.test_nav_pairs import judge_everything

LEVEL = "BabyAI-GoToLocal-v0"


def _json(client, csrf):
    def call(method, url, body=None, **kw):
        return client.request(method, url, json=body, headers={"X-CSRF-Token": csrf}, **kw)

    return call


def _suite_with_continuations(api) -> int:
    r = api("POST", "/api/v1/sts/recordings/expert", {"level": LEVEL, "seeds": [1, 2, 3]})
    assert r.status_code == 201, r.text
    suite = api("POST", "/api/v1/sts/suites", {"name": "Pairs", "description": "small rooms"}).json()["id"]
    r = api("POST", f"/api/v1/sts/suites/{suite}/versions/1/scenarios", {"continuation": 12, "rule": "first step"})
    assert r.status_code == 201, r.text
    assert api("POST", f"/api/v1/sts/suites/{suite}/versions/1/publish").status_code == 200
    for agent in ("expert", "random"):
        r = api(
            "POST",
            f"/api/v1/sts/suites/{suite}/versions/1/generations",
            {"agent": agent, "continuations": 2, "batch_size": 4},
        )
        assert r.status_code == 202, r.text
    jobs.run_queued_once()
    return suite


def _side_of(item: Item, agent: str) -> str:
    return next(s for s in ("a", "b") if item.reference[s]["agent"] == agent)


def _answer(item: Item, winner: str) -> dict:
    out = {"winner": winner, "reason": "closer to the ball"}
    for s in ("a", "b"):
        step = item.reference[s]["success_step"]
        out[f"{s}_marker"] = "success" if step is not None else "failure"
        out[f"{s}_step"] = step if step is not None else item.reference[s]["length"]
    return out


def test_a_pair_study_from_a_suite_is_judged_and_ranked_as_worked_by_hand(client, session):
    owner = make_user(session, "researcher")
    api = _json(client, login(client, owner))
    suite = _suite_with_continuations(api)
    base = {"agents": ["expert", "random"], "annotations_per_item": 1, "continuations": 2}
    single = api("POST", f"/api/v1/sts/suites/{suite}/versions/1/study", {**base, "title": "Single"}).json()
    r = api(
        "POST",
        f"/api/v1/sts/suites/{suite}/versions/1/study",
        {**base, "title": "Pairs", "pairs": True, "reference": {"pairs": 2}, "bundle_size": 8, "gold_rate": 0.25},
    )
    assert r.status_code == 201, r.text
    out = r.json()
    # The suite page's form makes one too ("Side by side").
    page = client.get(f"/sts/suites/{suite}?version=1")
    assert 'name="side_by_side"' in page.text
    form = {
        "csrf_token": re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1),
        "title": "Pairs by form",
        "agents": ["expert", "random"],
        "continuations": "1",
        "side_by_side": "1",
        "reference_pairs": "1",
    }
    assert client.post(f"/sts/suites/{suite}/versions/1/study", data=form).status_code == 200
    formed = session.scalar(select(Study).where(Study.title == "Pairs by form"))
    assert formed.kind_settings["mode"] == "pairs"
    formed_pairs = session.scalars(select(Item).where(Item.study_id == formed.id, Item.is_gold.is_(False))).all()
    assert len(formed_pairs) == 3  # one continuation of each agent on each of the 3 scenarios
    study = session.get(Study, out["study"])
    assert study.kind_settings["mode"] == "pairs" and out["scenarios"] == 3
    items = list(session.scalars(select(Item).where(Item.study_id == study.id).order_by(Item.id)))
    pairs = [i for i in items if not i.is_gold]
    gold = [i for i in items if i.is_gold]
    # Every scenario's matched continuations (0 with 0, 1 with 1) of the two agents, once.
    assert sorted(
        (i.reference["scenario"], i.reference["a"]["continuation"], i.reference["b"]["continuation"]) for i in pairs
    ) == sorted((sc, c, c) for sc in {i.reference["scenario"] for i in pairs} for c in ("0", "1"))
    assert len(pairs) == 6 and out["items"] == len(items) and out["reference"] == len(gold) >= 1
    assert {_side_of(i, "expert") for i in pairs} == {"a", "b"}  # sides drawn per pair
    for g in gold:  # a reference pair: the expert's success beside the random policy's failure
        assert g.reference["better"] == _side_of(g, "expert")
        assert g.reference[g.reference["better"]]["simulator"] == "success"
    # Both can be allocated adaptively: a single study by its agents' settled comparisons
    # (the kind's Ranking), a pair study by which pair next.
    assert api("PATCH", f"/api/v1/studies/{single['study']}", {"adaptive": True}).status_code == 200
    assert api("PATCH", f"/api/v1/studies/{study.id}", {"adaptive": True}).status_code == 200
    services.set_state(session, study, "live", owner)
    services.set_state(session, session.get(Study, single["study"]), "live", owner)

    # The hand-worked plan: of the 6 pairs the expert wins 4, the random policy 1, and 1 is a tie.
    plan = dict(zip([i.id for i in pairs], ["expert"] * 4 + ["random", "tie"]))

    def winner_for(item: Item) -> str:
        if item.is_gold:
            return item.reference["better"]
        who = plan[item.id]
        return "tie" if who == "tie" else _side_of(item, who)

    # One worker on the real pages: no agent's name reaches the page.
    client.cookies.clear()
    page = client.get(f"/s/{study.slug}?PROLIFIC_PID=PAIR1&STUDY_ID=S&SESSION_ID=Q")
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
    page = client.post(
        f"/task/{study.slug}/consent", data={"csrf_token": csrf, "consent_version": consent_version_of(page.text)}
    )
    on_pages = 0
    while 'id="sts-pair"' in page.text:
        assert "expert" not in page.text and "random" not in page.text
        assert "Pair " in page.text and "<kbd>1</kbd> A better" in page.text
        assignment_id = int(re.search(r'name="assignment_id" value="(\d+)"', page.text).group(1))
        form = {
            "csrf_token": re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1),
            "assignment_id": str(assignment_id),
            "idempotency_key": re.search(r'name="idempotency_key" value="([^"]+)"', page.text).group(1),
        }
        for side in ("a", "b"):
            url = re.search(rf'data-frames-{side}="([^"]+)"', page.text).group(1).replace("&amp;", "&")
            assert client.get(url).content[:8] == b"\x89PNG\r\n\x1a\n"
        session.expire_all()
        item = session.get(Item, session.get(Assignment, assignment_id).item_id)
        if on_pages == 0:  # a marker beyond the continuation is refused, naming its side
            bad = {**form, **{k: str(v) for k, v in _answer(item, "tie").items()}, "b_step": "999"}
            refused = client.post(f"/task/{study.slug}/answer", data=bad, follow_redirects=True)
            assert "B&#39;s marker is at 999" in refused.text or "B's marker is at 999" in refused.text
        answer = {k: str(v) for k, v in _answer(item, winner_for(item)).items()}
        page = client.post(f"/task/{study.slug}/answer", data={**form, **answer}, follow_redirects=True)
        assert page.status_code == 200, page.text
        on_pages += 1
    assert on_pages >= 1
    judge_everything(session, study, lambda item: _answer(item, winner_for(item)))  # the rest: the engine

    # The single study, marked as the simulator says: the ranking shown beside.
    def marked(item: Item) -> dict:
        ref = item.reference
        said = ref.get("label") or ref["simulator"]
        step = ref["success_step"] if said == "success" and ref["success_step"] is not None else ref["length"]
        return {"marker": said, "step": step}

    judge_everything(session, session.get(Study, single["study"]), marked)

    from app.leaderboards.service import compute

    session.expire_all()
    board = compute(session, study)
    tables = {t["key"]: t for t in board["extra"]["tables"]}
    rows = {r["agent"]: r for r in tables["sts_pair_ratings"]["rows"]}
    # Davidson by hand: with d = rating(expert) - rating(random), P(win)/P(loss) = e^d = 4/1,
    # so d = ln 4 and, centred, the ratings are +-ln 2; D = 2 + 1/2 + nu and P(tie) = nu/D = 1/6.
    assert rows["expert"]["rating"]["mean"] == pytest.approx(math.log(2), abs=1e-4)
    assert rows["random"]["rating"]["mean"] == pytest.approx(-math.log(2), abs=1e-4)
    assert rows["expert"]["judgements"] == rows["random"]["judgements"] == 6
    # The scenarios the bootstrap resamples, named in the API's cell as on the page.
    assert (rows["expert"]["rating"]["units"], rows["expert"]["rating"]["unit"]) == (3, "scenario")
    for who in ("expert", "random"):  # 3 scenarios, too few for an interval: none, in the API too
        assert (rows[who]["rating"]["low"], rows[who]["rating"]["high"]) == (None, None)
    assert rows["expert"]["rank"]["text"] == "—" and "fewer than 5" in rows["expert"]["rank"]["reason"]
    wins = {r["agent"]: r for r in tables["sts_pair_wins"]["rows"]}
    assert wins["expert"]["v:random"] == "0.750 (n = 6)" and wins["random"]["v:expert"] == "0.250 (n = 6)"
    assert "Ties: 17% of judgements" in tables["sts_pair_ratings"]["note"]
    assert "0.50" not in tables["sts_pair_ratings"]["note"]  # nu/(2+nu) = 0.5/2.5 = 0.20
    assert "probability 0.20" in tables["sts_pair_ratings"]["note"]
    # The single study's ranking beside it: the expert succeeds in every continuation.
    assert rows["expert"]["single_success"]["mean"] == 1.0
    corr = tables["sts_pair_correlation"]["rows"][0]
    assert corr["agents"] == 2 and corr["rho"]["text"] == "—"  # two agents: no rank correlation
    # Every table shown whole (a title, a note, each column with its key, label and help, no
    # column empty), the ratings' columns by the words the page heads them with.
    from tests.integration.test_sections_shapes import assert_shown

    assert_shown(tables)
    assert [c["label"] for c in tables["sts_pair_ratings"]["columns"]] == [
        "Agent",
        "Judgements",
        "Rank (95%)",
        "Rating (log-odds)",
        "Single rank (95%)",
        "Single success share",
    ]
    # The page shows the tables with their titles.
    login(client, owner)
    html = client.get(f"/studies/{study.id}/leaderboard").text
    assert "Rating per agent from side-by-side judgements (Davidson, log-odds)" in html
    assert "n = 3 scenarios: too few for an interval" in html  # what the interval would resample
    # The ratings lead the page (the kind's primary table for a side-by-side study).
    first = re.search(r'<section class="card[^"]*" id="([^"]+)"', html)
    assert first.group(1) == "sts_pair_ratings" and "primary" in first.group(0)
    assert "Win rate of the row agent against the column agent (share 0-1)" in html
    assert "Side by side, built from" in client.get(f"/studies/{study.id}").text
    # The admin's replay of a judge: each side's marker and agent, and the pick.
    from app.studies.models import Participant

    login(client, make_user(session, "admin"))
    pid = session.scalars(
        select(Participant.id).where(Participant.study_id == study.id).order_by(Participant.id)
    ).first()
    replay = client.get(f"/admin/studies/{study.id}/participants/{pid}").text
    assert "Picked <strong" in replay and "Played 0 moves" not in replay
    # Their reference pairs' sides (a success beside a failure, both marked right) approved them.
    first = session.get(Participant, pid)
    assert first.status == "approved", first.status
    # Reference pairs measure the judges: every one picked the better side.
    from app.studies.models import Annotation

    gold_scores = session.scalars(
        select(Annotation.score).where(Annotation.study_id == study.id, Annotation.is_gold.is_(True))
    ).all()
    assert gold_scores and all(s == 1.0 for s in gold_scores)


def _pair_upload() -> bytes:
    """Three agents on the demo's eight scenarios: the expert, the random policy, and the random
    policy's second continuation as another agent ("random2"); every two of them a pair."""
    lines = [x for x in demo_lines() if not x.get("reference")]
    sides: dict[str, dict[str, dict]] = {}
    for x in lines:
        if x["agent"] == "expert" and x["continuation"] == 0:
            sides.setdefault(x["scenario"], {})["expert"] = x
        elif x["agent"] == "random":
            name = "random" if x["continuation"] == 0 else "random2"
            sides.setdefault(x["scenario"], {})[name] = {**x, "agent": name, "continuation": 0}
    out = []
    for agents in sides.values():
        for first, second in (("expert", "random"), ("expert", "random2"), ("random", "random2")):
            out.append({"first": agents[first], "second": agents[second]})
    return "\n".join(json.dumps(x) for x in out).encode()


def test_the_next_pair_is_the_one_whose_agents_are_least_separated(session):
    from app.leaderboards import adaptive

    owner = make_user(session, "researcher")
    study = services.create_study(
        session,
        owner,
        "sts",
        services.StudySettings(title="Which next", bundle_size=4, gold_rate=0.0, annotations_per_item=2, adaptive=True),
        _pair_upload(),
        "pairs",
    )
    services.set_state(session, study, "live", owner)
    items = list(session.scalars(select(Item).where(Item.study_id == study.id)))
    assert len(items) == 24
    # Before any judgement every pair is open: all on the top level, scenarios in a fixed order.
    adaptive.refresh_study(session, study)
    session.expire_all()
    assert all(100 <= session.get(Item, i.id).priority < 101 for i in items)

    def agents_of(item: Item) -> frozenset:
        return frozenset((item.reference["a"]["agent"], item.reference["b"]["agent"]))

    # One judgement of each pair (the floor): the expert always wins; random and random2 split.
    calls = {"n": 0}
    n = 0
    while any(session.get(Item, i.id).n_active < 1 for i in items):
        n += 1
        bundle = assignment.enter(session, study, "prolific", f"W{n:03d}")
        a = assignment.next_item(session, study, bundle.id)
        while a is not None:
            item = session.get(Item, a.item_id)
            if "expert" in agents_of(item):
                winner = _side_of(item, "expert")
            else:
                winner = ("a", "b", "tie")[calls["n"] % 3]
                calls["n"] += 1
            assignment.submit(session, study, bundle.id, a.id, _answer(item, winner), f"k{a.id}")
            session.expire_all()
            if all(session.get(Item, i.id).n_active >= 1 for i in items):
                break
            a = assignment.next_item(session, study, bundle.id)
        session.expire_all()
    done = adaptive.refresh_study(session, study)
    assert done["changed"] > 0
    session.expire_all()
    level = {agents_of(i): int(session.get(Item, i.id).priority) for i in items}
    close = frozenset(("random", "random2"))
    assert all(level[close] > v for k, v in level.items() if k != close)
    # A fresh judge's next pair: random against random2.
    bundle = assignment.enter(session, study, "prolific", "FRESH")
    a = assignment.next_item(session, study, bundle.id)
    assert agents_of(session.get(Item, a.item_id)) == close


def test_a_pair_study_controlled_for_length_says_so(session):
    # Option control_length (off by default): the continuations' own steps enter the fit as a
    # covariate (app/leaderboards/pairwise.py "Length control"); the table says so and gives
    # the judges' taste for length with its interval.
    from app.leaderboards.service import compute

    owner = make_user(session, "researcher")
    settings = services.StudySettings(title="Length", bundle_size=4, gold_rate=0.0, annotations_per_item=1)
    study = services.create_study(session, owner, "sts", settings, _pair_upload(), "pairs", {"control_length": 1})
    assert study.kind_settings == {"mode": "pairs", "control_length": True}
    plain = services.create_study(session, owner, "sts", settings, _pair_upload(), "pairs")
    assert plain.kind_settings == {"mode": "pairs", "control_length": False}
    services.set_state(session, study, "live", owner)

    def answer(item: Item) -> dict:
        agents = {item.reference[s]["agent"] for s in ("a", "b")}
        return _answer(item, _side_of(item, "expert") if "expert" in agents else ("a", "b")[item.id % 2])

    judge_everything(session, study, answer)
    session.expire_all()
    ratings = {t["key"]: t for t in compute(session, study)["extra"]["tables"]}["sts_pair_ratings"]
    assert (
        ratings["title"] == "Rating per agent from side-by-side judgements (Davidson, log-odds), controlled for length"
    )
    assert "Length effect: a judge adds" in ratings["note"] and "(steps)" in ratings["note"]
    assert {r["agent"] for r in ratings["rows"]} == {"expert", "random", "random2"}
