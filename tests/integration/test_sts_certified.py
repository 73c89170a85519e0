"""Certified STS figures (issue 25) on both backends: the leaderboard's STS section (what the
page and the API show) carries exactly the numbers `proctor sts score --json` prints for the
same annotations, corrected share and time to completion included; and a scenario whose
takeover point was moved after mining is no longer counted under the mining rule's tag."""

from __future__ import annotations

import json
import math

from click.testing import CliRunner
from sqlalchemy import select

from app import jobs
from app.kinds import get_kind
from app.kinds.sts.cli import sts
from app.kinds.sts.leaderboard import corrected_cell, estimate, markers, ttc_cell
from app.kinds.sts.models import Scenario
from app.studies import services
from app.studies.models import Study
from tests.conftest import login, make_user
from tests.integration.test_sts import _truth
from tests.integration.test_sts_analysis import _mark_all, _sts_study, _three_agents
from tests.integration.test_sts_suites import _generate, _json, _mine, _recordings, _suite


def _export(marks) -> str:
    """The section's markers as the scorer's JSONL (the format `proctor sts score` reads)."""
    return "\n".join(
        json.dumps(
            {
                "annotator": m.annotator,
                "agent": m.agent,
                "scenario": m.scenario,
                "continuation": m.continuation,
                "category": m.category,
                "marker": m.marker,
                "step": m.step,
                "reference": m.reference,
                "label": m.label,
            }
        )
        for m in marks
    )


def test_the_section_shows_what_the_scorer_prints(client, session, tmp_path):
    owner = make_user(session, "researcher")
    study = _sts_study(session, owner, _three_agents())
    # People mark what the simulator says, except every third reference episode and every
    # fourth of the random agent's continuations, which they mark wrongly: sensitivity and
    # specificity fall below 1 and the correction bites. The expert's are all marked right.
    seen = {"gold": 0, "random": 0}

    def marker_of(item):
        truth, step = _truth(item)
        who = "gold" if item.is_gold else item.reference["agent"]
        if who in seen:
            seen[who] += 1
            if seen[who] % (3 if who == "gold" else 4) == 0:
                return ("failure" if truth == "success" else "success"), step
        return truth, step

    _mark_all(session, study, marker_of)
    session.expire_all()
    section = get_kind("sts").extra_leaderboard(session, study)
    tables = {t["key"]: t for t in section["tables"]}
    path = tmp_path / "annotations.jsonl"
    marks, _, _ = markers(session, study)
    path.write_text(_export(marks))
    out = CliRunner().invoke(sts, ["score", "--annotations", str(path), "--json"])
    assert out.exit_code == 0, out.output
    scored = json.loads(out.output)
    rows = {r["agent"]: r for r in tables["sts_agents"]["rows"]}
    assert set(rows) == set(scored["agents"]) == {"expert", "random", "copycat"}
    # Each scenario's difficulty: one minus the mean over the agents of their success share
    # there, as the scorer prints the shares; the hardest first.
    for r in tables["sts_scenarios"]["rows"]:
        shares = [
            a["per_scenario"][r["scenario"]] for a in scored["agents"].values() if r["scenario"] in a["per_scenario"]
        ]
        assert math.isclose(r["difficulty"], 1 - sum(shares) / len(shares)) and 0 <= r["difficulty"] <= 1
    ref = scored["reference"]
    assert ref["n_success"] and ref["n_failure"] and ref["sensitivity"] + ref["specificity"] > 1
    assert (ref["sensitivity"], ref["specificity"]) != (1.0, 1.0)
    for agent, a in scored["agents"].items():
        row = rows[agent]
        # The section's estimate adds the scenarios its interval resamples (units, unit).
        assert row["success"] == {**estimate(a), "units": len(a["per_scenario"]), "unit": "scenario"}
        assert set(row["success"]) >= {"mean", "low", "high", "n", "method"}
        assert (row["n"], row["se"]) == (a["n"], a["se"]) and row["success"]["low"] < row["success"]["high"]
        assert {k: v for k, v in row["corrected_share"].items() if k not in ("units", "unit")} == corrected_cell(
            a["corrected"]
        ) and row["corrected"] == a["corrected"]["mean"]
        if isinstance(row["corrected_share"], dict):  # its interval resamples the same scenarios
            assert (row["corrected_share"]["units"], row["corrected_share"]["unit"]) == (
                len(a["per_scenario"]),
                "scenario",
            )
        assert row["ttc"] == a["ttc_median"] and row["ttc_interval"] == ttc_cell(a["ttc"])
        cats = next(r for r in tables["sts_categories"]["rows"] if r["agent"] == agent)
        assert {
            k[2:]: {f: x for f, x in v.items() if f not in ("units", "unit")}
            for k, v in cats.items()
            if k.startswith("g:")
        } == {c: estimate(e) for c, e in a["per_category"].items()}
    # The expert's continuations all succeed: its Wilson interval is not [1, 1].
    expert = rows["expert"]["success"]
    assert expert["mean"] == expert["high"] == 1.0 and expert["low"] < 1.0
    assert "Wilson" in expert["method"] and "Rogan-Gladen" in rows["random"]["corrected_share"]["method"]
    # Ranks: the agents' shares over the scenarios all three played, rank intervals from the
    # core (fewer than 5 shared scenarios rank nobody: "1-3" for all).
    shared = set.intersection(*(set(a["per_scenario"]) for a in scored["agents"].values()))
    from app.leaderboards import stats as core

    want = core.rank_intervals(
        {a: [v["per_scenario"][sc] for sc in sorted(shared)] for a, v in scored["agents"].items()}
    )
    assert {a: r["rank"] for a, r in rows.items()} == {a: core.rank_label(i) for a, i in want.items()}
    # The API's leaderboard carries the same section (the page renders it).
    login(client, owner)
    api = client.get(f"/api/v1/studies/{study.id}/leaderboard").json()
    api_tables = {t["key"]: t for t in api["extra"]["tables"]}
    assert api_tables["sts_agents"]["rows"] == json.loads(json.dumps(tables["sts_agents"]["rows"]))
    assert api_tables["sts_categories"]["rows"] == json.loads(json.dumps(tables["sts_categories"]["rows"]))
    page = client.get(f"/studies/{study.id}/leaderboard")
    assert page.status_code == 200 and "Corrected" in page.text
    # The table says the same.
    table = CliRunner().invoke(sts, ["score", "--annotations", str(path)]).output
    assert "95% interval" in table and "corrected" in table


def test_a_moved_takeover_leaves_the_mining_rules_column(client, session):
    owner = make_user(session, "researcher")
    api = _json(client, login(client, owner))
    _recordings(api, seeds=[1, 2])
    suite = _suite(api)
    assert _mine(api, suite, 1, rule="first step", tags=["small"]).status_code == 201
    scenarios = list(session.scalars(select(Scenario).where(Scenario.suite_id == suite).order_by(Scenario.id)))
    assert all("rule:first step" in s.tags for s in scenarios)
    moved = scenarios[0]
    r = api("PATCH", f"/api/v1/sts/scenarios/{moved.id}", {"takeover": 1})
    assert r.status_code == 200, r.text
    session.expire_all()
    assert "rule:first step" in session.get(Scenario, moved.id).tags  # the tag stays on it
    assert api("POST", f"/api/v1/sts/suites/{suite}/versions/1/publish").status_code == 200
    _generate(api, suite, 1, "expert", c=3)
    assert jobs.run_queued_once() == 1
    r = api(
        "POST",
        f"/api/v1/sts/suites/{suite}/versions/1/study",
        {"title": "Moved", "agents": ["expert"], "bundle_size": 6, "gold_rate": 0.0, "annotations_per_item": 1},
    )
    assert r.status_code == 201, r.text
    study = session.get(Study, r.json()["study"])
    services.set_state(session, study, "live", owner)
    _mark_all(session, study)
    session.expire_all()
    tables = {t["key"]: t for t in get_kind("sts").extra_leaderboard(session, study)["tables"]}
    (row,) = tables["sts_tags"]["rows"]
    # Three continuations of each scenario: "small" holds both, the rule's tag only the one
    # still taken over at the first step.
    assert row["g:small"]["n"] == 6
    assert row["g:rule:first step"]["n"] == 3
    assert row["g:rule:first step"]["note"] == "too few: n = 3"


def test_a_study_with_only_reference_episodes_marked_yet_has_no_agent_shares(session):
    """Early in a study people may have marked only reference episodes (the others' workers
    rejected, here): the single-continuation shares a side-by-side study shows beside its
    ratings are empty, not a crash."""
    from sqlalchemy import update

    from app.kinds.sts.leaderboard import _single_shares
    from app.studies.models import Annotation, Item

    owner = make_user(session, "researcher")
    study = _sts_study(session, owner, _three_agents())
    _mark_all(session, study)
    agents_items = select(Item.id).where(Item.study_id == study.id, Item.is_gold.is_(False))
    session.execute(update(Annotation).where(Annotation.item_id.in_(agents_items)).values(excluded=True))
    session.commit()
    session.expire_all()
    marks, _, _ = markers(session, study)
    assert marks and all(m.reference for m in marks)
    assert _single_shares(session, study) == {}
