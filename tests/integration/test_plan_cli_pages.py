"""The study plan from the outside (issue 29.1): `proctor plan` through the installed command,
the new-study page's "Plan" fragment and POST /api/v1/plan. The numbers themselves are checked
in tests/unit/test_plan.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.leaderboards import plan
from tests.conftest import login, make_user

ROOT = Path(__file__).resolve().parents[2]
PROCTOR = Path(sys.executable).parent / "proctor"  # the installed command, as a user runs it


def run_proctor(*args: str) -> subprocess.CompletedProcess[str]:
    # This checkout's code first (the command may be installed from another checkout).
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run(
        [str(PROCTOR), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": path},
        timeout=300,
    )


ARGS = ("--scores", "0.8,0.7", "--items", "100", "--error", "0.1", "--payment", "0.05", "--studies", "200")


def test_the_command_prints_the_plan_and_its_json():
    made = plan.make_input(scores="0.8,0.7", items=100, error=0.1, payment=0.05, studies=200)
    expected = plan.run_plan(made)
    ran = run_proctor("plan", *ARGS, "--json")
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == json.loads(json.dumps(expected))  # the same seed, the same plan
    assert expected["cost"] == pytest.approx(100 * 2 * 3 * 0.05)
    ran = run_proctor("plan", *ARGS)
    assert ran.returncode == 0, ran.stderr
    assert f"±{expected['agents'][0]['half_width']:.3f}" in ran.stdout
    assert f"{expected['power']['power']:.1%}" in ran.stdout
    assert "cost 30.00 at 0.05 per annotation" in ran.stdout


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (("--scores", "0.8,1.5", "--items", "100"), "--scores"),
        (("--scores", "0.8,0.7", "--items", "ten"), "--items"),
        (("--scores", "0.8,0.7", "--items", "100", "--error", "0.9"), "--error"),
        (("--scores", "0.8,0.7", "--items", "100", "--judge-agreement", "2"), "--judge-agreement"),
    ],
)
def test_a_bad_option_is_named_without_a_traceback(args, option):
    ran = run_proctor("plan", *args)
    assert ran.returncode != 0
    assert option in ran.stderr
    assert "Traceback" not in ran.stderr + ran.stdout


def test_the_new_study_page_plans_in_a_fragment(app, session):
    researcher = make_user(session, "researcher")
    session.commit()
    with TestClient(app) as client:
        csrf = login(client, researcher)
        page = client.get("/studies/new").text
        assert 'hx-post="/studies/new/plan"' in page
        # Prefilled from the study's settings: the form's annotations per item (3 by default).
        assert re.search(r'name="annotations" type="number" min="1" value="3"', page)
        form = {"csrf_token": csrf, "scores": "0.8, 0.7", "items": "100", "annotations": "3", "error": "0.1"}
        r = client.post("/studies/new/plan", data={**form, "payment": "0.05", "studies": "200"})
        assert r.status_code == 200, r.text
        assert "<html" not in r.text  # a fragment, swapped into the page
        expected = plan.run_plan(plan.make_input(scores="0.8,0.7", items=100, error=0.1, payment=0.05, studies=200))
        cells = re.findall(r'class="half-width">([0-9.]+)<', r.text)
        assert cells == [f"{a['half_width']:.3f}" for a in expected["agents"]]
        assert f"{expected['power']['power']:.1%}" in r.text
        assert "cost 30.00" in r.text
        # A refusal names its field, in the fragment, with a 4xx.
        r = client.post("/studies/new/plan", data={**form, "error": "0.8"})
        assert r.status_code == 422
        assert "field &#39;error&#39;" in r.text or "field 'error'" in r.text
        assert 'id="plan-error"' in r.text


def test_the_api_plans_and_refuses_by_field(app, session):
    from app.auth.security import create_token

    researcher = make_user(session, "researcher")
    token = create_token(session, researcher, "plan")
    session.commit()
    with TestClient(app, headers={"Authorization": f"Bearer {token}"}) as client:
        body = {"scores": [0.8, 0.7], "items": 100, "error": 0.1, "payment": 0.05, "studies": 200}
        r = client.post("/api/v1/plan", json=body)
        assert r.status_code == 200, r.text
        expected = plan.run_plan(plan.make_input(scores="0.8,0.7", items=100, error=0.1, payment=0.05, studies=200))
        assert r.json() == json.loads(json.dumps(expected))
        r = client.post("/api/v1/plan", json={"scores": [0.8], "agents": 3, "items": 100})
        assert r.status_code == 422 and r.json()["field"] == "difference"
        r = client.post("/api/v1/plan", json={**body, "studies": 2000, "scores": [0.5] * 20})
        assert r.status_code == 422 and r.json()["field"] == "studies"


def test_with_no_error_entered_the_plan_takes_past_gold_accuracy(app, session):
    """The researcher's past studies of the form's kind: 1 - the share of their gold answers
    fully right is the workers' error (another researcher's studies do not count)."""
    from sqlalchemy import select

    from app.kinds.tom.demo import simulate_worker
    from app.studies.models import Annotation
    from tests.conftest import create_tom_study

    researcher, other = make_user(session, "researcher"), make_user(session, "researcher")
    mine, theirs = create_tom_study(session, researcher), create_tom_study(session, other)
    for n, acc in enumerate((0.9, 0.7)):
        simulate_worker(session, mine, f"plan-sim-{n}", acc, seed=n)
        simulate_worker(session, theirs, f"plan-other-{n}", 0.3, seed=10 + n)
    session.commit()
    gold = session.scalars(
        select(Annotation.score).where(Annotation.study_id == mine.id, Annotation.is_gold.is_(True))
    ).all()
    right = sum(1 for g in gold if g is not None and g >= 1.0)
    assert len(gold) > 0
    with TestClient(app) as client:
        csrf = login(client, researcher)
        form = {"csrf_token": csrf, "scores": "0.8, 0.7", "items": "50", "studies": "20", "kind": "tom"}
        r = client.post("/studies/new/plan", data=form)
        assert r.status_code == 200, r.text
        assert f"{right} of {len(gold)} gold answers right in 1 past study" in r.text
        assert f"error {1 - right / len(gold):.3f}" in r.text
        r = client.post("/studies/new/plan", data={**form, "error": "0.2"})  # entered: used as is
        assert 'id="plan-past"' not in r.text and "worker error 0.2 " in r.text
