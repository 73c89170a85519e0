"""People and the simulator together on the STS leaderboard (issue 28): the simulator judges
every continuation, people mark some; per agent the section shows people only, the simulator
only, their agreement, and the PPI++ share with what it is worth in people's continuations,
the same numbers stats.ppi_mean gives by hand, and "—" with the reason where people marked
everything."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from app.kinds import get_kind
from app.leaderboards import stats
from app.studies import assignment, services
from app.studies.models import Annotation, Item
from tests.conftest import make_user
from tests.integration.test_sts import _truth, _upload

pytestmark = pytest.mark.backend_agnostic("the section's arithmetic over stored rows")


def _study(session, copies: int):
    from app.kinds.sts.demo import demo_lines

    lines = [
        {**line, "continuation": f"{line['continuation']}-{r}"}
        for line in demo_lines()
        if not line.get("reference")
        for r in range(copies)
    ]
    owner = make_user(session, "researcher")
    study = services.create_study(
        session,
        owner,
        "sts",
        services.StudySettings(title="STS PPI", bundle_size=5, gold_rate=0.0, annotations_per_item=1),
        _upload(lines),
        "continuations",
    )
    services.set_state(session, study, "live", owner)
    return study


def _mark(session, study, limit: int | None) -> None:
    """People mark as the simulator says, but call every random-policy failure a success in one
    continuation of three (so people and simulator disagree), until `limit` items are marked."""
    done, n = 0, 0
    while limit is None or done < limit:
        n += 1
        bundle = assignment.enter(session, study, "prolific", f"P{n:03d}")
        a = assignment.next_item(session, study, bundle.id)
        if a is None:
            return
        while a is not None and (limit is None or done < limit):
            item = session.get(Item, a.item_id)
            marker, step = _truth(item)
            if item.reference["agent"] == "random" and marker == "failure" and item.id % 3 == 0:
                marker = "success"
            assignment.submit(session, study, bundle.id, a.id, {"marker": marker, "step": step}, f"k{a.id}")
            done += 1
            a = assignment.next_item(session, study, bundle.id)


def _table(session, study) -> dict:
    session.expire_all()
    section = get_kind("sts").extra_leaderboard(session, study)
    return next(t for t in section["tables"] if t["key"] == "sts_ppi")


def test_a_sample_marked_by_people_and_the_simulator_everywhere(session):
    study = _study(session, copies=6)
    _mark(session, study, limit=110)
    rows = {r["agent"]: r for r in _table(session, study)["rows"]}
    marked = {
        a.item_id: a.response["marker"]
        for a in session.scalars(select(Annotation).where(Annotation.study_id == study.id))
    }
    for agent, row in rows.items():
        items = session.scalars(select(Item).where(Item.study_id == study.id, Item.is_gold.is_(False))).all()
        mine = [i for i in items if i.reference["agent"] == agent]
        seen = [i for i in mine if i.id in marked]
        human = [1.0 if marked[i.id] == "success" else 0.0 for i in seen]
        judged = [1.0 if i.reference["simulator"] == "success" else 0.0 for i in seen]
        unseen = [1.0 if i.reference["simulator"] == "success" else 0.0 for i in mine if i.id not in marked]
        want = stats.ppi_mean(human, judged, unseen)
        assert row["judged"] == len(mine) and row["people"]["n"] == len(seen)
        assert row["judge"] == pytest.approx(sum(judged + unseen) / len(mine))
        assert row["agreement"]["mean"] == pytest.approx(sum(h == j for h, j in zip(human, judged)) / len(seen))
        if want["low"] is None:
            assert row["ppi"] == {"text": "—", "reason": want["reason"]}
        else:
            assert row["ppi"]["mean"] == pytest.approx(want["mean"]) and row["ppi"]["low"] == pytest.approx(want["low"])
            assert row["ppi"]["n"] == len(mine) and row["worth"] == pytest.approx(round(want["effective_n"], 1))
        plan = stats.ppi_people_needed(human, judged, len(mine), 0.05, unit="continuation")
        if "reason" in plan:
            assert row["plan"] == {"text": "—", "reason": plan["reason"]}
        elif plan["reachable"]:
            assert row["plan"] == f"{plan['people']} of {len(mine)}"
        else:
            assert row["plan"]["text"] == f"all {len(mine)}"
    # The random policy's people disagree with the simulator (agreement below 1) and the
    # simulator's judgement is worth more people than marked it; the expert succeeds everywhere
    # for both, so there is no spread to put an interval on, and the page says so.
    assert rows["random"]["agreement"]["mean"] < 1 and rows["random"]["worth"] > rows["random"]["people"]["n"]
    # The expert's people all say success: no spread to plan an interval for.
    assert rows["expert"]["plan"] == {
        "text": "—",
        "reason": "people gave every continuation the same value: no spread to plan for",
    }
    assert rows["expert"]["ppi"] == {
        "text": "—",
        "reason": "no spread in people's or the judge's values: no interval to estimate",
    }


def test_with_every_continuation_marked_the_simulator_has_nothing_to_add(session):
    study = _study(session, copies=1)
    _mark(session, study, limit=None)
    for row in _table(session, study)["rows"]:
        assert row["ppi"]["text"] == "—" and "the judge has none to add" in row["ppi"]["reason"], row
        assert row["worth"] is None


def _close(a, b) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, float) and isinstance(b, float):
        return a == pytest.approx(b, rel=1e-9, abs=1e-12)
    return a == b


def test_per_category_the_same_figures_on_each_categorys_continuations(session):
    from app.leaderboards.judged import judged_row

    study = _study(session, copies=6)
    _mark(session, study, limit=110)
    session.expire_all()
    section = get_kind("sts").extra_leaderboard(session, study)
    table = next(t for t in section["tables"] if t["key"] == "sts_ppi_by_category")
    items = session.scalars(select(Item).where(Item.study_id == study.id, Item.is_gold.is_(False))).all()
    cats = sorted({i.category for i in items})
    assert len(cats) >= 2, cats  # the demo's levels fall in several categories
    marked = {
        a.item_id: a.response["marker"]
        for a in session.scalars(select(Annotation).where(Annotation.study_id == study.id))
    }
    want = []
    for agent in ("expert", "random"):
        for cat in cats:
            mine = [i for i in items if i.reference["agent"] == agent and i.category == cat]
            if not mine:
                continue
            key = lambda i: (i.reference["agent"], i.reference["scenario"], i.reference["continuation"])  # noqa: E731
            human = {key(i): 1.0 if marked[i.id] == "success" else 0.0 for i in mine if i.id in marked}
            judge = {key(i): 1.0 if i.reference["simulator"] == "success" else 0.0 for i in mine}
            want.append({"agent": f"{agent} · {cat}", **judged_row(human, judge, "continuation")})
    assert len(table["rows"]) == len(want)
    for got, exp in zip(table["rows"], want):  # the same figures, up to the order of a sum
        assert _close(got, exp), (got, exp)
    assert table["title"].endswith(", per category") and table["columns"][0]["label"] == "Agent · category"


def test_identical_continuations_share_one_strip_and_others_do_not(session):
    """The copies above are one episode under several names: they are rendered once and stored
    as one file; continuations that differ keep files of their own."""
    from app.storage import get_store

    study = _study(session, copies=3)
    items = session.scalars(select(Item).where(Item.study_id == study.id)).all()
    by_episode: dict[tuple, set[str]] = {}
    for i in items:
        original = i.reference["continuation"].rsplit("-", 1)[0]
        by_episode.setdefault((i.reference["agent"], i.reference["scenario"], original), set()).add(
            i.payload["frames_key"]
        )
    assert all(len(keys) == 1 for keys in by_episode.values())
    distinct = {next(iter(keys)) for keys in by_episode.values()}
    assert 3 < len(distinct) <= len(by_episode)  # a deterministic agent repeats itself too
    assert all(get_store().exists(k) for k in distinct)
