"""The Standardised Test Suite kind end to end on both backends: continuations uploaded as a
study's items (each replayed in BabyAI, its frames rendered once), people mark them through the
real pages, the leaderboard ranks agents by success share with what the simulator says beside
it, reference episodes measure the annotators, and `proctor sts score` scores a file offline."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from sqlalchemy import select

from app.kinds.sts.demo import demo_lines
from app.images import decode_png
from app.storage import get_store
from app.studies import services
from app.studies.models import Item, Study
from tests.conftest import ROOT, consent_version_of, make_user


def _upload(lines: list[dict]) -> bytes:
    return "\n".join(json.dumps(x) for x in lines).encode()


def _study(session, owner, lines=None, **settings) -> Study:
    study = services.create_study(
        session,
        owner,
        "sts",
        services.StudySettings(title="STS", bundle_size=4, gold_rate=0.25, annotations_per_item=1, **settings),
        _upload(lines or demo_lines()),
        "continuations",
    )
    services.set_state(session, study, "live", owner)
    return study


def test_continuations_become_items_with_their_frames_and_the_simulators_outcome(session):
    owner = make_user(session, "researcher")
    study = _study(session, owner)
    items = {i.external_id: i for i in session.scalars(select(Item).where(Item.study_id == study.id))}
    assert len(items) == len(demo_lines())
    ref = items["reference/PutNextLocal-11/random"]
    assert ref.is_gold and ref.reference["label"] == "failure" and ref.category == "put next to"
    expert = items["PutNextLocal-2/expert/0"]
    assert not expert.is_gold and expert.cluster == "PutNextLocal-2"
    assert expert.reference["simulator"] == "success" and expert.reference["success_step"] == 18
    # One frame per state: the context, the takeover and every step of the agent, then the
    # state it succeeded in held to the scenario's length (the file's 40 steps), as long as the
    # random agent's failure beside it.
    png = get_store().get(expert.payload["frames_key"])
    frames = decode_png(png)
    tile, h = expert.payload["tile"], frames.shape[0]
    assert frames.shape[1] == expert.payload["n_frames"] * h  # square frames side by side
    assert expert.payload["n_frames"] == expert.payload["takeover"] + 40 + 1 and h % tile == 0
    assert items["PutNextLocal-2/random/0"].payload["n_frames"] == expert.payload["n_frames"]
    success = expert.payload["takeover"] + 18
    assert all(
        (frames[:, k * h : (k + 1) * h] == frames[:, success * h : (success + 1) * h]).all()
        for k in range(success, expert.payload["n_frames"])
    )
    # The same episode (the expert plays scenario 2 the same way twice) is one blob.
    again = items["PutNextLocal-2/expert/1"]
    assert again.payload["frames_key"] == expert.payload["frames_key"]


def test_a_study_made_again_from_the_same_continuations_encodes_no_strip(session, monkeypatch):
    """A second study of the same continuations (another study of a suite version, the demo
    made again) gets the same strips, in the same bytes under the same keys, without rendering
    or encoding them again (about a second of CPU for the demo's 40); where the store lost
    them, they are written again."""
    from app.kinds.sts import frames

    def keys(study: Study) -> dict[str, str]:
        items = session.scalars(select(Item).where(Item.study_id == study.id))
        return {i.external_id: i.payload["frames_key"] for i in items}

    lines = demo_lines()[:6]
    owner = make_user(session, "researcher")
    first = keys(_study(session, owner, lines))
    encoded: list[int] = []
    real = frames.encode_pngs_of_one_size
    monkeypatch.setattr(frames, "encode_pngs_of_one_size", lambda p: encoded.append(len(p)) or real(p))
    store = get_store()
    gone = next(iter(first.values()))
    store.delete(gone)
    second = keys(_study(session, owner, lines))
    assert second == first and encoded == []
    assert decode_png(store.get(gone)).shape[1] > 0  # written again from the encoded bytes


@pytest.mark.parametrize(
    "change, field, words",
    [
        ({"actions": [9]}, "actions", "actions[0]"),
        ({"seed": 4}, "mission", "gives the mission"),
        ({"takeover": 99}, "takeover", "beyond the episode"),
        ({"label": "maybe", "reference": True}, "label", '"maybe"'),
        ({"level": "BabyAI-Nowhere-v0"}, "level", "Nowhere"),
        ({"length": 0}, "length", "(the agent's own steps)"),  # shorter than what the agent did
        ({"length": 39}, "length", "has length 40 on line 1"),  # the scenario's first line says 40
    ],
)
def test_a_bad_continuation_names_its_line_and_field_and_nothing_is_stored(client, session, change, field, words):
    from tests.conftest import login

    owner = make_user(session, "researcher")
    lines = demo_lines()[:3]
    lines[2] = {**lines[2], **change}
    csrf = login(client, owner)
    r = client.post(
        "/api/v1/studies",
        headers={"X-CSRF-Token": csrf},
        data={"kind": "sts", "format": "continuations", "settings": json.dumps({"title": "Bad"})},
        files={"file": ("c.jsonl", _upload(lines), "application/json")},
    )
    assert r.status_code == 422, r.text
    assert r.json()["line"] == 3 and r.json()["field"] == field and words in r.json()["detail"]
    assert session.scalar(select(Study).where(Study.title == "Bad")) is None


def _mark(client, slug: str, truth_of) -> int:
    """Work through a bundle on the real pages, marking each episode as `truth_of(item)` says."""
    done = 0
    page = client.get(f"/s/{slug}?PROLIFIC_PID=PWORKER1&STUDY_ID=S&SESSION_ID=Q")
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
    page = client.post(
        f"/task/{slug}/consent", data={"csrf_token": csrf, "consent_version": consent_version_of(page.text)}
    )
    while 'id="sts-player"' in page.text:
        assignment_id = re.search(r'name="assignment_id" value="(\d+)"', page.text).group(1)
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
        key = re.search(r'name="idempotency_key" value="([^"]+)"', page.text).group(1)
        frames_url = re.search(r'data-frames="([^"]+)"', page.text).group(1).replace("&amp;", "&")
        assert client.get(frames_url).content[:8] == b"\x89PNG\r\n\x1a\n"  # the signed strip loads
        marker, step = truth_of(int(assignment_id))
        page = client.post(
            f"/task/{slug}/answer",
            data={
                "csrf_token": csrf,
                "assignment_id": assignment_id,
                "idempotency_key": key,
                "marker": marker,
                "step": str(step),
            },
            follow_redirects=True,
        )
        assert page.status_code == 200, page.text
        done += 1
    return done


def _truth(item: Item) -> tuple[str, int]:
    """The simulator's own outcome (a reference episode's label), at its step."""
    ref = item.reference
    truth = ref.get("label") or ref["simulator"]
    return truth, ref["success_step"] if truth == "success" and ref["success_step"] is not None else ref["length"]


def test_people_mark_continuations_and_the_leaderboard_ranks_agents(app, client, session):
    """One worker marks a bundle on the real pages; more mark the rest through the engine, all
    as the simulator says but one who marks every episode a success. The expert's share is 1,
    the random policy's is the simulator's, people agree with the simulator except where the
    yes-sayer decided, and annotators are measured on the reference episodes only."""
    from app.leaderboards.service import compute
    from app.studies import assignment
    from app.studies.models import Assignment

    owner = make_user(session, "researcher")
    study = _study(session, owner)

    def truthful(assignment_id):
        session.expire_all()
        return _truth(session.get(Item, session.get(Assignment, assignment_id).item_id))

    assert _mark(client, study.slug, truthful) == 4
    n = 0
    while True:
        n += 1
        bundle = assignment.enter(session, study, "prolific", f"WORKER{n:03d}")
        a = assignment.next_item(session, study, bundle.id)
        if a is None:
            break
        while a is not None:
            marker, step = _truth(session.get(Item, a.item_id))
            if n == 1:
                marker, step = "success", 0  # the yes-sayer
            assignment.submit(session, study, bundle.id, a.id, {"marker": marker, "step": step}, f"k{a.id}")
            a = assignment.next_item(session, study, bundle.id)
    session.expire_all()
    items = session.scalars(select(Item).where(Item.study_id == study.id, Item.is_gold.is_(False))).all()
    board = compute(session, study)
    tables = {t["key"]: t for t in board["extra"]["tables"]}
    rows = {r["agent"]: r for r in tables["sts_agents"]["rows"]}
    assert set(rows) == {"expert", "random"}
    for agent, row in rows.items():
        mine = [i for i in items if i.reference["agent"] == agent]
        assert row["n"] == len(mine) == 16
        assert row["simulator"] == sum(i.reference["simulator"] == "success" for i in mine) / 16
    assert rows["expert"]["simulator"] == 1.0 and rows["random"]["simulator"] == 2 / 16
    assert rows["expert"]["success"]["mean"] == 1.0
    # The yes-sayer's first bundle (4 items, one of them perhaps gold) can only lift the random
    # policy's share above the simulator's, and exactly where they marked a failure a success.
    lifted = rows["random"]["success"]["mean"] - rows["random"]["simulator"]
    assert 0 <= lifted <= 4 / 16 and rows["random"]["agreement"] == pytest.approx(1 - lifted)
    annotators = {r["annotator"]: r for r in tables["sts_annotators"]["rows"]}
    assert annotators and all(r["n_reference"] >= 1 for r in annotators.values())
    # Consistency per scenario: the expert succeeds in every one; the correlation with the
    # simulator needs three agents, so with two it is blank rather than a number.
    scenario_rows = tables["sts_scenarios"]["rows"]
    assert len(scenario_rows) == 8 and all(r["a:expert"] == 1.0 for r in scenario_rows)
    assert scenario_rows[0]["difficulty"] >= scenario_rows[-1]["difficulty"]
    assert tables["sts_correlation"]["rows"] == [
        {"metric": "simulator success rate", "agents": 2, "rho": None, "p": None}
    ]
    figures = {f["title"]: str(f["svg"]) for f in board["extra"]["figures"]}
    assert "<circle" in figures["Success share per agent (95% interval)"]
    assert figures["Time to completion: steps from the takeover to the success marker (CDF)"].count("<polyline") == 2
    from tests.conftest import login

    login(client, owner)
    page = client.get(f"/studies/{study.id}/leaderboard")
    assert page.status_code == 200 and 'aria-label="steps after the takeover: cumulative share"' in page.text
    api = client.get(f"/api/v1/studies/{study.id}/leaderboard").json()
    assert "figures" not in api["extra"] and {t["key"] for t in api["extra"]["tables"]} == set(tables)
    yes_sayer = annotators.pop(assignment.pseudonym("prolific", "WORKER001"), None)
    assert yes_sayer is None or yes_sayer["specificity"] in (0.0, None)
    for r in annotators.values():  # marked at the simulator's own moment: no step error
        assert r["sensitivity"] in (1.0, None) and r["specificity"] in (1.0, None)
        assert r["balanced_accuracy"] in (1.0, None) and r["step_error"] in (0, None)


def test_a_marker_after_the_end_is_refused(session):
    from app.errors import InputError
    from app.kinds import get_kind

    kind = get_kind("sts")
    payload = {"n_frames": 10, "takeover": 3}
    assert kind.parse_response({"marker": "success", "step": "6"}, payload) == {"marker": "success", "step": 6}
    with pytest.raises(InputError) as err:
        kind.parse_response({"marker": "success", "step": "7"}, payload)
    assert err.value.field == "step" and "6 steps after the takeover" in err.value.message


def test_reference_episodes_approve_a_careful_annotator(session):
    from app.kinds import get_kind
    from app.kinds.base import GoldResult

    kind = get_kind("sts")
    right = [
        GoldResult("a", 1.0, {"truth": "success", "marker": "success"}),
        GoldResult("b", 1.0, {"truth": "failure", "marker": "failure"}),
    ]
    assert kind.auto_review(right, {"approve_at": 0.8})[0] == "approved"
    half = right + [GoldResult("c", 0.0, {"truth": "failure", "marker": "success"})]
    verdict, note = kind.auto_review(half, {"approve_at": 0.8})
    assert verdict is None and "balanced accuracy 75%" in note  # (1 + 1/2) / 2
    assert kind.auto_review(right[:1], {"approve_at": 0.8}) == (None, "")  # one label only


def test_sts_score_command(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text(
        "\n".join(
            json.dumps(x)
            for x in [
                {
                    "annotator": "w1",
                    "agent": "A",
                    "scenario": "s",
                    "continuation": 0,
                    "category": "go to",
                    "marker": "success",
                    "step": 4,
                    "reference": False,
                },
                {
                    "annotator": "w1",
                    "agent": "A",
                    "scenario": "s",
                    "continuation": 1,
                    "category": "go to",
                    "marker": "failure",
                    "step": 9,
                    "reference": False,
                },
                {"annotator": "w1", "marker": "success", "step": 2, "reference": True, "label": "success"},
            ]
        )
    )
    out = subprocess.run(
        [sys.executable, "-m", "app.cli", "sts", "score", "--annotations", str(path), "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["agents"]["A"]["success"] == 0.5 and got["agents"]["A"]["ttc_median"] == 4
    assert got["annotators"]["w1"] == {
        "n_reference": 1,
        "sensitivity": 1.0,
        "specificity": None,
        "balanced_accuracy": None,
    }
    path.write_text('{"annotator": "w1", "marker": "succes", "reference": false}\n')
    out = subprocess.run(
        [sys.executable, "-m", "app.cli", "sts", "score", "--annotations", str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert out.returncode == 1 and "line 1, field 'marker'" in out.stderr
