"""The capability analysis study (paper section 4.3) end to end, on SQLite and PostgreSQL: a
capability file for a generated house is imported, simulated followers submit paths through
the assignment engine, one of them is rejected, and the leaderboard's capability tables are
checked against a plain recomputation from the stored annotations. Also: bad files are refused
whole, and the real coop speaker files convert and import."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import func, select

from app.errors import InputError
from app.kinds.navigation.environments import get_graph, import_connectivity, import_house
from app.kinds.navigation.grammar import describe_path
from app.kinds.navigation.house import generate_house, sample_paths
from app.leaderboards.service import compute
from app.quality.service import decide
from app.studies import assignment, services
from app.studies.models import Annotation, Bundle, Item, Study
from tests.conftest import login, make_user

ROOT = Path(__file__).resolve().parents[2]
COOP = ROOT.parent / "shared" / "data" / "coop"
GREEDY = COOP / "anno_speaker-clip-t5_greedy.json"
CANDIDATES = COOP / "speaker_t5_clip_sampled_nucleus_val_seen.json"
CONN = ROOT.parent / "shared" / "data" / "r2r" / "connectivity"
METRICS = ("success", "spl", "ndtw", "sdtw")
N_PATHS = 5

_HOUSE = {}


def house():
    if "h" not in _HOUSE:
        _HOUSE["h"] = generate_house(8)
    return _HOUSE["h"]


def capability_file(h) -> dict:
    """Per path: the inference output (score -5), three samples and the human reference.
    Path 0: the reference scores highest, so r*_search picks it. Path 1: sample 1 outscores
    the inference output, so the speaker's own choice is that sample. Path 2: sample 0 is the
    inference output's own text (spaced differently) with a score higher by rounding: the
    speaker's choice, and a tie for gamma, not a loss."""
    paths = sample_paths(h, N_PATHS, rng=21)
    assert len(paths) == N_PATHS
    out = []
    for j, p in enumerate(paths):
        texts = describe_path(h, p, rng=300 + j, n=5)
        samples = [{"instruction": texts[1 + k], "score": s} for k, s in enumerate((-7.0, -6.0, -8.0))]
        if j == 1:
            samples[1]["score"] = -4.0
        if j == 2:
            samples[0] = {"instruction": "  " + texts[0].replace(" ", "  ") + " ", "score": -4.9999}
        out.append(
            {
                "path_id": str(700 + j),
                "scan": h.scan,
                "path": list(p.path),
                "heading": p.heading,
                "reference": {"instruction": texts[4], "score": -1.0 if j == 0 else -9.0},
                "inference": {"instruction": texts[0], "score": -5.0},
                "samples": samples,
            }
        )
    return {"speaker": "toy-t5", "paths": out}


def _follow(graph, ref: list[str], style: str) -> list[str]:
    if style == "exact":
        return list(ref)
    if style == "early":
        return list(ref[: max(1, len(ref) // 2)])
    off = next((n for n in graph.neighbours(ref[0]) if n not in ref), None)  # a detour at the start
    return list(ref) if off is None else [ref[0], off, ref[0], *ref[1:]]


def _style(item: Item) -> str:
    # How well people follow each candidate: the reference and sample 0 exactly, the inference
    # output and sample 2 stop half way, sample 1 makes a detour.
    role = item.reference.get("role")
    if role in (None, "reference"):
        return "exact"
    if role == "inference":
        return "early"
    return ("exact", "detour", "early")[item.reference["candidate"]]


def _simulate(session, study: Study, graph) -> list[int]:
    """Workers follow until the study has no work left; returns their bundle ids."""
    bundles = []
    for w in range(40):
        bundle = assignment.enter(session, study, "prolific", f"cap-{w}")
        got = 0
        while (a := assignment.next_item(session, study, bundle.id)) is not None:
            item = session.get(Item, a.item_id)
            assignment.submit(
                session,
                study,
                bundle.id,
                a.id,
                {"path": _follow(graph, item.reference["path"], _style(item)), "trace": [], "rating": 3},
                uuid.uuid4().hex,
            )
            got += 1
        if not got:
            break
        bundles.append(bundle.id)
    return bundles


def test_capability_study_leaderboard(session, client):
    h = house()
    import_house(session, h)
    graph = get_graph(h.scan)
    owner = make_user(session, "researcher")
    data = capability_file(h)
    # Bundles of two: a rejected follower takes at most two paths out of the analysis.
    s = services.StudySettings(title="Capability", bundle_size=2, gold_rate=0.0, annotations_per_item=1)
    study = services.create_study(session, owner, "navigation", s, json.dumps(data).encode(), "capability")
    assert study.kind_settings["design"] == "capability" and study.kind_settings["speakers"] == ["toy-t5"]
    items = session.scalars(select(Item).where(Item.study_id == study.id)).all()
    assert len(items) == N_PATHS * 5
    by_id = {i.external_id: i for i in items}
    assert by_id["toy-t5:701:sample:1"].reference["speaker_score"] == -4.0
    assert by_id["toy-t5:701:sample:1"].category == "toy-t5 (samples)"
    assert by_id["700:reference"].source == "human" and by_id["700:reference"].category == "human"
    assert {i.exclusion_group for i in items} == {f"{h.scan}:{700 + j}" for j in range(N_PATHS)}

    services.set_state(session, study, "live", owner)
    bundles = _simulate(session, study, graph)
    assert session.scalar(select(func.count()).select_from(Annotation).where(Annotation.study_id == study.id)) == len(
        items
    )
    # A rejected follower's paths drop out: their items are left without a valid annotation.
    rejected = session.get(Bundle, bundles[0])
    decide(session, study, [rejected.participant_id], "rejected", owner, reason="wandered")

    board = compute(session, study)
    tables = {t["key"]: t for t in board["extra"]["tables"]}
    assert {"navigation_metrics", "nav_capability", "nav_capability_advice", "nav_capability_scores"} <= set(tables)

    # The plain recomputation: per item, the mean of its valid annotations.
    values: dict[str, dict[str, list[float]]] = {}
    for ext, scores in session.execute(
        select(Item.external_id, Annotation.scores)
        .join(Item, Item.id == Annotation.item_id)
        .where(Annotation.study_id == study.id, Annotation.excluded.is_(False))
    ):
        for m in METRICS:
            values.setdefault(ext, {}).setdefault(m, []).append(float(scores[m]))
    mean = {ext: {m: sum(v) / len(v) for m, v in ms.items()} for ext, ms in values.items()}
    counted = []
    for j in range(N_PATHS):
        pid = 700 + j
        u_sub = [f"toy-t5:{pid}:inference"] + [f"toy-t5:{pid}:sample:{k}" for k in range(3)]
        own = {1: f"toy-t5:{pid}:sample:1", 2: f"toy-t5:{pid}:sample:0"}.get(j, u_sub[0])
        search = f"{pid}:reference" if j == 0 else own
        # A path counts once U_sub and its reference have been followed, whatever the scores.
        if all(x in mean for x in u_sub + [f"{pid}:reference"]):
            counted.append((own, search, u_sub, f"{pid}:reference"))
    assert 0 < len(counted) < N_PATHS  # the rejection left some paths out, not all

    def pragmatic(own, u_sub):
        # One candidate per path: the best nDTW, r's own choice on a tie, then U_sub's order.
        best = max(mean[x]["ndtw"] for x in u_sub)
        return own if mean[own]["ndtw"] == best else next(x for x in u_sub if mean[x]["ndtw"] == best)

    cap = tables["nav_capability"]
    assert f"Paths counted: {len(counted)} of {N_PATHS}." in cap["note"]
    rows = {r["key"]: r for r in cap["rows"]}
    for m in METRICS:
        r = [mean[own][m] for own, _, _, _ in counted]
        srch = [mean[search][m] for _, search, _, _ in counted]
        prag = [mean[pragmatic(own, u_sub)][m] for own, _, u_sub, _ in counted]
        want = {
            "speaker_choice": r,
            "search": srch,
            "pragmatic": prag,
            "ppg_search": [b - a for a, b in zip(r, srch)],
            "ppg_pragmatic": [b - a for a, b in zip(r, prag)],
            "difference": [a - b for a, b in zip(prag, srch)],
        }
        for key, vals in want.items():
            est = rows[key][m]
            assert est["n"] == len(counted)
            assert est["mean"] == pytest.approx(sum(vals) / len(vals)), (key, m)
            assert est["low"] - 1e-9 <= est["mean"] <= est["high"] + 1e-9
    # On nDTW, the selection metric, r*_pragmatic is never worse than r: it may pick r itself.
    assert rows["ppg_pragmatic"]["ndtw"]["mean"] >= 0
    advice = {r["metric"]: r for r in tables["nav_capability_advice"]["rows"]}
    assert all(r["advice"] for r in advice.values())
    # gamma from the scores alone: the inference output (-5) loses only on path 1 (sample: -4)
    # and ties on path 2 (its own text): (3 + 1/2) / 5.
    checks = {r["key"]: r for r in tables["nav_capability_scores"]["rows"]}
    assert checks["gamma"]["paths"] == N_PATHS and checks["gamma"]["share"]["mean"] == pytest.approx(3.5 / 5)
    assert checks["gamma"]["remark"] == "3 won, 1 tied, 1 lost; the ties count half: (3 + 1/2) / 5"
    assert "by nDTW" in cap["note"] and "pragmatic_metric" not in study.kind_settings
    json.dumps(board, allow_nan=False)

    login(client, owner)
    page = client.get(f"/studies/{study.id}/leaderboard")
    assert page.status_code == 200
    for key in ("nav_capability", "nav_capability_advice", "nav_capability_scores"):
        assert f'id="{key}"' in page.text
    assert f"Paths counted: {len(counted)} of {N_PATHS}." in page.text
    assert advice["nDTW"]["advice"] in page.text
    api = client.get(f"/api/v1/studies/{study.id}/leaderboard")
    assert api.status_code == 200
    api_tables = {t["key"]: t for t in api.json()["extra"]["tables"]}
    assert api_tables["nav_capability"]["rows"] == json.loads(json.dumps(cap["rows"]))


def test_capability_advice_without_rejections(session):
    """Every item followed: all five paths count; on nDTW PPG_pragmatic exceeds PPG_search on four
    paths of five, but five paths are too few for the t interval to exclude 0."""
    h = house()
    import_house(session, h)
    owner = make_user(session, "researcher")
    s = services.StudySettings(title="Capability", bundle_size=N_PATHS, gold_rate=0.0, annotations_per_item=1)
    study = services.create_study(
        session, owner, "navigation", s, json.dumps(capability_file(h)).encode(), "capability"
    )
    services.set_state(session, study, "live", owner)
    _simulate(session, study, get_graph(h.scan))
    tables = {t["key"]: t for t in compute(session, study)["extra"]["tables"]}
    assert tables["nav_capability"]["counted"] == N_PATHS
    advice = {r["metric"]: r for r in tables["nav_capability_advice"]["rows"]}
    # Per path, PPG_pragmatic - PPG_search = nDTW(exact) - nDTW(r*_search): 0 on path 0, and
    # positive on the others (r stops half way or detours there). The interval is t on those
    # five per-path differences (4 df, t = 2.776): it reaches below 0 (a percentile bootstrap
    # over 5 paths said otherwise, but it covers far less than 95% at such n).
    diff = advice["nDTW"]["difference"]
    assert diff["mean"] > 0 and diff["method"] == "t on paired differences" and diff["n"] == N_PATHS
    assert diff["low"] < 0 < diff["high"]
    assert advice["nDTW"]["advice"].startswith("no clear difference")


def test_the_pragmatic_metric_is_a_study_setting(session):
    from app.kinds.navigation.capability import tables

    h = house()
    import_house(session, h)
    owner = make_user(session, "researcher")
    study = services.create_study(
        session,
        owner,
        "navigation",
        services.StudySettings(title="Capability"),
        json.dumps(capability_file(h)).encode(),
        "capability",
        {"pragmatic_metric": "success"},
    )
    assert study.kind_settings["pragmatic_metric"] == "success"
    note = tables(session, study)[0]["note"]
    assert note.startswith(
        f"Paths counted: 0 of {N_PATHS}. Left out of every row: {N_PATHS} (reason: a "
        "candidate of U_sub or the human reference has no valid annotation yet)."
    )
    assert "the one its followers did best on by SR" in note


def test_plain_studies_get_no_capability_tables(session):
    h = house()
    import_house(session, h)
    owner = make_user(session, "researcher")
    rec = capability_file(h)["paths"][0]
    r2r = [
        {
            "path_id": 1,
            "scan": h.scan,
            "path": rec["path"],
            "heading": rec["heading"],
            "distance": 1.0,
            "instructions": ["walk"],
        }
    ]
    s = services.StudySettings(title="Plain", bundle_size=1, gold_rate=0.0, annotations_per_item=1)
    study = services.create_study(session, owner, "navigation", s, json.dumps(r2r).encode(), "r2r")
    services.set_state(session, study, "live", owner)
    _simulate(session, study, get_graph(h.scan))
    keys = [t["key"] for t in compute(session, study)["extra"]["tables"]]
    assert "navigation_metrics" in keys and not any(k.startswith("nav_capability") for k in keys)


@pytest.mark.parametrize(
    "change, field, where",
    [
        (lambda d: d["paths"][2].update(scan="no-such-house"), "scan", "path_id 702"),
        (
            lambda d: d["paths"][3].update(path=[d["paths"][3]["path"][0], d["paths"][3]["path"][-1]]),
            "path",
            "path_id 703",
        ),
        (lambda d: d["paths"][4]["samples"][2].update(score="best"), "samples[2].score", "path_id 704"),
        (lambda d: d["paths"][1]["reference"].update(instruction=" "), "reference.instruction", "path_id 701"),
    ],
)
def test_bad_capability_file_is_refused_whole(session, change, field, where):
    h = house()
    import_house(session, h)
    owner = make_user(session, "researcher")
    data = capability_file(h)
    change(data)
    with pytest.raises(InputError) as e:
        services.create_study(
            session, owner, "navigation", services.StudySettings(title="bad"), json.dumps(data).encode(), "capability"
        )
    assert e.value.field == field and where in str(e.value)
    session.rollback()
    assert session.scalar(select(func.count()).select_from(Study)) == 0
    assert session.scalar(select(func.count()).select_from(Item)) == 0


@pytest.mark.skipif(
    not (GREEDY.exists() and CANDIDATES.exists() and CONN.is_dir()),
    reason=f"real coop speaker files or R2R connectivity absent under {COOP.parent}",
)
def test_real_coop_files_convert_and_import(sqlite_url, tmp_path):
    from app.cli import main
    from app.db import get_sessionmaker

    out = tmp_path / "cap.json"
    result = CliRunner().invoke(
        main,
        [
            "nav",
            "capability-file",
            "--greedy",
            str(GREEDY),
            "--candidates",
            str(CANDIDATES),
            "--out",
            str(out),
            "--speaker",
            "t5",
        ],
    )
    assert result.exit_code == 0, result.output
    # Every one of the 75 greedy paths has sampled candidates; candidate 0 is the greedy output.
    assert "75 of 75 greedy paths are in the candidates file" in result.output
    data = json.loads(out.read_text())
    greedy = {r["path_id"]: r for k, r in json.loads(GREEDY.read_text()).items() if k != "0"}
    assert data["speaker"] == "t5" and len(data["paths"]) == 75
    for p in data["paths"]:
        g = greedy[p["path_id"]]
        assert p["inference"] == {"instruction": g["generated_instr"], "score": g["generated_instr_sum_log_prob"]}
        assert p["reference"] == {"instruction": g["instructions"][0], "score": None}
        assert [s["candidate"] for s in p["samples"]] == list(range(1, 11))
        assert all(s["score"] is None for s in p["samples"])

    session = get_sessionmaker(sqlite_url)()
    try:
        for scan in sorted({p["scan"] for p in data["paths"]}):
            import_connectivity(session, CONN / f"{scan}_connectivity.json")
        owner = make_user(session, "researcher")
        study = services.create_study(
            session, owner, "navigation", services.StudySettings(title="coop t5"), out.read_bytes(), "capability"
        )
        items = session.scalars(select(Item).where(Item.study_id == study.id)).all()
        assert len(items) == 75 * 12
        roles = {}
        for i in items:
            roles[i.reference["role"]] = roles.get(i.reference["role"], 0) + 1
        assert roles == {"inference": 75, "sample": 750, "reference": 75}
        assert {i.category for i in items} == {"t5", "t5 (samples)", "human"}
        # No followers yet: no leaderboard section; the analysis says what the scores allow.
        from app.kinds.navigation.capability import analyse, load_paths

        res = analyse(load_paths(session, study)["t5"])
        assert res["paths"] == 75 and res["counted"] == 0 and not res["search_available"]
        assert res["gamma"]["share"] is None
    finally:
        session.close()
