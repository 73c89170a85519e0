"""Issue 11 end to end, on PostgreSQL with Redis and a real Celery worker process: a researcher
records expert games, mines and publishes a suite, uploads a TorchScript policy (validated by
the worker), has the worker generate continuations for it and for the built-in random agent,
builds a study with reference episodes and takes it live; simulated annotators mark every
continuation with the simulator's own outcome through the crowd API. The leaderboard must then
show, per agent, exactly the success share the test computes itself by replaying the stored
continuations, with agreement 1 and every annotator's balanced accuracy 1."""

from __future__ import annotations

import io
import math
import time
from statistics import median

import pytest
from sqlalchemy import select

from tests.conftest import make_user
from tests.integration.test_celery import JOB_TIMEOUT_S, celery_env, celery_worker  # noqa: F401
from workers.sandbox import sandbox_available

torch = pytest.importorskip("torch")
from torch import Tensor, nn  # noqa: E402

pytestmark = [
    pytest.mark.redis,
    pytest.mark.postgres,
    pytest.mark.skipif(sandbox_available() is not None, reason=f"no model sandbox here: {sandbox_available()}"),
]

# Two families, two expert games each (4-6 steps), taken over one step before the expert's
# success: close enough that both agents succeed on some continuations and fail on others
# (3 and 2 of 8 here; at k = 2 or more random never does within LENGTH).
LEVELS = {"BabyAI-GoToLocal-v0": [2, 3], "BabyAI-PickupLoc-v0": [1, 2]}
K = 1
LENGTH = 8  # the agents' own steps at most
C = 2  # continuations per scenario and agent
ANNOTATORS = 3
VALID = "policy: act() ran on 8 observations from 4 BabyAI levels, alone and batched"


class Walker(nn.Module):
    """docs/kinds/sts-policies.md's example: forward unless a wall or door is ahead, else left."""

    @torch.jit.export
    def vocab_version(self) -> str:
        return "proctor.sts.vocab/1"

    @torch.jit.export
    def act(self, image: Tensor, direction: Tensor, mission: Tensor) -> Tensor:
        ahead = image[:, 3, 5, 0]
        blocked = (ahead == 2) | (ahead == 4)
        logits = torch.zeros(image.shape[0], 7)
        logits[:, 2] = torch.where(blocked, -5.0, 3.0)
        logits[:, 0] = torch.where(blocked, 3.0, 0.0)
        return logits


def _scripted() -> bytes:
    buf = io.BytesIO()
    torch.jit.save(torch.jit.script(Walker()), buf)
    return buf.getvalue()


def _wait(get, done, worker) -> dict:
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while not done(got := get()):
        assert time.monotonic() < deadline, f"still waiting: {got}\n{worker.log()[-4000:]}"
        time.sleep(0.2)
    return got


def _annotate(app, session, slug: str, pid: str) -> int:
    """One crowd worker through the API, marking each item with the simulator's outcome (read
    from the item's stored reference, which the worker's API never shows)."""
    from fastapi.testclient import TestClient

    from app.studies.models import Assignment, Item

    answered = 0
    with TestClient(app) as w:
        r = w.post(
            f"/api/v1/crowd/{slug}/enter", json={"params": {"PROLIFIC_PID": pid, "STUDY_ID": "e2e", "SESSION_ID": pid}}
        )
        assert r.status_code == 200, r.text
        r = w.post(f"/api/v1/crowd/{slug}/consent", json={"consent_version": r.json()["consent_version"]})
        assert r.status_code == 200, r.text
        while (nxt := w.get(f"/api/v1/crowd/{slug}/next").json())["state"] == "item":
            assert "simulator" not in str(nxt["item"]) and "agent" not in nxt["item"]
            gold, ref = session.execute(
                select(Item.is_gold, Item.reference)
                .join(Assignment, Assignment.item_id == Item.id)
                .where(Assignment.id == nxt["assignment_id"])
            ).one()
            marker = ref["simulator"]
            if gold:  # reference episodes are labelled by the simulator too
                assert ref["label"] == marker
            step = ref["success_step"] if marker == "success" else ref["length"]
            r = w.post(
                f"/api/v1/crowd/{slug}/submit",
                json={
                    "assignment_id": nxt["assignment_id"],
                    "idempotency_key": f"{pid}-{nxt['assignment_id']}",
                    "response": {"marker": marker, "step": step},
                },
            )
            assert r.status_code == 200, r.text
            answered += 1
    assert nxt["state"] == "done" and nxt["complete"] is True, nxt
    return answered


def _expected(session, suite_id: int, agent_id: int) -> dict:
    """The simulator's outcomes of the agent's stored continuations, each replayed here."""
    from app.kinds.sts.models import Continuation, Recording, Scenario
    from app.kinds.sts.recordings import Replayable, check

    outcomes, steps, per_category, per_scenario = [], [], {}, {}
    for c, sc, rec in session.execute(
        select(Continuation, Scenario, Recording)
        .join(Scenario, Scenario.id == Continuation.scenario_id)
        .join(Recording, Recording.id == Scenario.recording_id)
        .where(Scenario.suite_id == suite_id, Continuation.agent_id == agent_id)
        .order_by(Scenario.id, Continuation.index)
    ).tuples():
        success = check(Replayable(rec.level, rec.seed, rec.mission, [*rec.actions[: sc.takeover], *c.actions])).success
        assert c.success_step == (None if success is None else success - sc.takeover)
        outcomes.append(1.0 if success is not None else 0.0)
        if success is not None:
            steps.append(success - sc.takeover)
        per_category.setdefault(sc.category, []).append(outcomes[-1])
        per_scenario.setdefault(f"s{sc.id}", []).append(outcomes[-1])
    return {
        "n": len(outcomes),
        "p": sum(outcomes) / len(outcomes),
        "steps": steps,
        "outcomes": outcomes,
        "per_category": per_category,
        "per_scenario": {s: sum(v) / len(v) for s, v in per_scenario.items()},
    }


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_policy_upload_to_leaderboard(celery_env, celery_worker, db_url):  # noqa: F811
    from fastapi.testclient import TestClient

    from app import jobs
    from app.auth.security import create_token
    from app.db import get_sessionmaker
    from app.main import create_app
    from app.studies.models import Participant

    session = get_sessionmaker(db_url)()
    owner = make_user(session, "researcher")
    headers = {"Authorization": f"Bearer {create_token(session, owner, 'e2e')}"}
    session.commit()
    app = create_app(db_url)
    with TestClient(app) as client:

        def api(method: str, url: str, body=None, **kw):
            r = client.request(method, url, json=body, headers=headers, **kw)
            assert r.status_code < 300, f"{method} {url}: {r.status_code} {r.text}"
            return r.json()

        recordings = [
            x["id"]
            for level, seeds in LEVELS.items()
            for x in api("POST", "/api/v1/sts/recordings/expert", {"level": level, "seeds": seeds})["recordings"]
        ]
        suite = api("POST", "/api/v1/sts/suites", {"name": "E2E", "description": "issue 11"})["id"]
        mined = api(
            "POST",
            f"/api/v1/sts/suites/{suite}/versions/1/scenarios",
            {"rule": "before success", "k": K, "recordings": recordings, "continuation": LENGTH},
        )
        n_scenarios = len(recordings)
        assert len(mined["added"]) == n_scenarios and mined["inapplicable"] == 0
        api("POST", f"/api/v1/sts/suites/{suite}/versions/1/publish")

        # The policy: uploaded, then validated by the worker in its sandbox.
        agent = api("POST", "/api/v1/agents", {"name": "walker", "kind": "sts"})["id"]
        up = client.post(
            f"/api/v1/agents/{agent}/artifacts",
            headers=headers,
            data={"role": "policy", "format": "torchscript"},
            files={"file": ("walker.pt", _scripted(), "application/octet-stream")},
        )
        assert up.status_code == 201 and up.json()["state"] == "pending", up.text
        listing = _wait(
            lambda: api("GET", f"/api/v1/agents/{agent}/artifacts"),
            lambda got: got[0]["state"] != "pending",
            celery_worker,
        )
        assert (listing[0]["state"], listing[0]["verdict"]) == ("valid", VALID)

        # Generation by the worker: the upload (sandboxed) and the built-in random agent.
        runs = {
            name: api(
                "POST",
                f"/api/v1/sts/suites/{suite}/versions/1/generations",
                {**spec, "continuations": C, "batch_size": 8},
            )
            for name, spec in (("walker", {"agent_id": agent}), ("random", {"agent": "random"}))
        }
        agent_ids = {}
        for name, started in runs.items():
            run = _wait(
                lambda: api("GET", f"/api/v1/sts/generations/{started['run']}"),
                lambda got: got["state"] not in ("queued", "running"),
                celery_worker,
            )
            assert run["state"] == "done", run["log"]
            assert (run["stored"], run["expected"], run["agent"]) == (n_scenarios * C, n_scenarios * C, name)
            agent_ids[name] = run["agent_id"]
        assert agent_ids["walker"] == agent
        celery_worker.wait_for(rf"Task {jobs.CELERY_TASK}\[[^\]]+\] succeeded in [\d.]+s: 'done'", 10, count=3)

        n_agent_items = 2 * n_scenarios * C
        built = api(
            "POST",
            f"/api/v1/sts/suites/{suite}/versions/1/study",
            {
                "title": "E2E study",
                "agents": [agent, "random"],
                "continuations": C,
                "reference": {"expert_successes": 2, "random_failures": 2},
                "bundle_size": n_agent_items + 4,
                "gold_rate": 0.2,
                "annotations_per_item": ANNOTATORS,
                "tile": 8,
            },
        )
        assert (built["items"], built["reference"], built["scenarios"]) == (n_agent_items + 4, 4, n_scenarios)
        study = built["study"]
        assert api("POST", f"/api/v1/studies/{study}/state", {"state": "live"})["state"] == "live"

        for w in range(ANNOTATORS):
            assert _annotate(app, session, built["slug"], f"e2e-annotator-{w}") == n_agent_items + 4
        board = api("GET", f"/api/v1/studies/{study}/leaderboard")

    expected = {name: _expected(session, suite, agent_ids[name]) for name in runs}
    outcomes = [o for e in expected.values() for o in e["outcomes"]]
    assert 0.0 in outcomes and 1.0 in outcomes  # both markers are placed on agent items
    tables = {t["key"]: t for t in board["extra"]["tables"]}
    rows = {r["agent"]: r for r in tables["sts_agents"]["rows"]}
    assert set(rows) == set(expected)
    for name, e in expected.items():
        row, p = rows[name], e["p"]
        assert (row["n"], row["success"]["n"]) == (n_scenarios * C, n_scenarios * C)
        assert row["success"]["mean"] == p and row["simulator"] == p and row["agreement"] == 1.0
        assert row["se"] == math.sqrt(p * (1 - p) / e["n"])
        assert row["corrected"] == p  # sensitivity and specificity 1: no correction
        assert row["ttc"] == (median(e["steps"]) if e["steps"] else None)
        by_category = next(r for r in tables["sts_categories"]["rows"] if r["agent"] == name)
        assert {c: (by_category[f"g:{c}"]["n"], by_category[f"g:{c}"]["mean"]) for c in e["per_category"]} == {
            c: (len(v), sum(v) / len(v)) for c, v in e["per_category"].items()
        }
        # Every scenario was added in version 1: its column is the overall share.
        versions = next(r for r in tables["sts_versions"]["rows"] if r["agent"] == name)
        assert (versions["g:v1"]["n"], versions["g:v1"]["mean"]) == (e["n"], p)
    for r in tables["sts_scenarios"]["rows"]:
        assert {name: r[f"a:{name}"] for name in expected} == {
            name: e["per_scenario"][r["scenario"]] for name, e in expected.items()
        }
    annotators = tables["sts_annotators"]["rows"]
    assert len(annotators) == ANNOTATORS
    for a in annotators:
        assert (a["n_reference"], a["sensitivity"], a["specificity"], a["balanced_accuracy"], a["step_error"]) == (
            4,
            1.0,
            1.0,
            1.0,
            0.0,
        )
    # The generic table: every annotator and the majority agree with the simulator everywhere.
    people = [r for r in board["rows"] if r["type"] in ("annotator", "majority")]
    assert len(people) == ANNOTATORS + 1
    assert all(r["accuracy"]["mean"] == 1.0 for r in people)
    assert [r["answered"] for r in people if r["type"] == "annotator"] == [n_agent_items] * ANNOTATORS
    # Balanced accuracy 1 on both labels: each worker was approved when their task ended.
    assert (
        session.scalars(select(Participant.status).where(Participant.study_id == study)).all()
        == ["approved"] * ANNOTATORS
    )
    session.close()
