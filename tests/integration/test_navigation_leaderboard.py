"""Speakers' instructions as navigation items (the coop greedy format) and the navigation
leaderboard section: simulated followers submit through the assignment engine, and the per
speaker means, intervals (the path the unit) and paired tests are checked against a plain
recomputation from the stored annotation scores. SQLite and PostgreSQL."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from sqlalchemy import select

from app.errors import InputError
from app.kinds.navigation.environments import get_graph, import_connectivity, import_house
from app.kinds.navigation.grammar import describe_path
from app.kinds.navigation.house import generate_house, sample_paths
from app.leaderboards.service import compute
from app.studies import assignment, services
from app.studies.models import Annotation, Item, Study
from tests.conftest import login, make_user

ROOT = Path(__file__).resolve().parents[2]
COOP_GREEDY = ROOT.parent / "shared" / "data" / "coop" / "anno_speaker-clip-t5_greedy.json"
CONN = ROOT.parent / "shared" / "data" / "r2r" / "connectivity"

_HOUSE = {}


def house():
    if "h" not in _HOUSE:
        _HOUSE["h"] = generate_house(5)
    return _HOUSE["h"]


def coop_file(h, n: int = 6, model: str = "toy-speaker") -> bytes:
    """A coop-shaped greedy file on a generated house: key "0" the QC episode, then one
    generated instruction per path with two human references."""
    paths = sample_paths(h, n + 1, rng=11)
    data = {}
    for k, p in enumerate(paths):
        refs = describe_path(h, p, rng=200 + k, n=2)
        generated = describe_path(h, p, rng=900 + k, n=1)[0]
        key = str(k if k == 0 else 100 + k)
        data[key] = {
            "generated_instr": generated,
            "distance": 1.0,
            "scan": h.scan,
            "path": list(p.path),
            "heading": p.heading,
            "instr_id": f"{50 + k}_0",
            "instructions": refs,
            "path_id": 50 + k,
            "model": model,
            "generated_instr_sum_log_prob": -3.0,
            "generated_instr_avg_log_prob": -0.3,
        }
    return json.dumps(data).encode()


def test_coop_import_shapes_items(session):
    h = house()
    import_house(session, h)
    owner = make_user(session, "researcher")
    data = coop_file(h)
    study = services.create_study(
        session, owner, "navigation", services.StudySettings(title="coop"), data, "coop", {"speaker": "toy"}
    )
    items = session.scalars(select(Item).where(Item.study_id == study.id)).all()
    raw = json.loads(data)
    assert len(items) == 1 + 2 * (len(raw) - 1)
    gold = [i for i in items if i.is_gold]
    assert len(gold) == 1 and gold[0].payload["instruction"] == raw["0"]["generated_instr"]
    agent = [i for i in items if i.source == "agent"]
    human = [i for i in items if i.source == "human" and not i.is_gold]
    assert {i.category for i in agent} == {"toy"} and {i.category for i in human} == {"human"}
    by_group = {}
    for i in agent + human:
        assert i.cluster == i.exclusion_group and i.cluster.startswith(f"{h.scan}:")
        by_group.setdefault(i.cluster, []).append(i)
    assert all(sorted(x.source for x in g) == ["agent", "human"] for g in by_group.values())
    for key, rec in raw.items():
        if key == "0":
            continue
        g = by_group[f"{h.scan}:{rec['path_id']}"]
        a = next(x for x in g if x.source == "agent")
        r = next(x for x in g if x.source == "human")
        assert a.payload["instruction"] == rec["generated_instr"]
        assert r.payload["instruction"] == rec["instructions"][0]
        assert a.reference == r.reference == {"path": rec["path"]}
        assert a.payload["start"] == rec["path"][0] and "path" not in a.payload

    # Without the references: only the speaker's items (and the QC episode).
    only = services.preview_items("navigation", data, "coop", {"with_references": False})
    assert {i.category for i in only.items if not i.is_gold} == {"speaker"}

    # A scan never imported is refused, naming the key and the field.
    raw["103"]["scan"] = "no-such-house"
    with pytest.raises(InputError) as e:
        services.preview_items("navigation", json.dumps(raw).encode(), "coop", {})
    assert e.value.field == "scan" and "'103'" in str(e.value)
    with pytest.raises(InputError) as e:
        services.preview_items("navigation", data, "nope", {})
    assert e.value.field == "format"


@pytest.mark.skipif(
    not (COOP_GREEDY.exists() and CONN.is_dir()),
    reason="real coop greedy file or R2R connectivity absent under ../shared/data",
)
def test_real_coop_greedy_file_imports(sqlite_url):
    from app.db import get_sessionmaker

    session = get_sessionmaker(sqlite_url)()
    try:
        raw = json.loads(COOP_GREEDY.read_bytes())
        for scan in sorted({r["scan"] for r in raw.values()}):
            import_connectivity(session, CONN / f"{scan}_connectivity.json")
        result = services.preview_items("navigation", COOP_GREEDY.read_bytes(), "coop", {"speaker": "clip-t5"})
        assert len(result.items) == 1 + 2 * (len(raw) - 1)
        assert sum(i.source == "agent" for i in result.items) == len(raw) - 1
    finally:
        session.close()


def _follow(graph, ref: list[str], style: str) -> list[str]:
    if style == "exact":
        return list(ref)
    if style == "early":
        return list(ref[: max(1, len(ref) // 2)])
    # A detour: step to a neighbour off the path at the start, come back, then follow.
    off = next((n for n in graph.neighbours(ref[0]) if n not in ref), None)
    return list(ref) if off is None else [ref[0], off, ref[0], *ref[1:]]


def _simulate(session, study: Study, workers: int, graph) -> int:
    done = 0
    for w in range(workers):
        bundle = assignment.enter(session, study, "prolific", f"sim-{w}")
        while True:
            a = assignment.next_item(session, study, bundle.id)
            if a is None:
                break
            item = session.get(Item, a.item_id)
            # Agent instructions are followed worse than human ones: the even-numbered
            # followers stop early on them, one in three detours on a human one. Which
            # followers a path gets varies, so the paired differences vary from path to path
            # and every paired test has a p-value.
            if item.source == "agent":
                style = "early" if w % 2 == 0 else "exact"
            else:
                style = "detour" if (w + a.id) % 3 == 0 else "exact"
            path = _follow(graph, item.reference["path"], style)
            assignment.submit(
                session,
                study,
                bundle.id,
                a.id,
                {"path": path, "trace": [], "rating": 1 + (w + a.id) % 4},
                uuid.uuid4().hex,
            )
            done += 1
    return done


def test_navigation_leaderboard_section(session, client):
    h = house()
    import_house(session, h)
    graph = get_graph(h.scan)
    owner = make_user(session, "researcher")
    s = services.StudySettings(title="Speakers", bundle_size=4, gold_rate=0.0, annotations_per_item=3)
    study = services.create_study(session, owner, "navigation", s, coop_file(h), "coop", {"speaker": "toy"})
    services.set_state(session, study, "live", owner)
    assert _simulate(session, study, 9, graph) > 20

    board = compute(session, study)
    tables = {t["key"]: t for t in board["extra"]["tables"]}
    metrics = {r["category"]: r for r in tables["navigation_metrics"]["rows"]}
    assert set(metrics) == {"human", "toy"}
    from app.leaderboards import stats

    # A straightforward recomputation from the stored annotations.
    anns = session.execute(
        select(Annotation.item_id, Item.category, Item.cluster, Annotation.scores, Annotation.response)
        .join(Item, Item.id == Annotation.item_id)
        .where(Annotation.study_id == study.id, Annotation.is_gold.is_(False), Annotation.excluded.is_(False))
    ).all()
    for cat, row in metrics.items():
        mine = [a for a in anns if a.category == cat]
        assert row["n"] == len(mine)
        per_item = {}
        for a in mine:
            per_item.setdefault(a.item_id, []).append(a)
        assert row["items"] == len(per_item) == 6
        for key in ("success", "ndtw", "spl", "ne", "path_length", "rating"):
            # The mean over instructions of the mean over each instruction's followers.
            means = [
                sum(float(a.response["rating"] if key == "rating" else a.scores[key]) for a in group) / len(group)
                for group in per_item.values()
            ]
            est = row[key]
            assert est["n"] == len(means) == 6
            assert est["mean"] == pytest.approx(sum(means) / len(means))
            assert est["low"] - 1e-12 <= est["mean"] <= est["high"] + 1e-12
    # The simulated followers really differ: some stop early or detour.
    assert 0 < metrics["human"]["success"]["mean"] <= 1 and metrics["toy"]["ndtw"]["mean"] < 1

    paired = [r for r in tables["navigation_paired"]["rows"] if r["category"] == "toy"]
    assert {r["metric"] for r in paired} >= {"SR", "nDTW", "SPL"}
    shared = {a.cluster for a in anns if a.category == "toy"} & {a.cluster for a in anns if a.category == "human"}
    assert shared and all(r["n_paths"] == len(shared) for r in paired)
    sr = next(r for r in paired if r["metric"] == "SR")
    per = {}
    for a in anns:
        if a.cluster in shared:
            per.setdefault((a.category, a.cluster), []).append(float(a.scores["success"]))
    diffs = [sum(per["toy", c]) / len(per["toy", c]) - sum(per["human", c]) / len(per["human", c]) for c in shared]
    assert sr["mean_diff"] == pytest.approx(sum(diffs) / len(diffs))
    # Every metric's test: the per-path means of each speaker over the shared paths, paired,
    # give scipy's t and p (_simulate makes the differences vary from path to path, so no
    # difference is constant and every test has a p-value).
    from scipy.stats import ttest_rel

    order = sorted(shared)
    for key, label in (
        ("success", "SR"),
        ("spl", "SPL"),
        ("ndtw", "nDTW"),
        ("sdtw", "SDTW"),
        ("ne", "NE (m)"),
        ("path_length", "Path length (m)"),
        ("rating", "Rating (1-4)"),
    ):
        per = {}
        for a in anns:
            if a.cluster in shared:
                value = a.response["rating"] if key == "rating" else a.scores[key]
                per.setdefault((a.category, a.cluster), []).append(float(value))
        toy = [sum(per["toy", c]) / len(per["toy", c]) for c in order]
        human = [sum(per["human", c]) / len(per["human", c]) for c in order]
        row = next(r for r in paired if r["metric"] == label)
        assert len({round(t - h, 9) for t, h in zip(toy, human)}) > 1, label  # the setup: not constant
        ref = ttest_rel(toy, human)
        assert row["p"] is not None and row["t"] is not None, label
        assert row["n_paths"] == len(order) == 6
        assert row["p"] == pytest.approx(float(ref.pvalue), rel=1e-9, abs=1e-12), label
        assert row["t"] == pytest.approx(float(ref.statistic), rel=1e-9), label
        assert row["mean_diff"] == pytest.approx(sum(toy) / len(toy) - sum(human) / len(human)), label
        # The difference with its interval and d_z; one speaker compared: Holm leaves p as is.
        effect = stats.paired_effect(toy, human)
        want = effect["difference"].as_dict()
        assert row["difference"] == {
            k: pytest.approx(v, rel=1e-12, abs=1e-12) if isinstance(v, float) else v for k, v in want.items()
        }, label
        assert row["cohen_dz"] == round(effect["cohen_dz"], 3), label  # rows.effect_size_cell
        assert row["p_holm"] == pytest.approx(row["p"]), label
    json.dumps(board, allow_nan=False)  # JSON-safe: no NaN or infinities

    login(client, owner)
    page = client.get(f"/studies/{study.id}/leaderboard")
    assert page.status_code == 200
    assert 'id="navigation_metrics"' in page.text and 'id="navigation_paired"' in page.text
    assert "nDTW" in page.text and "toy" in page.text
    sr = next(r for r in paired if r["metric"] == "SR")
    assert '<tr><td>toy</td><td>SR</td><td><span title="95% interval: ' in page.text
    # Three places; a positive figure that would read 0.000 reads "<0.001" (research/_estimates.html num).
    three = lambda x: "&lt;0.001" if 0 < x < 0.0005 else f"{x:.3f}"  # noqa: E731
    assert (
        f"<td>{three(sr['cohen_dz'])}</td><td>{three(sr['t'])}</td><td>{three(sr['p'])}</td>"
        f"<td>{three(sr['p_holm'])}</td><td>6</td></tr>"
    ) in page.text
    assert "Rank (95%)" in page.text and 'id="navigation_followers_agreement"' in page.text


def test_leaderboard_without_extra_has_none(session):
    from tests.conftest import create_tom_study

    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner)
    assert compute(session, study)["extra"] is None


def _follow_by_instruction(session, study: Study, graph, prefix: str) -> int:
    """Followers until the study has no work left; every follower of an instruction walks the
    same way and gives the same rating (both depend on the instruction's path only)."""
    done = 0
    for w in range(40):
        bundle = assignment.enter(session, study, "prolific", f"{prefix}-{w}")
        got = 0
        while (a := assignment.next_item(session, study, bundle.id)) is not None:
            item = session.get(Item, a.item_id)
            pid = int(item.cluster.split(":")[1])
            if item.source == "agent":
                style = "early" if pid % 2 == 0 else "exact"
            else:
                style = "detour" if pid % 3 == 0 else "exact"
            assignment.submit(
                session,
                study,
                bundle.id,
                a.id,
                {"path": _follow(graph, item.reference["path"], style), "trace": [], "rating": 1 + pid % 4},
                uuid.uuid4().hex,
            )
            got += 1
        if not got:
            break
        done += got
    return done


def _wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * (p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5 / (1 + z * z / n)
    return (0.0 if k == 0 else centre - half, 1.0 if k == n else centre + half)


T975_5 = 2.5705818356363146  # Student's t quantile 0.975 on 5 degrees of freedom (scipy.stats.t.ppf)
T975_2 = 4.302652729749462  # ... on 2 degrees of freedom


def _wilson_real(p: float, n: float, z: float) -> tuple[float, float]:
    """Wilson's interval for a share p of n (not necessarily whole) trials with quantile z."""
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * (p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5 / (1 + z * z / n)
    return (0.0 if p == 0 else centre - half, 1.0 if p == 1 else centre + half)


def test_a_second_follower_with_the_same_result_leaves_every_interval_as_it_was(session):
    """The same instructions, followed once each and then twice each with the same result:
    the intervals resample instructions, so the second follower changes nothing but the
    number of annotations."""
    h = house()
    import_house(session, h)
    graph = get_graph(h.scan)
    owner = make_user(session, "researcher")
    rows = {}
    for per_item in (1, 2):
        s = services.StudySettings(
            title=f"{per_item} per instruction", bundle_size=4, gold_rate=0.0, annotations_per_item=per_item
        )
        study = services.create_study(session, owner, "navigation", s, coop_file(h), "coop", {"speaker": "toy"})
        services.set_state(session, study, "live", owner)
        assert _follow_by_instruction(session, study, graph, f"f{per_item}") == 12 * per_item
        tables = {t["key"]: t for t in compute(session, study)["extra"]["tables"]}
        rows[per_item] = {r["category"]: r for r in tables["navigation_metrics"]["rows"]}
    once, twice = rows[1], rows[2]
    keys = ("success", "spl", "ndtw", "sdtw", "ne", "path_length", "rating")
    for cat in ("human", "toy"):
        assert (once[cat]["items"], once[cat]["n"]) == (6, 6)
        assert (twice[cat]["items"], twice[cat]["n"]) == (6, 12)
        for key in keys:
            assert twice[cat][key] == once[cat][key], (cat, key)
            assert once[cat][key]["n"] == 6
    # What the page shows: SR over the 6 instructions, one path each (the path is the unit):
    # the speaker's early stops fail on the 3 even paths. mean 0.5; cluster-robust variance of
    # the mean v = 6/5 * 6 * 0.25 / 36 = 0.05; n_eff = 0.5 * 0.5 / 0.05 = 5; Wilson at n = 5
    # with z = t(0.975, 5 df) = 2.5705818: centre 0.5, half = z sqrt(0.05 + z^2/100) /
    # (1 + z^2/5) = 0.8758072 / 2.3215785 = 0.3772461: [0.1227539, 0.8772461].
    assert once["toy"]["success"] == {
        "n": 6,
        "mean": 0.5,
        "low": pytest.approx(0.12275388276951782, abs=1e-12),
        "high": pytest.approx(0.8772461172304822, abs=1e-12),
        "method": "Wilson (effective n, clusters)",
        "units": 6,
        "unit": "path",
    }
    assert _wilson_real(0.5, 5.0, T975_5) == (
        pytest.approx(0.12275388276951782, abs=1e-12),
        pytest.approx(0.8772461172304822, abs=1e-12),
    )
    # Every reference is followed to its goal: no spread, so n_eff = the 6 paths: Wilson's
    # [0.476, 1] at z = t(5 df), never [1, 1].
    assert once["human"]["success"] == {
        "n": 6,
        "mean": 1.0,
        "low": pytest.approx(_wilson_real(1.0, 6.0, T975_5)[0], abs=1e-12),
        "high": 1.0,
        "method": "Wilson (effective n, clusters)",
        "units": 6,
        "unit": "path",
    }
    assert f"{once['human']['success']['low']:.3f}" == "0.476"
    # The rating (1 + path id % 4 on paths 51-56: 4, 1, 2, 3, 4, 1): mean 2.5 with one
    # follower or two; its interval on (level - 1) / 3 = 1, 0, 1/3, 2/3, 1, 0 (mean 0.5,
    # squares 0.25 * 4 + 1/36 * 2 = 1.0556, v = 6/5 * 1.0556 / 36 = 0.035185, n_eff =
    # 0.25 / 0.035185 = 7.1053), mapped back by 1 + 3 x.
    assert once["toy"]["rating"]["mean"] == twice["toy"]["rating"]["mean"] == 2.5
    lo, hi = _wilson_real(0.5, 0.25 / (6 / 5 * (4 * 0.25 + 2 / 36) / 36), T975_5)
    assert once["toy"]["rating"]["low"] == pytest.approx(1 + 3 * lo, abs=1e-12)
    assert once["toy"]["rating"]["high"] == pytest.approx(1 + 3 * hi, abs=1e-12)
    assert once["toy"]["rating"]["method"] == "Wilson (effective n, clusters), on (level - 1) / 3, mapped back"
    assert once["toy"]["ndtw"]["low"] < once["toy"]["ndtw"]["mean"] < once["toy"]["ndtw"]["high"]


def test_instruction_estimate_treats_the_path_as_the_unit():
    from app.kinds.navigation.leaderboard import instruction_estimate
    from app.leaderboards import stats

    # One follower per instruction, one instruction per path: SR 2 of 3. Cluster-robust
    # v = 3/2 * (1/9 + 1/9 + 4/9) / 9 = 1/9; n_eff = (2/3)(1/3) / (1/9) = 2; Wilson at n = 2
    # with z = t(0.975, 2 df) = 4.3026527.
    est = instruction_estimate("success", [[1.0], [1.0], [0.0]], ["p1", "p2", "p3"])
    low, high = _wilson_real(2 / 3, 2.0, T975_2)
    assert est == {
        "n": 3,
        "mean": 2 / 3,
        "low": pytest.approx(low, abs=1e-12),
        "high": pytest.approx(high, abs=1e-12),
        "method": "Wilson (effective n, clusters)",
        "units": 3,
        "unit": "path",
    }  # units: the paths the interval resamples
    # Followers who agree: the same instruction means, the same figure.
    assert instruction_estimate("success", [[1.0, 1.0, 1.0], [1.0], [0.0, 0.0]], ["p1", "p2", "p3"]) == est
    # Without paths each instruction is its own unit: Wilson's interval for 2 of 3.
    plain = instruction_estimate("success", [[1.0], [1.0], [0.0]])
    assert (plain["low"], plain["high"]) == (
        pytest.approx(_wilson(2, 3)[0], abs=1e-12),
        pytest.approx(_wilson(2, 3)[1], abs=1e-12),
    )
    # Two instructions of one path are one unit: p1 = {1, 1}, p2 = {0}, p3 = {1}.
    two = instruction_estimate("success", [[1.0], [1.0], [0.0], [1.0]], ["p1", "p1", "p2", "p3"])
    assert two == {
        **stats.mean_interval([1.0, 1.0, 0.0, 1.0], ["p1", "p1", "p2", "p3"]).as_dict(),
        "units": 3,
        "unit": "path",
    }
    # Followers who disagree: SR per instruction 0.5, 1, 0.
    split = instruction_estimate("success", [[1.0, 0.0], [1.0, 1.0], [0.0, 0.0]], ["a", "b", "c"])
    assert split == {**stats.mean_interval([0.5, 1.0, 0.0], ["a", "b", "c"]).as_dict(), "units": 3, "unit": "path"}
    assert instruction_estimate("success", [[1.0, 0.0, 1.0, 0.0], [1.0] * 4, [0.0] * 4], ["a", "b", "c"]) == split
    # NE in metres: Student's t on the paths (unbounded); the instruction means 1, 2.5, 6.
    ne = instruction_estimate("ne", [[1.0], [2.0, 3.0], [6.0]], ["a", "b", "c"])
    assert ne == {
        **stats.mean_interval_unbounded([1.0, 2.5, 6.0], ["a", "b", "c"]).as_dict(),
        "units": 3,
        "unit": "path",
    }
    assert ne["method"] == "t on clusters (cluster-robust variance, G - 1 df)"
    # The rating: levels 1-4 rescaled by (v - 1) / 3, the interval mapped back.
    rating = instruction_estimate("rating", [[4.0], [1.0, 3.0], [2.0]], ["a", "b", "c"])
    unit = stats.mean_interval([1.0, 1 / 3, 1 / 3], ["a", "b", "c"])
    assert rating["mean"] == pytest.approx(8 / 3) and rating["n"] == 3
    assert rating["low"] == pytest.approx(1 + 3 * unit.low) and rating["high"] == pytest.approx(1 + 3 * unit.high)


def test_the_settled_table_is_the_confidence_sequences_of_the_arrivals(session, client):
    """Followers walk every human instruction exactly and stop halfway on the speaker's; the
    settled table read from the API is recomputed from the stored annotations: per speaker
    each path's first follow in the order they were made, the pair's paths in the order the
    later of its two follows was made, and the confidence sequences of app.leaderboards.sequential."""
    from app.leaderboards import sequential

    h = house()
    import_house(session, h)
    graph = get_graph(h.scan)
    owner = make_user(session, "researcher")
    s = services.StudySettings(title="Settled", bundle_size=6, gold_rate=0.0, annotations_per_item=1)
    study = services.create_study(session, owner, "navigation", s, coop_file(h, n=24), "coop", {"speaker": "toy"})
    services.set_state(session, study, "live", owner)
    for w in range(20):
        bundle = assignment.enter(session, study, "prolific", f"settle-{w}")
        while (a := assignment.next_item(session, study, bundle.id)) is not None:
            item = session.get(Item, a.item_id)
            style = "early" if item.source == "agent" else "exact"
            response = {"path": _follow(graph, item.reference["path"], style), "trace": [], "rating": 2}
            assignment.submit(session, study, bundle.id, a.id, response, uuid.uuid4().hex)

    login(client, owner)
    got = client.get(f"/api/v1/studies/{study.id}/leaderboard")
    assert got.status_code == 200
    table = next(t for t in got.json()["extra"]["tables"] if t["key"] == "navigation_settled")
    (row,) = table["rows"]
    assert (row["first"], row["second"]) == ("human", "toy")

    anns = session.execute(
        select(Annotation.id, Annotation.created_at, Item.category, Item.cluster, Annotation.scores)
        .join(Item, Item.id == Annotation.item_id)
        .where(Annotation.study_id == study.id, Annotation.is_gold.is_(False), Annotation.excluded.is_(False))
    ).all()
    first: dict[str, dict[str, tuple]] = {"human": {}, "toy": {}}
    for a in sorted(anns, key=lambda a: (a.created_at, a.id)):
        first[a.category].setdefault(a.cluster, ((a.created_at, a.id), float(a.scores["success"])))
    shared = sorted(
        set(first["human"]) & set(first["toy"]), key=lambda p: max(first["human"][p][0], first["toy"][p][0])
    )
    assert len(shared) == 24
    diffs = [first["human"][p][1] - first["toy"][p][1] for p in shared]
    # The setup: people succeed on every human instruction and fail on most of the speaker's.
    assert all(v == 1.0 for _, v in first["human"].values()) and sum(diffs) >= 20
    seq = sequential.difference_sequence(diffs)  # one pair: alpha 0.05, no Bonferroni
    settled = next(e.n for e in seq if e.low > 0)
    assert row["state"] == "above" and row["settled"] == settled and row["n"] == 24
    assert row["level"] == pytest.approx(95.0)  # one pair: its verdict at the whole 0.05
    assert row["verdict"] == f"human above toy, settled after {settled} paths"
    assert row["difference"] == pytest.approx(seq[-1].as_dict())
    assert row["difference"]["low"] > 0 and row["difference"]["mean"] == pytest.approx(sum(diffs) / 24)
    toy = sequential.mean_sequence([v for _, v in sorted(first["toy"].values())])[-1]
    assert row["second_mean"] == pytest.approx(toy.as_dict()) and row["second_mean"]["n"] == 24
    assert row["first_mean"]["mean"] == 1.0 and row["first_mean"]["high"] == 1.0

    page = client.get(f"/studies/{study.id}/leaderboard")
    assert 'id="navigation_settled"' in page.text and f"human above toy, settled after {settled} paths" in page.text
    assert "<th" in page.text and "Level, %" in page.text
