"""The A3DS reference game as a study: built from a design and the built-in speakers or from
imported captions, the pictures a worker sees, their picks scored, and the leaderboard's
listener accuracy per captioner and per z, metric means and correlations."""

from __future__ import annotations

import json
import uuid

import pytest
from sqlalchemy import func, select

from app.errors import InputError
from app.leaderboards.service import compute
from app.studies import assignment, services
from app.studies.models import Item, Study
from tests.conftest import make_user

DESIGN = {
    "pairs": {"z": {str(z): 2 for z in range(1, 7)}, "named": [{"features": ["shape"], "count": 2}]},
    "speakers": ["literal", "short", "contrastive"],
    "seed": 4,
    "gold": 3,
}


def _study(session, owner, design=DESIGN, fmt="design", data=None, **settings):
    s = services.StudySettings(
        title="Reference game", **{"bundle_size": 5, "gold_rate": 0.0, "annotations_per_item": 1, **settings}
    )
    study = services.create_study(session, owner, "a3ds", s, data or json.dumps(design).encode(), fmt)
    services.set_state(session, study, "live", owner)
    return study


def test_a_design_makes_every_pair_captioned_by_every_speaker(session):
    owner = make_user(session, "researcher")
    study = _study(session, owner)
    items = session.scalars(select(Item).where(Item.study_id == study.id)).all()
    ordinary = [i for i in items if not i.is_gold]
    assert len(ordinary) == 14 * 3 and sum(i.is_gold for i in items) == 3
    by_pair = {}
    for i in ordinary:
        t, d = i.reference["target_id"], i.reference["distractor_id"]
        # The order on screen is recorded: the target sits where the reference says.
        assert i.payload["scenes"][i.reference["target"] - 1] == t
        assert set(i.payload["scenes"]) == {t, d}
        assert i.category == str(i.reference["metrics"]["z"])
        by_pair.setdefault((t, d), set()).add(i.reference["captioner"])
    assert all(v == {"literal", "short", "contrastive"} for v in by_pair.values()) and len(by_pair) == 14
    assert {i.reference["target"] for i in ordinary} == {1, 2}  # both orders occur
    assert sorted({i.category for i in ordinary}) == ["1", "2", "3", "4", "5", "6"]
    for g in (i for i in items if i.is_gold):
        m = g.reference["metrics"]
        assert m["c"] == 1 and m["k"] == 1 and not m["false"]


@pytest.mark.parametrize(
    "bad,field",
    [
        ({"pairs": {"z": {"9": 1}}}, "pairs.z.9"),
        ({"pairs": {"z": {"1": 1}}, "speakers": ["poet"]}, "speakers"),
        ({"pairs": {}}, "pairs"),
        ({"pairs": {"z": {"1": 1}}, "seed": -1}, "seed"),
    ],
)
def test_a_bad_design_names_the_field_and_stores_nothing(session, bad, field):
    owner = make_user(session, "researcher")
    before = session.scalar(select(func.count()).select_from(Study))
    with pytest.raises(InputError) as exc:
        _study(session, owner, design=bad)
    assert exc.value.field == field
    session.rollback()
    assert session.scalar(select(func.count()).select_from(Study)) == before


def test_imported_captions_and_their_refusals(session):
    owner = make_user(session, "researcher")
    lines = [
        {"target": 12500, "distractor": 12501 + k, "caption": c, "captioner": "mine"}
        for k, c in enumerate(["a cylinder nearly in the middle", "a ball", "a tiny cylinder", "a thing"])
    ]
    study = _study(session, owner, fmt="captions", data="\n".join(map(json.dumps, lines)).encode())
    items = {i.external_id: i for i in session.scalars(select(Item).where(Item.study_id == study.id))}
    assert len(items) == 4 and items["2"].reference["metrics"]["false"] == ["shape"]
    assert items["4"].reference["metrics"]["unparsed"] == ["thing"]
    bad = json.dumps(lines[0]) + "\n" + json.dumps({**lines[1], "distractor": 480000})
    with pytest.raises(InputError, match="line 2, field 'distractor': scene id 480000 is out of range"):
        _study(session, owner, fmt="captions", data=bad.encode())


def test_a_captions_file_sent_as_an_agents_outputs_says_captions_make_a_study_of_their_own(session):
    owner = make_user(session, "researcher")
    study = _study(session, owner)
    agent = services.register_agent(session, owner, "a3ds", "my-captioner")
    captions = "\n".join(
        json.dumps({"target": 12500, "distractor": 12501 + k, "caption": c, "captioner": "mine"})
        for k, c in enumerate(["a ball", "a tiny cylinder"])
    )
    with pytest.raises(InputError) as exc:
        services.import_agent_outputs(session, study, agent, captions.encode())
    assert str(exc.value) == (
        "line 1, field 'caption': this is a captions file, not a listener's picks: captions make a study of "
        "their own (a new A3DS study from the captions format), or a captioner agent's run adds its captions "
        "to this study as items (Captioner runs, on the study page); an agent's outputs here are its picks, "
        '{"item": id, "choice": "1" | "2"} a line'
    )


def test_picks_are_scored_and_the_leaderboard_counts_them_per_captioner(session):
    owner = make_user(session, "researcher")
    study = _study(session, owner, bundle_size=50)
    bundle = assignment.enter(session, study, "prolific", "listener-1")
    expected, answered = {}, []
    for _k in range(30):
        a = assignment.next_item(session, study, bundle.id)
        if a is None:
            break
        item = session.get(Item, a.item_id)
        # Right on the contrastive speaker's captions, wrong on the literal's, "can't tell"
        # on the short ones.
        who = item.reference["captioner"]
        choice = {
            "contrastive": str(item.reference["target"]),
            "literal": str(3 - item.reference["target"]),
            "short": "none",
        }.get(who, str(item.reference["target"]))
        ann = assignment.submit(session, study, bundle.id, a.id, {"choice": choice}, uuid.uuid4().hex)
        assert ann.score == (1.0 if choice == str(item.reference["target"]) else 0.0)
        if not item.is_gold:
            expected.setdefault(who, []).append(ann.score)
            answered.append((item.reference["metrics"]["n_mentioned"], ann.score))
    board = compute(session, study)
    tables = {t["key"]: t for t in board["extra"]["tables"]}
    acc = {r["captioner"]: r for r in tables["a3ds_accuracy"]["rows"]}
    for who, scores in expected.items():
        assert acc[who]["answers"] == len(scores)
        assert acc[who]["accuracy"]["mean"] == pytest.approx(sum(scores) / len(scores))
    assert acc["contrastive"]["accuracy"]["mean"] == 1.0 and acc["literal"]["accuracy"]["mean"] == 0.0
    assert acc["short"]["cant_tell"] == len(expected["short"])
    metrics = {r["captioner"]: r for r in tables["a3ds_metrics"]["rows"]}
    assert metrics["literal"]["n_mentioned"] == 6.0 and metrics["contrastive"]["relevance"] == 1.0
    corr = {r["captioner"]: r for r in tables["a3ds_correlation"]["rows"]}
    # Pooled over captioners: each item's features mentioned against its one listener's pick.
    from scipy.stats import spearmanr

    rho, p = spearmanr([m for m, _ in answered], [a for _, a in answered])
    assert corr["all captioners"]["n_mentioned"] == f"{rho:+.3f} (p {float(f'{p:.3g}'):.3g}, n {len(answered)})"
    assert corr["literal"]["n_mentioned"] == "—"  # constant: 6 every time


def test_cant_tell_only_where_the_study_allows_it(session):
    owner = make_user(session, "researcher")
    s = services.StudySettings(title="No can't tell", bundle_size=2, gold_rate=0.0, annotations_per_item=1)
    study = services.create_study(
        session, owner, "a3ds", s, json.dumps({"pairs": {"z": {"1": 2}}}).encode(), "design", {"cant_tell": 0}
    )
    services.set_state(session, study, "live", owner)
    bundle = assignment.enter(session, study, "prolific", "listener-2")
    a = assignment.next_item(session, study, bundle.id)
    with pytest.raises(InputError) as exc:
        assignment.submit(session, study, bundle.id, a.id, {"choice": "none"}, uuid.uuid4().hex)
    assert exc.value.field == "choice"


def test_the_worker_sees_the_pictures_and_nobody_else_without_an_account(session, client):
    owner = make_user(session, "researcher")
    study = _study(session, owner, bundle_size=2)
    session.commit()
    assert client.get("/a3ds/scenes/12500").status_code == 403
    r = client.get(f"/s/{study.slug}", params={"PROLIFIC_PID": "w1", "STUDY_ID": "s", "SESSION_ID": "x"})
    assert r.status_code == 200
    r = client.get("/a3ds/scenes/12500?size=64")
    assert r.status_code == 200 and r.headers["content-type"] == "image/png" and r.content[:4] == b"\x89PNG"
    assert client.get("/a3ds/scenes/12500?size=64").content == r.content
    assert client.get("/a3ds/scenes/0?size=64").status_code == 200  # scenes count from 0
    assert client.get("/a3ds/scenes/480000").status_code == 422
    assert client.get("/a3ds/scenes/12500?size=100").status_code == 422


def test_new_drawings_are_rate_limited_per_session_and_stored_pictures_are_not(session, client, monkeypatch):
    from app.kinds.a3ds import views

    monkeypatch.setattr(views, "DRAWINGS_PER_MINUTE", 3)
    owner = make_user(session, "researcher")
    study = _study(session, owner, bundle_size=2)
    session.commit()
    client.get(f"/s/{study.slug}", params={"PROLIFIC_PID": "w9", "STUDY_ID": "s", "SESSION_ID": "x"})
    for scene in (100, 101, 102):  # three new drawings: allowed
        assert client.get(f"/a3ds/scenes/{scene}?size=64").status_code == 200
    refused = client.get("/a3ds/scenes/103?size=64")
    assert refused.status_code == 429 and "too many" in refused.text
    # A picture already drawn is read from the store, not counted.
    assert client.get("/a3ds/scenes/101?size=64").status_code == 200
