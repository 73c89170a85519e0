"""Navigation side by side (issue 30, "navigation second"): pairs of two speakers' instructions
for the same path uploaded through the API (sides drawn per pair and kept off the page,
reference pairs as gold), judged on the real pages and through the engine, and ranked on the
leaderboard by the core's Davidson fit: checked against a hand-worked case with and without
length control, with the same speakers' single-study SR beside it. SQLite and PostgreSQL."""

from __future__ import annotations

import json
import math
import re
import uuid

import pytest
from sqlalchemy import select

from app.kinds.navigation.environments import import_house
from app.kinds.navigation.house import sample_paths
from app.leaderboards import adaptive
from app.leaderboards.service import compute
from app.studies import assignment, services
from app.studies.models import Annotation, Item, Participant, Study
from tests.conftest import consent_version_of, login, make_user
from tests.integration.test_navigation_leaderboard import coop_file, house

LONG, SHORT = " ".join(["walk"] * 30), " ".join(["turn"] * 10)  # 30 and 10 words


def pair_lines(h, *, with_reference: bool = True) -> list[dict]:
    """Seven paths, "toy" against "human" on each. The hand-worked plan (`PLAN`): toy's
    instruction is the longer (30 words to 10) on paths 0-4 and the shorter on 5-6."""
    paths = sample_paths(h, 9, rng=11)
    out = []
    for k, p in enumerate(paths[:7]):
        toy, human = (LONG, SHORT) if k < 5 else (SHORT, LONG)
        out.append(
            {
                "scan": h.scan,
                "path": list(p.path),
                "heading": p.heading,
                "path_id": 50 + k,
                "first": {"speaker": "toy", "instruction": toy},
                "second": {"speaker": "human", "instruction": human},
            }
        )
    if with_reference:  # a human instruction beside one for another path: the first is better
        p = paths[8]
        out.append(
            {
                "scan": h.scan,
                "path": list(p.path),
                "heading": p.heading,
                "path_id": 99,
                "first": {"speaker": "human", "instruction": "Walk to the kitchen and stop by the sink."},
                "second": {"speaker": "other", "instruction": "Go up the stairs and wait at the top."},
                "better": "first",
            }
        )
    return out


def jsonl(lines: list[dict]) -> bytes:
    return "\n".join(json.dumps(x) for x in lines).encode()


# Per path (0-6): who wins. toy longer on 0-4 and wins 4 of them; shorter on 5-6, wins 1.
PLAN = ["toy", "toy", "toy", "toy", "human", "toy", "human"]


def _side_of(item: Item, speaker: str) -> str:
    return next(s for s in ("a", "b") if item.reference[s]["agent"] == speaker)


def _api(client, csrf):
    def call(method, url, **kw):
        return client.request(method, url, headers={"X-CSRF-Token": csrf}, **kw)

    return call


def _create(api, lines: list[dict], **options) -> dict:
    r = api(
        "POST",
        "/api/v1/studies",
        data={
            "kind": "navigation",
            "format": "pairs",
            "settings": json.dumps(
                {"title": "Nav pairs", "bundle_size": 4, "annotations_per_item": 1, "gold_rate": 0.25}
            ),
            **{k: str(v) for k, v in options.items()},
        },
        files={"file": ("pairs.jsonl", jsonl(lines), "application/jsonl")},
    )
    assert r.status_code == 201, r.text
    return r.json()


def judge_everything(session, study: Study, answer_for) -> None:
    """Fresh judges through the engine until no item is left, each answer `answer_for(item)`."""
    n = 0
    while True:
        n += 1
        bundle = assignment.enter(session, study, "prolific", f"J{study.id}-{n:03d}")
        a = assignment.next_item(session, study, bundle.id)
        if a is None:
            return
        while a is not None:
            item = session.get(Item, a.item_id)
            assignment.submit(session, study, bundle.id, a.id, answer_for(item), uuid.uuid4().hex)
            a = assignment.next_item(session, study, bundle.id)


def _winner(item: Item) -> str:
    if item.is_gold:
        return item.reference["better"]
    return _side_of(item, PLAN[int(item.reference["path"].rsplit(":", 1)[1]) - 50])


def test_a_navigation_pair_study_is_judged_and_ranked_as_worked_by_hand(client, session):
    h = house()
    import_house(session, h)
    owner = make_user(session, "researcher")
    api = _api(client, login(client, owner))
    # The same speakers followed one at a time: their SR is shown beside the pairwise ratings.
    single = services.create_study(
        session,
        owner,
        "navigation",
        services.StudySettings(title="Single", annotations_per_item=1, gold_rate=0.0),
        coop_file(h, n=6, model="toy"),
        "coop",
        {"speaker": "toy"},
    )
    services.set_state(session, single, "live", owner)
    n = 0
    while (bundle := assignment.enter(session, single, "prolific", f"F{n}")) and (
        a := assignment.next_item(session, single, bundle.id)
    ):
        n += 1
        while a is not None:
            item = session.get(Item, a.item_id)
            # Followers of the human instructions walk the path; of toy's, stay at the start.
            walked = item.reference["path"] if item.category == "human" else item.reference["path"][:1]
            assignment.submit(
                session, single, bundle.id, a.id, {"path": walked, "trace": [], "rating": 3}, uuid.uuid4().hex
            )
            a = assignment.next_item(session, single, bundle.id)

    out = _create(api, pair_lines(h), follow=0)  # read side by side (the default follows: below)
    study = session.get(Study, out["id"])
    assert study.kind_settings == {"mode": "pairs", "control_length": False, "follow": False}
    items = list(session.scalars(select(Item).where(Item.study_id == study.id).order_by(Item.id)))
    pairs, gold = [i for i in items if not i.is_gold], [i for i in items if i.is_gold]
    assert len(pairs) == 7 and len(gold) == 1
    assert {_side_of(i, "toy") for i in pairs} == {"a", "b"}  # sides drawn per pair
    assert gold[0].reference["better"] == _side_of(gold[0], "human")
    for i in pairs:  # a side's length: its instruction's words
        side = _side_of(i, "toy")
        assert i.payload[f"instruction_{side}"].split()[0] in ("walk", "turn")
        assert i.reference[side]["length"] == len(i.payload[f"instruction_{side}"].split())
    # A pair study can be allocated adaptively (which pair next: the core's rule).
    assert api("PATCH", f"/api/v1/studies/{study.id}", json={"adaptive": True}).status_code == 200
    services.set_state(session, study, "live", owner)
    adaptive.refresh_study(session, study)
    session.expire_all()
    # Before any judgement every pair is open: all on the top level, paths in a fixed order.
    assert all(100 <= session.get(Item, i.id).priority < 101 for i in pairs)

    # One judge on the real pages: no speaker's name reaches the page; a bad verdict is refused.
    client.cookies.clear()
    page = client.get(f"/s/{study.slug}?PROLIFIC_PID=NAVPAIR1&STUDY_ID=S&SESSION_ID=Q")
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
    page = client.post(
        f"/task/{study.slug}/consent", data={"csrf_token": csrf, "consent_version": consent_version_of(page.text)}
    )
    on_pages = 0
    while 'id="nav-pair"' in page.text:
        assert "toy" not in page.text and "human" not in page.text and "other" not in page.text
        assert "Pair " in page.text and "<kbd>1</kbd> A better" in page.text
        assignment_id = int(re.search(r'name="assignment_id" value="(\d+)"', page.text).group(1))
        form = {
            "csrf_token": re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1),
            "assignment_id": str(assignment_id),
            "idempotency_key": re.search(r'name="idempotency_key" value="([^"]+)"', page.text).group(1),
        }
        session.expire_all()
        from app.studies.models import Assignment

        item = session.get(Item, session.get(Assignment, assignment_id).item_id)
        assert item.payload["instruction_a"] in page.text and item.payload["instruction_b"] in page.text
        if on_pages == 0:
            refused = client.post(f"/task/{study.slug}/answer", data={**form, "winner": "both"}, follow_redirects=True)
            assert refused.status_code in (200, 422) and "Not sent" in refused.text and "winner" in refused.text
        answer = {"winner": _winner(item), "reason": "  names the landmarks  "}
        page = client.post(f"/task/{study.slug}/answer", data={**form, **answer}, follow_redirects=True)
        assert page.status_code == 200, page.text
        on_pages += 1
    assert on_pages >= 1
    stored = session.scalars(select(Annotation).where(Annotation.study_id == study.id)).first()
    assert stored.response["reason"] == "names the landmarks"
    judge_everything(session, study, lambda item: {"winner": _winner(item)})

    session.expire_all()
    board = compute(session, study)
    tables = {t["key"]: t for t in board["extra"]["tables"]}
    rows = {r["agent"]: r for r in tables["navigation_pair_ratings"]["rows"]}
    # Davidson by hand, no ties: toy won 5 of 7, so e^d = 5/2 and the ratings are +-ln(5/2)/2.
    assert rows["toy"]["rating"]["mean"] == pytest.approx(math.log(5 / 2) / 2, abs=1e-4)
    assert rows["human"]["rating"]["mean"] == pytest.approx(-math.log(5 / 2) / 2, abs=1e-4)
    assert rows["toy"]["judgements"] == 7 and rows["toy"]["rating"]["unit"] == "path"
    assert rows["toy"]["rating"]["units"] == 7
    wins = {r["agent"]: r for r in tables["navigation_pair_wins"]["rows"]}
    assert wins["toy"]["v:human"] == "0.714 (n = 7)"
    # The same speakers' SR in the single study beside it: human 1, toy 0.
    assert rows["human"]["single_sr"]["mean"] == 1.0 and rows["toy"]["single_sr"]["mean"] == 0.0
    assert tables["navigation_pair_correlation"]["rows"][0]["agents"] == 2
    assert [c["label"] for c in tables["navigation_pair_ratings"]["columns"]] == [
        "Speaker",
        "Judgements",
        "Rank (95%)",
        "Rating (log-odds)",
        "Single rank (95%)",
        "Single SR",
    ]
    assert "controlled for length" not in tables["navigation_pair_ratings"]["title"]
    from tests.integration.test_sections_shapes import assert_shown

    assert_shown(tables)
    # The ratings lead the leaderboard page.
    login(client, owner)
    html = client.get(f"/studies/{study.id}/leaderboard").text
    first = re.search(r'<section class="card[^"]*" id="([^"]+)"', html)
    assert first.group(1) == "navigation_pair_ratings"
    assert "Rating per speaker from side-by-side judgements (Davidson, log-odds)" in html
    assert client.get(f"/studies/{study.id}").status_code == 200
    # The admin's replay of a judge: the pick, no map.
    login(client, make_user(session, "admin"))
    judge = session.scalars(select(Participant.id).where(Participant.study_id == study.id)).first()
    replay = client.get(f"/admin/studies/{study.id}/participants/{judge}")
    assert replay.status_code == 200 and "picked\n    <strong>" in replay.text and "(toy)" in replay.text
    # The reference pair measured the judges: every one picked the better side, and was approved.
    gold_scores = session.scalars(
        select(Annotation.score).where(Annotation.study_id == study.id, Annotation.is_gold.is_(True))
    ).all()
    assert gold_scores and all(s == 1.0 for s in gold_scores)
    judged = session.scalars(select(Participant).where(Participant.study_id == study.id)).all()
    assert any(p.status == "approved" for p in judged)


def test_length_control_takes_the_judges_taste_for_words_out(client, session):
    # The plan as above, with length control: toy was the longer (30 words to 10: normalised
    # difference +0.5) on 5 paths and won 4, the shorter on 2 and won 1. x = +-1 once divided by
    # its root mean square (0.5): d + gamma = ln 4, d - gamma = 0, so d = gamma = ln 2.
    h = house()
    import_house(session, h)
    owner = make_user(session, "researcher")
    api = _api(client, login(client, owner))
    out = _create(api, pair_lines(h, with_reference=False), control_length=1, follow=0)
    study = session.get(Study, out["id"])
    assert study.kind_settings["control_length"] is True
    services.set_state(session, study, "live", owner)
    judge_everything(session, study, lambda item: {"winner": _winner(item)})
    session.expire_all()
    tables = {t["key"]: t for t in compute(session, study)["extra"]["tables"]}
    ratings = tables["navigation_pair_ratings"]
    rows = {r["agent"]: r for r in ratings["rows"]}
    assert rows["toy"]["rating"]["mean"] == pytest.approx(math.log(2) / 2, abs=1e-4)
    assert ratings["title"].endswith("controlled for length")
    assert "Length effect: a judge adds 0.69" in ratings["note"] and "longer by 0.500" in ratings["note"]
    # The API's leaderboard says the same.
    got = api("GET", f"/api/v1/studies/{study.id}/leaderboard").json()
    shown = {t["key"]: t for t in got["extra"]["tables"]}["navigation_pair_ratings"]
    assert {r["agent"]: r for r in shown["rows"]}["toy"]["rating"]["mean"] == pytest.approx(math.log(2) / 2, abs=1e-4)


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"better": "both"}, "better", 'must be "first" or "second"'),
        ({"second": {"speaker": "toy", "instruction": "x"}}, "second.speaker", "the two sides must be different"),
        ({"first": {"speaker": "toy"}}, "first.instruction", "must be a text"),
        ({"path": ["nowhere"]}, "path", "'nowhere' is not in scan"),
        ({"colour": 1}, "colour", "unknown field"),
    ],
)
def test_a_bad_pair_line_is_refused_with_its_line_and_field(client, session, change, field, message):
    h = house()
    import_house(session, h)
    api = _api(client, login(client, make_user(session, "researcher")))
    lines = pair_lines(h, with_reference=False)
    lines[0] = {**lines[0], **change}
    r = api(
        "POST",
        "/api/v1/studies",
        data={"kind": "navigation", "format": "pairs", "settings": json.dumps({"title": "Bad"})},
        files={"file": ("pairs.jsonl", jsonl(lines), "application/jsonl")},
    )
    assert 400 <= r.status_code < 500, r.text
    got = r.json()
    assert (got["line"], got["field"]) == (1, field) and message in got["detail"], got


def test_the_new_study_form_offers_pairs_and_length_control(client, session):
    h = house()
    import_house(session, h)
    csrf = login(client, make_user(session, "researcher"))
    page = client.get("/studies/new").text
    assert 'name="navigation.control_length"' in page and 'value="pairs"' in page
    form = {
        "csrf_token": csrf,
        "title": "Form pairs",
        "kind": "navigation",
        "format": "pairs",
        "navigation.control_length": "1",
        "action": "create",
    }
    files = {"file": ("pairs.jsonl", jsonl(pair_lines(h)))}
    r = client.post("/studies/new", data=form, files=files, follow_redirects=False)
    assert r.status_code == 303, r.text
    study = session.scalar(select(Study).where(Study.title == "Form pairs"))
    # Following each instruction is the default (the paper's protocol); the form can turn it off.
    assert study.kind_settings == {"mode": "pairs", "control_length": True, "follow": True}
    assert 'name="navigation.follow"' in page
    read = {**form, "title": "Read", "navigation.follow": "0"}
    r = client.post("/studies/new", data=read, files=files, follow_redirects=False)
    assert r.status_code == 303, r.text
    assert session.scalar(select(Study).where(Study.title == "Read")).kind_settings["follow"] is False
    off = {**form, "title": "Off"}
    del off["navigation.control_length"]
    r = client.post("/studies/new", data=off, files=files, follow_redirects=False)
    assert r.status_code == 303, r.text
    assert session.scalar(select(Study).where(Study.title == "Off")).kind_settings["control_length"] is False


def _followed(item: Item, walks: dict[str, list[str]], order=("a", "b")) -> dict:
    """A follow-mode answer: each side's walk (`walks[speaker]`), stopped at its end."""
    follows = {}
    for side in ("a", "b"):
        path = walks[item.reference[side]["agent"]]
        follows[side] = {"path": path, "trace": [], "events": [{"type": "stop", "step": len(path) - 1, "t": 1000.0}]}
    return {"winner": _winner(item), "order": json.dumps(list(order)), "follows": json.dumps(follows)}


def test_a_followed_pair_study_stores_both_walks_and_ranks_their_success(client, session):
    # The default: the judge follows both instructions in the viewer, then picks. Followers of
    # human's instructions walk the route; of toy's, they stay at the start (or, on the
    # reference pair, of "other"'s). The pairwise ratings are as read (toy 5 of 7), and beside
    # them each speaker's followed SR: human 7 of 7, toy 0 of 7.
    h = house()
    import_house(session, h)
    owner = make_user(session, "researcher")
    api = _api(client, login(client, owner))
    out = _create(api, pair_lines(h))
    study = session.get(Study, out["id"])
    assert study.kind_settings == {"mode": "pairs", "control_length": False, "follow": True}
    # The researcher's preview shows the follow page (1 first: no assignment to draw for).
    preview = client.get(f"/studies/{study.id}/preview?n=1")
    assert preview.status_code == 200 and 'data-order="a,b"' in preview.text and 'id="nav-view"' in preview.text
    services.set_state(session, study, "live", owner)

    # On the real page: the viewer's start (never the route), both instructions, no speaker.
    client.cookies.clear()
    page = client.get(f"/s/{study.slug}?PROLIFIC_PID=NAVFOLLOW1&STUDY_ID=S&SESSION_ID=Q")
    assert "Keyboard: Following a pair: arrows look around" in page.text  # the consent page says how
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
    page = client.post(
        f"/task/{study.slug}/consent", data={"csrf_token": csrf, "consent_version": consent_version_of(page.text)}
    )
    assert 'id="nav-follow-pair"' in page.text and 'id="nav-view"' in page.text
    assignment_id = int(re.search(r'name="assignment_id" value="(\d+)"', page.text).group(1))
    from app.studies.models import Assignment

    item = session.get(Item, session.get(Assignment, assignment_id).item_id)
    assert f'data-start="{item.payload["start"]}"' in page.text
    assert "toy" not in page.text and "human" not in page.text
    first = re.search(r'data-order="(\w),(\w)"', page.text).groups()
    assert sorted(first) == ["a", "b"]
    form = {
        "csrf_token": re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1),
        "assignment_id": str(assignment_id),
        "idempotency_key": re.search(r'name="idempotency_key" value="([^"]+)"', page.text).group(1),
    }
    route = item.reference["route"]
    walks = {"human": route, "toy": route[:1], "other": route[:1]}
    # A verdict without the walks, or a walk that does not start at the start, is refused.
    for bad, field in (
        ({"winner": "a"}, "follows"),
        (_followed(item, {k: route[1:] for k in walks}), "follows.a.path"),
    ):
        refused = client.post(f"/task/{study.slug}/answer", data={**form, **bad}, follow_redirects=True)
        assert "Not sent" in refused.text and field in refused.text, refused.text
    page = client.post(
        f"/task/{study.slug}/answer", data={**form, **_followed(item, walks, first)}, follow_redirects=True
    )
    assert page.status_code == 200
    stored = session.scalar(select(Annotation).where(Annotation.assignment_id == assignment_id))
    assert stored.response["order"] == list(first)
    human = _side_of(item, "human") if not item.is_gold else item.reference["better"]
    assert stored.response["follows"][human]["path"] == route
    assert stored.scores[human]["success"] is True and stored.scores[human]["ndtw"] == 1.0

    def answer(item):
        route = item.reference["route"]
        return _followed(item, {"human": route, "toy": route[:1], "other": route[:1]})

    while 'id="nav-follow-pair"' in page.text:  # the rest of this judge's task on the pages
        assignment_id = int(re.search(r'name="assignment_id" value="(\d+)"', page.text).group(1))
        session.expire_all()
        item = session.get(Item, session.get(Assignment, assignment_id).item_id)
        form = {
            "csrf_token": re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1),
            "assignment_id": str(assignment_id),
            "idempotency_key": re.search(r'name="idempotency_key" value="([^"]+)"', page.text).group(1),
        }
        page = client.post(f"/task/{study.slug}/answer", data={**form, **answer(item)}, follow_redirects=True)
        assert page.status_code == 200
    judge_everything(session, study, answer)
    session.expire_all()
    tables = {t["key"]: t for t in compute(session, study)["extra"]["tables"]}
    assert list(tables)[:2] == ["navigation_pair_ratings", "navigation_pair_followed"]
    rows = {r["agent"]: r for r in tables["navigation_pair_ratings"]["rows"]}
    assert rows["toy"]["rating"]["mean"] == pytest.approx(math.log(5 / 2) / 2, abs=1e-4)
    followed = {r["agent"]: r for r in tables["navigation_pair_followed"]["rows"]}
    assert set(followed) == {"human", "toy"}  # the reference pair measures judges only
    assert followed["human"]["follows"] == 7 and followed["toy"]["follows"] == 7
    assert followed["human"]["success"]["mean"] == 1.0 and followed["toy"]["success"]["mean"] == 0.0
    assert followed["human"]["ndtw"]["mean"] == 1.0 > followed["toy"]["ndtw"]["mean"]
    assert followed["human"]["success"]["low"] < 1.0  # an interval over 7 paths
    assert followed["human"]["rank"] == "1" and followed["toy"]["rank"] == "2"
    from tests.integration.test_sections_shapes import assert_shown

    assert_shown(tables)
    # The admin's replay of a judge: each followed walk on a map, and how it ended.
    login(client, make_user(session, "admin"))
    judge = session.scalars(select(Participant.id).where(Participant.study_id == study.id)).first()
    replay = client.get(f"/admin/studies/{study.id}/participants/{judge}")
    assert replay.status_code == 200 and "followed: reached the goal" in replay.text
    assert "stopped" in replay.text and "<svg" in replay.text
