"""Model executors as the Hexagons kind's automatic judge (issue 28): people execute some of a
study's procedures through the crowd engine, two model executors' boards are imported (one on
every procedure, one on half), and the leaderboard JSON's "People and the model executors
together" table shows, over every procedure and per instructor, people's board F1 on the
procedures they executed, the executors' on all, their agreement, the PPI++ estimate with what
it is worth and how many procedures people must execute for ±0.05: each recomputed here from
the stored rows (annotations' and agent outputs' scores), PPI++ and the plan through ppi-python
itself. Before any executor there is no judge and no table."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import scipy.stats
from ppi_py import ppi_mean_ci, ppi_mean_pointestimate
from ppi_py.ppi_power_analysis import ppi_mean_power
from sqlalchemy import select

from app.agents.models import AgentOutput
from app.studies import assignment, services
from app.studies.models import Annotation, Item
from tests.conftest import login, make_user

pytestmark = pytest.mark.usefixtures("hexagons_kind")  # tests/conftest.py

BLANK = [0] * 180
ONE = [4] + [0] * 179
TWO = [4, 5] + [0] * 178
N = 40


def _line(index: int) -> str:
    return json.dumps(
        {
            "index": index,
            "annotation_round": 1,
            "category": "simple" if index % 2 else "symmetry",
            "image_id": f"P{index}",
            "instructor_id": "A7" if index % 4 < 2 else "B3",
            "number_of_drawing_steps": 2,
            "agreement_tags": ["A", "A"],
            "agreement_scores": [[1, 1, 1]] * 2,
            "drawing_procedure": [[0, "NONE", BLANK], [1, "tile 0 red", ONE], [2, "tile 1 blue", TWO]],
        }
    )


def _person(index: int) -> list[dict]:
    """A person's execution: nothing at all on every fourth procedure (board F1 0), step 2 left
    undone on every third (board F1 (1 + 2/3) / 2), else exact (1)."""
    if index % 4 == 0:
        return [{"board": BLANK, "actions": []}, {"board": BLANK, "actions": []}]
    if index % 3 == 0:
        return [{"board": ONE, "actions": [[0, 4, 500]]}, {"board": ONE, "actions": []}]
    return [{"board": ONE, "actions": [[0, 4, 500]]}, {"board": TWO, "actions": [[1, 5, 700]]}]


def _execute_some(session, study, limit: int) -> None:
    done, w = 0, 0
    while done < limit:
        bundle = assignment.enter(session, study, "prolific", f"EXEC{w:03d}")
        w += 1
        a = assignment.next_item(session, study, bundle.id)
        while a is not None and done < limit:
            item = session.get(Item, a.item_id)
            steps = _person(int(item.external_id))
            assignment.submit(session, study, bundle.id, a.id, {"steps": json.dumps(steps)}, f"x-{a.id}")
            done += 1
            a = assignment.next_item(session, study, bundle.id)


def _executor(session, study, owner, name: str, board_of, indices) -> None:
    agent = services.register_agent(session, owner, "hexagons", name, "1")
    lines = [json.dumps({"index": i, "step": k, "board": board_of(i, k)}) for i in indices for k in (1, 2)]
    services.import_agent_outputs(session, study, agent, "\n".join(lines).encode())


def _rough(i: int, k: int) -> list[int]:
    """Fails where people do, and on every seventh procedure besides: paints nothing on every
    fourth and seventh procedure (each step on the gold board before it: board F1 0, then 2/3),
    leaves step 2 undone on every third, else exact."""
    if i % 4 == 0 or i % 7 == 0:
        return BLANK if k == 1 else ONE
    return ONE if k == 1 or i % 3 == 0 else TWO


def _tables(client, study) -> dict:
    got = client.get(f"/api/v1/studies/{study.id}/leaderboard")
    assert got.status_code == 200, got.text
    return {t["key"]: t for t in got.json()["extra"]["tables"]}


def _ppi(human: list[float], judged: list[float], only: list[float]) -> dict | None:
    """PPI++ through ppi-python itself, as the table should show it (None: no interval)."""
    if len(human) < 10 or not only:
        return None
    y, yhat, yhat_u = np.array(human), np.array(judged), np.array(only)
    low, high = (float(v[0]) for v in ppi_mean_ci(y, yhat, yhat_u, alpha=0.05))
    c_low, c_high = (float(v[0]) for v in ppi_mean_ci(y, yhat, yhat_u, alpha=0.05, lam=0))
    mean = float(ppi_mean_pointestimate(y, yhat, yhat_u)[0])
    return {
        "mean": mean,
        "low": max(low, 0.0),
        "high": min(high, 1.0),
        "worth": round(len(y) * ((c_high - c_low) / (high - low)) ** 2, 1),
    }


def _plan(human: list[float], judged: list[float], n_units: int, half: float = 0.05) -> str | dict:
    """How many procedures people must execute for ±half, through ppi-python's power analysis."""
    y, yhat = np.array(human), np.array(judged)
    if len(y) < 10:
        return {"text": "—", "reason": f"{len(y)} procedures judged by people: under 10, no plan"}
    alone = math.ceil((scipy.stats.norm.ppf(0.975) * y.std(ddof=1) / half) ** 2)
    if alone > n_units:
        return {"text": f"all {n_units}", "reason": f"even all give a wider interval than ±{half:g}"}
    plan = ppi_mean_power(y, yhat, cost_Y=1.0, cost_Yhat=1e-9, effective_n=alone, n_max=n_units)
    return f"{min(max(int(plan['n']), 10), n_units)} of {n_units}"


def test_people_and_the_model_executors_together(client, session):
    owner = make_user(session, "researcher")
    study = services.create_study(
        session,
        owner,
        "hexagons",
        services.StudySettings(title="Hex judge", bundle_size=6, gold_rate=0.0, annotations_per_item=1),
        "\n".join(_line(i) for i in range(1, N + 1)).encode(),
        "procedures",
    )
    services.set_state(session, study, "live", owner)
    _execute_some(session, study, 30)
    login(client, owner)
    tables = _tables(client, study)
    assert "hexagons_metrics" in tables and "hexagons_ppi" not in tables  # people only: no judge
    assert "hexagons_ppi_by_category" not in tables

    _executor(session, study, owner, "rough", _rough, range(1, N + 1))
    _executor(session, study, owner, "exact", lambda i, k: ONE if k == 1 else TWO, range(2, N + 1, 2))
    session.expire_all()
    tables = _tables(client, study)
    table = tables["hexagons_ppi"]

    # From the stored rows: each execution's score is its board F1 averaged over the steps.
    items = {i.id: i for i in session.scalars(select(Item).where(Item.study_id == study.id))}
    people: dict[int, list[float]] = {}
    for item_id, score in session.execute(
        select(Annotation.item_id, Annotation.score).where(
            Annotation.study_id == study.id, Annotation.excluded.is_(False)
        )
    ):
        people.setdefault(item_id, []).append(score)
    judges: dict[int, list[float]] = {}
    for item_id, score in session.execute(select(AgentOutput.item_id, AgentOutput.score)):
        judges.setdefault(item_id, []).append(score)
    assert len(people) == 30 and len(judges) == N
    assert sorted(len(v) for v in judges.values()) == [1] * (N // 2) + [2] * (N // 2)
    human = {i: sum(v) / len(v) for i, v in people.items()}
    judge = {i: sum(v) / len(v) for i, v in judges.items()}
    assert len(set(human.values())) == 3 and len(set(judge.values())) >= 4  # spread on both sides

    groups = {"All procedures": list(items)} | {
        who: [i for i, it in items.items() if it.reference["instructor_id"] == who] for who in ("A7", "B3")
    }
    rows = {r["agent"]: r for r in table["rows"]}
    assert list(rows) == list(groups)
    with_interval = 0
    for name, ids in groups.items():
        row = rows[name]
        seen = [i for i in ids if i in human]
        h, j = [human[i] for i in seen], [judge[i] for i in seen]
        only = [judge[i] for i in ids if i not in human]
        assert row["judged"] == len(ids) and row["judge"] == pytest.approx(sum(judge[i] for i in ids) / len(ids))
        assert row["people"]["n"] == len(seen) and row["people"]["mean"] == pytest.approx(sum(h) / len(h))
        assert row["agreement"]["mean"] == pytest.approx(sum(1 - abs(a - b) for a, b in zip(h, j)) / len(h))
        want = _ppi(h, j, only)
        if want is None:
            assert row["ppi"]["text"] == "—" and row["worth"] is None
        else:
            with_interval += 1
            assert row["ppi"]["mean"] == pytest.approx(want["mean"]) and row["ppi"]["n"] == len(ids)
            assert (row["ppi"]["low"], row["ppi"]["high"]) == pytest.approx((want["low"], want["high"]))
            assert row["worth"] == pytest.approx(want["worth"])
        assert row["plan"] == _plan(h, j, len(ids))
    # The judge mostly fails where people fail: its PPI++ interval is worth more procedures
    # than people executed, and narrower than people's own.
    pooled = rows["All procedures"]
    assert pooled["worth"] > pooled["people"]["n"]
    assert pooled["ppi"]["high"] - pooled["ppi"]["low"] < pooled["people"]["high"] - pooled["people"]["low"]
    assert with_interval == 3  # 30 of 40 executed: at least 10 of each instructor's 20
    assert table["columns"][0]["label"] == "Instructor" and {c["key"] for c in table["columns"]} == set(
        rows["All procedures"]
    )
    assert "rough v1" in table["note"] and "exact v1" in table["note"] and "Board F1" in table["title"]

    # Per category: the same figures over each category's procedures.
    by_cat = {r["agent"]: r for r in tables["hexagons_ppi_by_category"]["rows"]}
    assert set(by_cat) == {"simple", "symmetry"}
    for cat, row in by_cat.items():
        ids = [i for i, it in items.items() if it.category == cat]
        assert row["judged"] == len(ids) == N // 2
        assert row["people"]["n"] == sum(i in human for i in ids)
        assert row["judge"] == pytest.approx(sum(judge[i] for i in ids) / len(ids))
