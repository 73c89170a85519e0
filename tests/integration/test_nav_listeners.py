"""Model listeners on a navigation study, on SQLite and PostgreSQL: their paths are imported
(R2R predictions, {id: {path}} and {id: {trace}}), people follow the same instructions through
the assignment engine, and the leaderboard shows each listener's success rate and the listener
agreement table (mean nDTW between human and listener paths, per speaker), checked against a
recomputation with the offline scorer. Bad listener files are refused, naming the record, with
the earlier outputs kept. A follower's pose trace comes back out as PanGEA JSONL, to the study's
owner and admins only."""

from __future__ import annotations

import json
import math
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import select

from app.agents.models import AgentOutput
from app.auth.security import create_token
from app.kinds.navigation import formats
from app.kinds.navigation.environments import get_graph, import_house
from app.kinds.navigation.grammar import describe_path
from app.kinds.navigation.house import generate_house, sample_paths
from app.kinds.navigation.metrics import score_trajectory
from app.kinds.navigation.traces import export_trace
from app.leaderboards.service import compute
from app.studies import assignment, services
from app.studies.exports import _annotation_rows
from app.studies.models import Annotation, Item
from tests.conftest import login, make_user

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
PANGEA = DATA / "pangea"
CONN = DATA / "r2r" / "connectivity"

_HOUSE: dict = {}


def house():
    if "h" not in _HOUSE:
        _HOUSE["h"] = generate_house(5)
    return _HOUSE["h"]


def coop_file(h, n: int = 5) -> bytes:
    """A coop-shaped greedy file: key "0" the QC episode, then one speaker instruction per
    path with a human reference (so every path has a "toy" and a "human" instruction)."""
    data = {}
    for k, p in enumerate(sample_paths(h, n + 1, rng=23)):
        data[str(k if k == 0 else 200 + k)] = {
            "generated_instr": describe_path(h, p, rng=900 + k, n=1)[0],
            "distance": 1.0,
            "scan": h.scan,
            "path": list(p.path),
            "heading": p.heading,
            "instr_id": f"{70 + k}_0",
            "instructions": describe_path(h, p, rng=300 + k, n=1),
            "path_id": 70 + k,
        }
    return json.dumps(data).encode()


def with_trace(graph, path: list[str], heading: float) -> dict:
    """A follower's response: look around at the start, then face each next viewpoint and walk."""
    trace, t = [[path[0], heading, 0.0, 0.0]], 0.0
    for a, b in zip(path, path[1:]):
        t += 250.0
        trace.append([a, graph.heading(a, b), graph.elevation(a, b), t])
        t += 400.0
        trace.append([b, graph.heading(a, b), 0.0, t])
    return {"path": path, "trace": trace}


def followed(graph, ref: list[str], style: int) -> list[str]:
    if style == 0:
        return list(ref)
    if style == 1:
        return list(ref[: max(1, len(ref) // 2)])
    off = next((n for n in graph.neighbours(ref[0]) if n not in ref), None)
    return list(ref) if off is None else [ref[0], off, ref[0], *ref[1:]]


@pytest.fixture
def nav(session):
    h = house()
    import_house(session, h)
    owner = make_user(session, "researcher")
    s = services.StudySettings(title="Listeners", bundle_size=4, gold_rate=0.0, annotations_per_item=2)
    study = services.create_study(session, owner, "navigation", s, coop_file(h), "coop", {"speaker": "toy"})
    services.set_state(session, study, "live", owner)
    items = session.scalars(select(Item).where(Item.study_id == study.id).order_by(Item.id)).all()
    return h, get_graph(h.scan), owner, study, items


def follow_all(session, study, graph, workers: int = 6) -> int:
    done = 0
    for w in range(workers):
        bundle = assignment.enter(session, study, "prolific", f"follower-{w}")
        while (a := assignment.next_item(session, study, bundle.id)) is not None:
            item = session.get(Item, a.item_id)
            path = followed(graph, item.reference["path"], (w + a.id) % 3)
            assignment.submit(
                session,
                study,
                bundle.id,
                a.id,
                {**with_trace(graph, path, item.payload["heading"]), "rating": 3},
                uuid.uuid4().hex,
            )
            done += 1
    return done


def outputs_of(session, agent_id: int) -> dict:
    return {
        i: (r, s)
        for i, r, s in session.execute(
            select(AgentOutput.item_id, AgentOutput.response, AgentOutput.score).where(AgentOutput.agent_id == agent_id)
        )
    }


def upload(client, token: str, study_id: int, agent_id: int, data: bytes, name: str = "listener.json"):
    return client.post(
        f"/api/v1/studies/{study_id}/agents/{agent_id}/outputs",
        headers={"Authorization": f"Bearer {token}"},
        files={"file": (name, data, "application/json")},
    )


def test_listeners_paths_leaderboard_and_agreement(session, client, nav):
    h, graph, owner, study, items = nav
    token = create_token(session, owner)
    session.commit()
    auth = {"Authorization": f"Bearer {token}"}
    ids = {}
    for name in ("exact-listener", "lazy-listener"):
        r = client.post("/api/v1/agents", headers=auth, json={"name": name, "kind": "navigation"})
        assert r.status_code == 201, r.text
        ids[name] = r.json()["id"]
    plain = [i for i in items if not i.is_gold]

    # Listener 1, R2R predictions keyed by instr_id = the item's external id: the intended path,
    # turning on the spot first (a repeated viewpoint with another heading).
    preds = [
        {
            "instr_id": i.external_id,
            "trajectory": [[i.reference["path"][0], 0.5, 0.0]]
            + [[v, graph.heading(a, v), 0.0] for a, v in zip(i.reference["path"], i.reference["path"][1:])],
        }
        for i in plain
    ]
    r = upload(client, token, study.id, ids["exact-listener"], json.dumps(preds).encode())
    assert r.status_code == 200 and r.json() == {"imported": len(plain)}, r.text

    # Listener 2, {id: {path}} and {id: {trace}}: stops after two viewpoints, on some items only.
    lazy = {}
    for k, i in enumerate(plain[: len(plain) - 2]):
        short = i.reference["path"][:2]
        if k % 2:
            records = [
                json.loads(x)
                for x in export_trace(graph, with_trace(graph, short, i.payload["heading"])["trace"])
                .decode()
                .splitlines()
            ]
            lazy[i.external_id] = {"trace": records}
        else:
            lazy[i.external_id] = {"path": short}
    r = upload(client, token, study.id, ids["lazy-listener"], json.dumps(lazy).encode())
    assert r.status_code == 200 and r.json() == {"imported": len(lazy)}, r.text
    stored = outputs_of(session, ids["lazy-listener"])
    by_ext = {i.external_id: i for i in items}
    for ext, rec in lazy.items():
        response, score = stored[by_ext[ext].id]
        assert response["path"] == by_ext[ext].reference["path"][:2]
        assert ("trace" in response) == ("trace" in rec)
        success = score_trajectory(graph, by_ext[ext].reference["path"], response["path"])["success"]
        assert score == (1.0 if success else 0.0)

    assert follow_all(session, study, graph) >= len(plain)
    board = compute(session, study)

    # The generic leaderboard: each listener's success rate over the study's instructions.
    agents = {r["name"]: r for r in board["rows"] if r["type"] == "agent"}
    assert set(agents) == {"exact-listener v1", "lazy-listener v1"}
    assert agents["exact-listener v1"]["accuracy"]["mean"] == 1.0
    lazy_hits = sum(s for _, s in stored.values())
    assert agents["lazy-listener v1"]["accuracy"]["mean"] == pytest.approx(lazy_hits / len(plain))
    assert agents["lazy-listener v1"]["coverage"] == pytest.approx(len(lazy) / len(plain))

    # The agreement table against a recomputation with the offline scorer (human path as R).
    table = next(t for t in board["extra"]["tables"] if t["key"] == "navigation_agreement")
    rows = {(r["category"], r["listener"]): r for r in table["rows"]}
    anns = session.execute(
        select(Annotation.item_id, Annotation.response).where(
            Annotation.study_id == study.id, Annotation.is_gold.is_(False), Annotation.excluded.is_(False)
        )
    ).all()
    expected_keys = set()
    for name, agent_id in ids.items():
        outs = outputs_of(session, agent_id)
        for cat in ("human", "toy"):
            per_item, paths = [], 0
            for item in plain:
                mine = [a.response["path"] for a in anns if a.item_id == item.id]
                if item.category != cat or item.id not in outs or not mine:
                    continue
                listener = outs[item.id][0]["path"]
                per_item.append(sum(score_trajectory(graph, p, listener)["ndtw"] for p in mine) / len(mine))
                paths += len(mine)
            if not per_item:
                continue
            expected_keys.add((cat, f"{name} v1"))
            row = rows[cat, f"{name} v1"]
            assert row["instructions"] == len(per_item) and row["human_paths"] == paths
            est = row["agreement"]
            assert est["n"] == len(per_item)
            assert est["mean"] == pytest.approx(sum(per_item) / len(per_item), abs=1e-12)
            assert est["low"] - 1e-12 <= est["mean"] <= est["high"] + 1e-12
    assert set(rows) == expected_keys and ("human", "exact-listener v1") in rows
    # The baseline speaker comes first; people who followed exactly agree fully with the
    # exact listener, so its agreement lies above the lazy one's where both answered.
    assert table["rows"][0]["category"] == "human"
    assert (
        0
        < rows["human", "lazy-listener v1"]["agreement"]["mean"]
        < rows["human", "exact-listener v1"]["agreement"]["mean"]
        <= 1
    )
    json.dumps(board, allow_nan=False)

    login(client, owner)
    page = client.get(f"/studies/{study.id}/leaderboard")
    assert page.status_code == 200
    assert 'id="navigation_agreement"' in page.text and "lazy-listener v1" in page.text


def test_bad_listener_files_are_refused_and_keep_the_earlier_outputs(session, client, nav):
    h, graph, owner, study, items = nav
    token = create_token(session, owner)
    agent = services.register_agent(session, owner, "navigation", "listener")
    session.commit()
    plain = [i for i in items if not i.is_gold]
    good = {i.external_id: {"path": i.reference["path"]} for i in plain}
    assert upload(client, token, study.id, agent.id, json.dumps(good).encode()).status_code == 200
    before = outputs_of(session, agent.id)
    assert len(before) == len(plain)

    first, second = plain[0], plain[1]
    ref = first.reference["path"]
    cases = [
        (
            "unknown instr_id",
            [{"instr_id": "no-such-instruction", "trajectory": [ref[0]]}],
            "instr_id",
            "no-such-instruction",
        ),
        (
            "viewpoint not in the building",
            [{"instr_id": first.external_id, "trajectory": [ref[0], "not-a-viewpoint"]}],
            "trajectory",
            first.external_id,
        ),
        (
            "path not starting at the start",
            {first.external_id: {"path": ref}, second.external_id: {"path": list(reversed(second.reference["path"]))}},
            "path",
            second.external_id,
        ),
        (
            "trace not starting at the start",
            {
                first.external_id: {
                    "trace": [
                        json.loads(x) for x in export_trace(graph, [[ref[1], 0.0, 0.0, 0.0]]).decode().splitlines()
                    ]
                }
            },
            "trace",
            first.external_id,
        ),
        (
            "broken trace record",
            {first.external_id: {"trace": [{"id": ref[0], "exmat": [1.0] * 3, "time": 0}]}},
            "exmat",
            first.external_id,
        ),
    ]
    for what, data, field, name in cases:
        r = upload(client, token, study.id, agent.id, json.dumps(data).encode())
        assert r.status_code == 422, (what, r.text)
        assert r.json()["field"] == field and name in r.json()["detail"], (what, r.json())
        session.expire_all()
        assert outputs_of(session, agent.id) == before, what


def test_trace_export_route(session, client, app, nav):
    from fastapi.testclient import TestClient

    h, graph, owner, study, items = nav
    follow_all(session, study, graph, workers=1)
    ann = session.scalars(select(Annotation).where(Annotation.study_id == study.id).order_by(Annotation.id)).first()
    url = f"/api/v1/studies/{study.id}/annotations/{ann.id}/trace.jsonl"

    login(client, owner)
    r = client.get(url)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/x-ndjson")
    assert "attachment" in r.headers["content-disposition"]
    back = formats.parse_pangea_trace(r.content)
    assert back.path == ann.response["path"]
    assert len(back.frames) == len(ann.response["trace"])
    records = [json.loads(x) for x in r.content.decode().splitlines()]
    for f, rec, (v, heading, elevation, t) in zip(back.frames, records, ann.response["trace"]):
        assert f.viewpoint == v and f.time_ms == t
        assert abs((f.heading - heading + math.pi) % (2 * math.pi) - math.pi) < 1e-6
        assert f.elevation == pytest.approx(elevation, abs=1e-6)
        assert formats.position_from_exmat(rec["exmat"]) == pytest.approx(tuple(graph.position(v)))
    # The study's JSONL export keeps the trace as stored.
    exported = next(row for row in _annotation_rows(session, study) if row["annotation_id"] == ann.id)
    assert exported["response"]["trace"] == ann.response["trace"]

    # Admins too; another researcher, a worker and a stranger not.
    with TestClient(app) as admin_client:
        login(admin_client, make_user(session, "admin"))
        assert admin_client.get(url).status_code == 200
    with TestClient(app) as other:
        login(other, make_user(session, "researcher"))
        assert other.get(url).status_code == 404
    with TestClient(app) as worker:
        r = worker.get(
            f"/s/{study.slug}",
            params={"PROLIFIC_PID": "w-export", "STUDY_ID": "s", "SESSION_ID": "x"},
            follow_redirects=False,
        )
        assert r.status_code == 303
        assert worker.get(url).status_code == 401
    with TestClient(app) as anon:
        assert anon.get(url).status_code == 401
    # An annotation of another study, or one that does not exist: not found in this study.
    assert client.get(f"/api/v1/studies/{study.id}/annotations/{ann.id + 10_000}/trace.jsonl").status_code == 404


@pytest.mark.skipif(
    not ((PANGEA / "snapshots.jsonl").exists() and (PANGEA / "args.json").exists() and CONN.is_dir()),
    reason=f"the released PanGEA trace or the R2R connectivity graphs are absent under {DATA}",
)
def test_nav_trace_command_on_the_real_pangea_files():
    from app.cli import main

    args = json.loads((PANGEA / "args.json").read_text())
    runner = CliRunner()
    r = runner.invoke(
        main,
        [
            "nav",
            "trace",
            str(PANGEA / "snapshots.jsonl"),
            "--connectivity",
            str(CONN),
            "--args",
            str(PANGEA / "args.json"),
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    result = json.loads(r.output)
    assert result["scan"] == args["scan"] and result["path"] == args["path"]
    assert result["scores"]["ndtw"] == 1.0 and result["scores"]["success"] is True
    assert result["time_unit"] == "s" and result["start_heading_error"] < 1e-3
    # The text form, and without the task: the building is found from the first viewpoint.
    r = runner.invoke(main, ["nav", "trace", str(PANGEA / "snapshots.jsonl"), "--connectivity", str(CONN)])
    assert r.exit_code == 0 and args["scan"] in r.output and "nDTW" not in r.output
    r = runner.invoke(
        main,
        [
            "nav",
            "trace",
            str(PANGEA / "snapshots.jsonl"),
            "--connectivity",
            str(CONN),
            "--args",
            str(PANGEA / "args.json"),
            "--time-unit",
            "ms",
        ],
    )
    assert r.exit_code == 0 and "SR 1" in r.output and "nDTW 1.000" in r.output
