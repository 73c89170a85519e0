"""Issue 4 end to end, on CPU with tiny models and a real Celery worker (Redis, PostgreSQL):
upload a speaker and two listeners -> the worker validates them -> a capability-analysis
generation job runs in the worker -> study items -> simulated followers -> the leaderboard
with the capability analysis and the listener agreement table."""

from __future__ import annotations

import json
import time

from tests.conftest import make_user
from tests.integration.test_celery import JOB_TIMEOUT_S, celery_env, celery_worker  # noqa: F401
from tests.integration.test_generation import _paths_file, tiny_models  # noqa: F401
from tests.integration.test_nav_capability import _simulate

PATHS = 4


def _wait(client, url: str, headers: dict, done, worker) -> dict:
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while not done(got := client.get(url, headers=headers).json()):
        assert time.monotonic() < deadline, worker.log()[-4000:]
        time.sleep(0.25)
    return got


def test_upload_validate_generate_follow_and_analyse(celery_env, celery_worker, db_url, tiny_models):  # noqa: F811
    from fastapi.testclient import TestClient

    from app.auth.security import create_token
    from app.db import get_sessionmaker
    from app.kinds.navigation.environments import get_graph, import_house
    from app.kinds.navigation.house import generate_house
    from app.main import create_app
    from app.studies.models import Study

    session = get_sessionmaker(db_url)()
    owner = make_user(session, "researcher")
    house = generate_house(100)
    import_house(session, house)  # written to the blob folder the worker reads too
    token = create_token(session, owner, "e2e")
    session.commit()
    headers = {"Authorization": f"Bearer {token}"}
    with TestClient(create_app(db_url)) as client:
        r = client.post(
            "/api/v1/studies",
            headers=headers,
            data={"kind": "navigation", "format": "r2r", "settings": json.dumps({"title": "E2E"})},
            files={"file": ("paths.json", _paths_file(house, PATHS), "application/json")},
        )
        assert r.status_code == 201, r.text
        study_id = r.json()["id"]

        artifacts = {}
        for name, role in (("speaker", "speaker"), ("listener0", "listener"), ("listener1", "listener")):
            agent = client.post("/api/v1/agents", headers=headers, json={"kind": "navigation", "name": f"tiny-{name}"})
            assert agent.status_code == 201, agent.text
            blob, config = tiny_models[name]
            up = client.post(
                f"/api/v1/agents/{agent.json()['id']}/artifacts",
                headers=headers,
                data={"role": role, "format": "safetensors", "config": json.dumps(config)},
                files={"file": (f"{name}.safetensors", blob, "application/octet-stream")},
            )
            assert up.status_code == 201, up.text
            assert up.json()["state"] == "pending"
            listing = _wait(
                client,
                f"/api/v1/agents/{agent.json()['id']}/artifacts",
                headers,
                lambda got: got[0]["state"] != "pending",
                celery_worker,
            )
            assert listing[0]["state"] == "valid", listing[0]["verdict"]
            artifacts[name] = up.json()["id"]

        r = client.post(
            f"/api/v1/studies/{study_id}/generations",
            headers=headers,
            data={
                "speaker_artifact_id": str(artifacts["speaker"]),
                "listener_artifact_ids": f"{artifacts['listener0']},{artifacts['listener1']}",
                "n": "2",
                "m": "2",
                "max_len": "12",
                "design": "capability",
            },
            files={"file": ("paths.json", _paths_file(house, PATHS), "application/json")},
        )
        assert r.status_code == 202, r.text
        run = _wait(
            client,
            f"/api/v1/generations/{r.json()['run']}",
            headers,
            lambda got: got["state"] not in ("queued", "running"),
            celery_worker,
        )
        assert run["state"] == "done", run["log"] + celery_worker.log()[-3000:]
        # per path: the inference output, 2 samples and the human reference
        assert run["items"] == PATHS * 4 and run["candidates"] == PATHS * 3
        assert run["rollouts"] == PATHS * 3 * 2 * 2

        assert (
            client.post(f"/api/v1/studies/{study_id}/state", headers=headers, json={"state": "live"}).status_code == 200
        )
        session.expire_all()
        study = session.get(Study, study_id)
        _simulate(session, study, get_graph(house.scan))

        board = client.get(f"/api/v1/studies/{study_id}/leaderboard", headers=headers)
        assert board.status_code == 200, board.text
        tables = {t["key"]: t for t in board.json()["extra"]["tables"]}
    cap = tables["nav_capability"]
    assert f"Paths counted: {PATHS} of {PATHS}." in cap["note"]
    rows = {r["key"]: r for r in cap["rows"]}
    # r*_pragmatic picks the candidate followed best by nDTW, so on nDTW it is never below r
    # (on the other metrics that one candidate may do worse than r's).
    assert rows["pragmatic"]["ndtw"]["mean"] >= rows["speaker_choice"]["ndtw"]["mean"] - 1e-12
    for m in ("success", "spl", "ndtw", "sdtw"):
        assert rows["ppg_pragmatic"][m]["n"] == PATHS
    # The generated candidates carry the speaker's log-probabilities: the search oracle and
    # gamma are computable, unlike on the real coop files.
    scores = {r["key"]: r for r in tables["nav_capability_scores"]["rows"]}
    assert scores["gamma"]["paths"] == PATHS
    assert {r["metric"] for r in tables["nav_capability_advice"]["rows"]} == {"SR", "SPL", "nDTW", "SDTW"}
    # The listeners' rollouts on the generated instructions meet the people's paths.
    agreement = tables["navigation_agreement"]["rows"]
    assert {r["listener"].split(" ")[0] for r in agreement} == {"tiny-listener0", "tiny-listener1"}
    assert all(0.0 <= r["agreement"]["mean"] <= 1.0 for r in agreement)
    session.close()
