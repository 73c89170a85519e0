"""The STS leaderboard's analyses on both backends (paper 004, sections 3.3-3.4, 5.1 and
appendix A.3): success shares broken down by category, suite version and tag (personal tags
included), Spearman's rank correlation with metrics a researcher imports, the admins' queue
of failed continuations classified with the paper's error types, and the suite page's form
for a study of a published version."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from app import jobs
from app.audit import AuditEntry
from app.kinds.sts.demo import demo_lines
from app.kinds.sts.models import FailureReview, Scenario, ScenarioTag
from app.leaderboards.service import compute
from app.studies import assignment, services
from app.studies.models import Item, Study
from tests.conftest import login, make_user
from tests.integration.test_sts import _truth
from tests.integration.test_sts_suites import _generate, _json, _mine, _published_suite


def _mark_all(session, study, marker_of=None) -> None:
    """Simulated annotators through the engine, each marking what `marker_of(item)` says (by
    default the simulator's own outcome at its step), until no task is left."""
    n = 0
    while True:
        n += 1
        bundle = assignment.enter(session, study, "prolific", f"W{n:03d}")
        a = assignment.next_item(session, study, bundle.id)
        if a is None:
            return
        while a is not None:
            item = session.get(Item, a.item_id)
            marker, step = (marker_of or _truth)(item)
            assignment.submit(session, study, bundle.id, a.id, {"marker": marker, "step": step}, f"k{a.id}")
            a = assignment.next_item(session, study, bundle.id)


def _tables(session, study) -> dict:
    session.expire_all()
    board = compute(session, study)
    return {t["key"]: t for t in board["extra"]["tables"]}, {
        f["title"]: str(f["svg"]) for f in board["extra"]["figures"]
    }


def _share(items) -> float:
    return sum(i.reference["simulator"] == "success" for i in items) / len(items)


def test_shares_break_down_by_category_suite_version_and_tags_personal_ones_included(client, session):
    owner = make_user(session, "researcher")
    api = _json(client, login(client, owner))
    suite, recs = _published_suite(api, seeds=[1, 2])
    # Version 2 adds one scenario taken over later; both versions are published.
    assert api("POST", f"/api/v1/sts/suites/{suite}/versions").status_code == 201
    assert _mine(api, suite, 2, takeover=1, recordings=[recs[1]], tags=["late"]).status_code == 201
    assert api("POST", f"/api/v1/sts/suites/{suite}/versions/2/publish").status_code == 200
    for name in ("expert", "random"):
        _generate(api, suite, 2, name, c=3)
    assert jobs.run_queued_once() == 2
    scenarios = {s.id: s for s in session.scalars(select(Scenario).where(Scenario.suite_id == suite))}
    late = next(s for s in scenarios.values() if "late" in s.tags)
    first = min(s for s in scenarios if s != late.id)
    assert api("POST", f"/api/v1/sts/scenarios/{first}/tags", {"tag": "hard"}).status_code == 200
    # Another researcher's personal tag is theirs alone.
    other = make_user(session, "researcher")
    session.add(ScenarioTag(scenario_id=first, user_id=other.id, tag="theirs"))
    session.commit()
    r = api(
        "POST",
        f"/api/v1/sts/suites/{suite}/versions/2/study",
        {
            "title": "Two versions",
            "agents": ["expert", "random"],
            "bundle_size": 6,
            "gold_rate": 0.0,
            "annotations_per_item": 1,
        },
    )
    assert r.status_code == 201, r.text
    study = session.get(Study, r.json()["study"])
    services.set_state(session, study, "live", owner)
    _mark_all(session, study)

    items = [i for i in session.scalars(select(Item).where(Item.study_id == study.id)) if not i.is_gold]
    tables, figures = _tables(session, study)
    versions = {r["agent"]: r for r in tables["sts_versions"]["rows"]}
    assert [c["label"] for c in tables["sts_versions"]["columns"]] == ["Agent", "v1", "v2"]
    for agent in ("expert", "random"):
        mine = [i for i in items if i.reference["agent"] == agent]
        v1 = [i for i in mine if i.reference["suite_version"] == 1]
        assert (versions[agent]["g:v1"]["n"], versions[agent]["g:v2"]["n"]) == (len(v1), len(mine)) == (6, 9)
        # People marked the simulator's outcomes, so each share is the simulator's.
        assert versions[agent]["g:v1"]["mean"] == pytest.approx(_share(v1))
        assert versions[agent]["g:v2"]["mean"] == pytest.approx(_share(mine))
        tags = {c["key"]: c for c in tables["sts_tags"]["columns"]}
        assert set(tags) == {"agent", "g:late", "g:mine: hard", "g:rule:first step", "g:small"}
        row = next(r for r in tables["sts_tags"]["rows"] if r["agent"] == agent)
        hard = [i for i in mine if i.reference["scenario"] == f"s{first}"]
        assert row["g:mine: hard"]["n"] == 3 and row["g:mine: hard"]["mean"] == pytest.approx(_share(hard))
        assert row["g:late"]["n"] == 3 and row["g:small"]["n"] == 6
        cats = next(r for r in tables["sts_categories"]["rows"] if r["agent"] == agent)
        assert cats["g:go to"]["n"] == 9
    assert versions["expert"]["g:v2"]["mean"] == 1.0
    assert figures["Success share per suite version (95% intervals)"].count("<circle") == 4
    assert figures["Success share per tag (95% intervals)"].count("<circle") == 8


def _three_agents() -> list[dict]:
    """The demo's continuations plus a third agent, "copycat", whose episodes are the expert's."""
    lines = demo_lines()
    copies = [
        {**x, "agent": "copycat", "id": f"{x['scenario']}/copycat/{x['continuation']}"}
        for x in lines
        if x["agent"] == "expert" and not x.get("reference")
    ]
    return lines + copies


def _sts_study(session, owner, lines=None) -> Study:
    from tests.integration.test_sts import _upload

    study = services.create_study(
        session,
        owner,
        "sts",
        services.StudySettings(title="STS", bundle_size=6, gold_rate=0.2, annotations_per_item=1),
        _upload(lines or demo_lines()),
        "continuations",
    )
    services.set_state(session, study, "live", owner)
    return study


def test_imported_metrics_are_correlated_with_the_success_shares(client, session):
    owner = make_user(session, "researcher")
    csrf = login(client, owner)
    study = _sts_study(session, owner, _three_agents())
    _mark_all(session, study)
    url = f"/api/v1/sts/studies/{study.id}/metrics"
    csv = b"agent,offline return,partial\nexpert,3,1\ncopycat,2,\nrandom,1,0.5\n"
    r = client.post(url, files={"file": ("m.csv", csv)}, headers={"X-CSRF-Token": csrf})
    assert r.status_code == 200, r.text
    assert r.json()["agent_metrics"] == {
        "offline return": {"expert": 3.0, "copycat": 2.0, "random": 1.0},
        "partial": {"expert": 1.0, "random": 0.5},
    }
    tables, _ = _tables(session, study)
    rows = {r["metric"]: r for r in tables["sts_correlation"]["rows"]}
    # Shares: expert = copycat = 1 > random, so ranks (2.5, 2.5, 1) against (3, 2, 1): rho = 1.5 / sqrt(3).
    assert rows["offline return"]["agents"] == 3
    assert rows["offline return"]["rho"] == pytest.approx(1.5 / 3**0.5)
    assert 0 < rows["offline return"]["p"] < 1
    assert rows["partial"] == {"metric": "partial", "agents": 2, "rho": None, "p": None}
    assert rows["simulator success rate"]["rho"] == pytest.approx(1.0)

    # Bad files name the line and the column; nothing already imported is lost.
    for data, line, field in (
        (b"name,x\nexpert,1\n", 1, "agent"),
        (b"agent,x\nexpert,1\nrandom,lots\n", 3, "x"),
        (b"agent,x\nexpert,1\nexpert,2\n", 3, "agent"),
        (b"agent,x\nexpert,inf\n", 2, "x"),
    ):
        r = client.post(url, files={"file": ("m.csv", data)}, headers={"X-CSRF-Token": csrf})
        assert r.status_code == 422 and (r.json()["line"], r.json()["field"]) == (line, field), r.text
    session.expire_all()
    assert set(session.get(Study, study.id).kind_settings["agent_metrics"]) == {"offline return", "partial"}
    # The study page lists them and removes one.
    page = client.get(f"/studies/{study.id}").text
    assert 'id="sts-metrics"' in page and "offline return" in page
    r = client.post(
        f"/sts/studies/{study.id}/metrics/delete", data={"name": "partial", "csrf_token": csrf}, follow_redirects=True
    )
    assert "Removed the metric" in r.text
    session.expire_all()
    assert set(session.get(Study, study.id).kind_settings["agent_metrics"]) == {"offline return"}
    # Another researcher's study is not found; a worker has no access.
    other = make_user(session, "researcher")
    client.cookies.clear()
    other_csrf = login(client, other)
    r = client.post(url, files={"file": ("m.csv", csv)}, headers={"X-CSRF-Token": other_csrf})
    assert r.status_code == 404


def test_admins_classify_failed_continuations_with_the_papers_error_types(client, session):
    owner = make_user(session, "researcher")
    study = _sts_study(session, owner)
    # People mark every episode as the simulator says, except one random continuation that
    # succeeded, which they mark a failure: a disputed failure.
    items = {i.external_id: i for i in session.scalars(select(Item).where(Item.study_id == study.id))}
    disputed = next(
        i
        for i in items.values()
        if not i.is_gold and i.reference["agent"] == "random" and i.reference["simulator"] == "success"
    )

    def marker_of(item):
        return ("failure", item.reference["length"]) if item.id == disputed.id else _truth(item)

    _mark_all(session, study, marker_of)
    failed = [
        i for i in items.values() if not i.is_gold and (i.reference["simulator"] == "failure" or i.id == disputed.id)
    ]
    admin = make_user(session, "admin")
    csrf = login(client, admin)
    url = f"/api/v1/sts/studies/{study.id}/failures"
    queue = client.get(url).json()
    assert [f["item_id"] for f in queue["failures"]][0] == disputed.id and queue["failures"][0]["disputed"]
    assert {f["item_id"] for f in queue["failures"]} == {i.id for i in failed}
    assert queue["error_types"]["rigidity"]["source"] == "annotators" and len(queue["error_types"]) == 7

    h = {"X-CSRF-Token": csrf}
    r = client.put(
        f"{url}/{disputed.id}", json={"error_type": "annotation mistake", "note": "it did reach it"}, headers=h
    )
    assert r.status_code == 200 and r.json()["error_type"] == "annotation mistake"
    others = [i for i in failed if i.id != disputed.id]
    for i in others[:3]:
        assert client.put(f"{url}/{i.id}", json={"error_type": "empty"}, headers=h).status_code == 200
    r = client.put(f"{url}/{others[0].id}", json={"error_type": "lazy"}, headers=h)
    assert r.status_code == 422 and r.json()["field"] == "error_type"
    gold = next(i for i in items.values() if i.is_gold)
    assert client.put(f"{url}/{gold.id}", json={"error_type": "empty"}, headers=h).status_code == 404
    tables, _ = _tables(session, study)
    rows = {r["error_type"]: r for r in tables["sts_failure_types"]["rows"]}
    assert set(rows) == {"annotation mistake", "empty"}
    assert (rows["empty"]["episodes"], rows["empty"]["a:random"] + rows["empty"].get("a:expert", 0)) == (3, 3)
    assert rows["annotation mistake"]["share"] == pytest.approx(1 / 4) and rows["annotation mistake"]["a:random"] == 1
    # Clearing one takes it out of the counts; every change is audited with what it was.
    assert client.put(f"{url}/{others[0].id}", json={"error_type": None}, headers=h).json()["error_type"] is None
    assert session.scalar(select(func.count(FailureReview.id))) == 3
    trail = [
        e.detail
        for e in session.scalars(
            select(AuditEntry).where(AuditEntry.action == "sts.failure_review").order_by(AuditEntry.id)
        )
    ]
    assert len(trail) == 5 and trail[-1]["before"] == "empty" and trail[-1]["after"] is None
    # The pages: the queue, one episode with its markers on the timeline, the form.
    page = client.get(f"/sts/studies/{study.id}/failures").text
    assert f'id="failure-{disputed.id}" class="disputed"' in page and "annotation mistake" in page
    page = client.get(f"/sts/studies/{study.id}/failures/{disputed.id}").text
    assert "data-markers=" in page and 'data-review="1"' in page
    r = client.post(
        f"/sts/studies/{study.id}/failures/{disputed.id}",
        follow_redirects=True,
        data={"error_type": "ambiguity", "note": "", "back": "item", "csrf_token": csrf},
    )
    assert "ambiguity." in r.text
    # Researchers, even the study's owner, do not classify.
    client.cookies.clear()
    csrf = login(client, owner)
    assert client.get(url).status_code == 403
    assert (
        client.put(f"{url}/{disputed.id}", json={"error_type": "empty"}, headers={"X-CSRF-Token": csrf}).status_code
        == 403
    )


def test_the_suite_page_makes_a_study_of_a_published_version(client, session):
    owner = make_user(session, "researcher")
    csrf = login(client, owner)
    api = _json(client, csrf)
    suite, _ = _published_suite(api, seeds=[1, 2])
    page = client.get(f"/sts/suites/{suite}").text
    assert 'id="study-form"' not in page and "Generate continuations of version 1 first" in page
    for name in ("expert", "random"):
        _generate(api, suite, 1, name, c=2)
    jobs.run_queued_once()
    page = client.get(f"/sts/suites/{suite}").text
    assert 'id="study-form"' in page
    form = {
        "title": "From the page",
        "continuations": "1",
        "expert_successes": "1",
        "random_failures": "1",
        "bundle_size": "4",
        "gold_rate": "0.25",
        "annotations_per_item": "2",
        "approve_at": "0.9",
        "csrf_token": csrf,
    }
    r = client.post(f"/sts/suites/{suite}/versions/1/study", data={**form, "agents": []}, follow_redirects=True)
    assert "No study made" in r.text and "agents" in r.text
    r = client.post(f"/sts/suites/{suite}/versions/1/study", data={**form, "gold_rate": "lots"}, follow_redirects=True)
    assert "No study made" in r.text and "gold_rate must be a number" in r.text
    assert session.scalar(select(func.count(Study.id))) == 0
    agents = [a["agent_id"] for a in api("GET", f"/api/v1/sts/suites/{suite}/versions/1/agents").json()["agents"]]
    r = client.post(
        f"/sts/suites/{suite}/versions/1/study",
        data={**form, "agents": [str(a) for a in agents]},
        follow_redirects=False,
    )
    assert r.status_code == 303
    study = session.scalar(select(Study))
    assert r.headers["location"] == f"/studies/{study.id}"
    assert (study.title, study.state, study.annotations_per_item, study.kind_settings["approve_at"]) == (
        "From the page",
        "draft",
        2,
        0.9,
    )
    items = list(session.scalars(select(Item).where(Item.study_id == study.id)))
    assert len(items) == 2 * 2 * 1 + 2 and sum(i.is_gold for i in items) == 2
