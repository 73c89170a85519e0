"""The capability analysis (paper section 4.3) on hand-built paths whose rho, PPG and gamma are
worked out by hand here, plus the `capability` upload format and the coop converter."""

from __future__ import annotations

import json

import numpy as np
import pytest

from app.errors import InputError
from app.kinds.navigation.capability import (
    NO_INFERENCE_SCORE,
    NO_SAMPLE_SCORE,
    NOT_FOLLOWED,
    Candidate,
    PathCandidates,
    analyse,
    capability_items,
    coop_to_capability,
    import_capability,
    parse_capability,
    speaker_tables,
)


def cand(role, score, sr=None, ndtw=None, k=None, text=None) -> Candidate:
    # SPL and SDTW follow from SR and nDTW here (a straight walk: SPL = SR).
    values = (
        {}
        if sr is None
        else {"success": float(sr), "ndtw": float(ndtw), "spl": float(sr), "sdtw": float(sr) * float(ndtw)}
    )
    return Candidate(role=role, score=score, values=values, candidate=k, instruction=text)


def path(name, inference, samples, reference) -> PathCandidates:
    return PathCandidates(
        name,
        cand("inference", *inference),
        tuple(cand("sample", *s, k=k) for k, s in enumerate(samples)),
        None if reference is None else cand("reference", *reference),
    )


# (score, SR, nDTW) per candidate; the comments give each path's picks.
P1 = path("h:1", (-5, 0, 0.5), [(-7, 1, 0.9), (-9, 0, 0.2)], (-6, 1, 0.8))
# r = inference (-5); r*_search = inference (the reference's -6 is lower); pragmatic: sample 0.
P2 = path("h:2", (-8, 0, 0.4), [(-6, 1, 0.7), (-10, 0, 0.1)], (-4, 1, 1.0))
# r = sample 0 (-6 beats the inference's -8); r*_search = the reference (-4); pragmatic: sample 0.
P3 = path("h:3", (-3, 1, 0.6), [(-3, 0, 0.3), (-12, 0, 0.95)], (-3, 0, 0.2))
# ties at -3: r and r*_search keep the inference output; pragmatic (by nDTW): sample 1, whose
# SR is 0 although the inference output's is 1: the oracle's SR on this path is 0.

# Wilson bounds (statsmodels' proportion_confint(method="wilson") gives the same).
WILSON = {
    (1, 3): (0.06149194472039621, 0.7923403991979522),
    (2, 3): (0.2076596008020477, 0.9385080552796037),
    (1, 4): (0.04558726080970055, 0.6993581574175981),
    (3, 4): (0.30064184258240184, 0.9544127391902995),
}


def test_rho_ppg_and_gamma_by_hand():
    res = analyse([P1, P2, P3], metrics=("success", "ndtw"))
    assert res["paths"] == 3 and res["counted"] == 3 and res["skipped"] == {}
    assert res["search_available"] and res["unavailable"] == [] and res["select"] == "ndtw"
    sr, nd = res["metrics"]["success"], res["metrics"]["ndtw"]
    expected = {  # (SR, nDTW) means over the three paths
        "speaker_choice": ((0 + 1 + 1) / 3, (0.5 + 0.7 + 0.6) / 3),
        "inference": ((0 + 0 + 1) / 3, (0.5 + 0.4 + 0.6) / 3),
        "search": ((0 + 1 + 1) / 3, (0.5 + 1.0 + 0.6) / 3),
        "pragmatic": ((1 + 1 + 0) / 3, (0.9 + 0.7 + 0.95) / 3),
        "reference": ((1 + 1 + 0) / 3, (0.8 + 1.0 + 0.2) / 3),
        "ppg_search": (0.0, (0 + 0.3 + 0) / 3),
        "ppg_pragmatic": ((1 + 0 - 1) / 3, (0.4 + 0 + 0.35) / 3),
        "difference": ((1 + 0 - 1) / 3, (0.4 - 0.3 + 0.35) / 3),
    }
    for key, (want_sr, want_nd) in expected.items():
        assert sr[key]["mean"] == pytest.approx(want_sr, abs=1e-15), key
        assert nd[key]["mean"] == pytest.approx(want_nd), key
        assert sr[key]["n"] == nd[key]["n"] == 3
        for e in (sr[key], nd[key]):
            assert e["low"] - 1e-12 <= e["mean"] <= e["high"] + 1e-12
    # PPG_search on SR is 0 on every path, both sides 0/1: Bonett-Price's adjusted Wald
    # interval with no discordant path, q12 = q21 = (0 + 1) / (3 + 2) = 0.2:
    # 0 +/- 1.959964 * sqrt((0.2 + 0.2 - 0) / 5) = +/- 1.959964 * 0.2828427 = +/- 0.5543615.
    assert sr["ppg_search"]["mean"] == 0.0 and sr["ppg_search"]["method"] == "adjusted Wald (Bonett-Price)"
    assert sr["ppg_search"]["low"] == pytest.approx(-0.5543615297398711, abs=1e-12)
    assert sr["ppg_search"]["high"] == pytest.approx(0.5543615297398711, abs=1e-12)
    # A rho on SR (0/1 per path) is Wilson's interval: r succeeds on 2 of 3 paths.
    assert sr["speaker_choice"]["low"] == pytest.approx(WILSON[2, 3][0], rel=1e-12)
    assert sr["speaker_choice"]["method"] == "Wilson"
    # PPG_pragmatic on nDTW: per path .4, 0, .35, t on the paired differences (2 df):
    # mean .25, sd = sqrt(((.15)**2 + (.25)**2 + (.1)**2) / 2) = 0.2179449, half = 4.3026527 *
    # 0.2179449 / sqrt(3) = 0.5414053.
    ppg = nd["ppg_pragmatic"]
    assert ppg["method"] == "t on paired differences"
    assert ppg["low"] == pytest.approx(0.25 - 0.5414053, abs=1e-6)
    assert ppg["high"] == pytest.approx(0.25 + 0.5414053, abs=1e-6)
    # gamma: path 1's inference output beats both samples, path 2's loses (-6 > -8), path 3's
    # ties (-3 = -3) and counts half: (1 + 1/2) / 3.
    g = res["gamma"]
    assert (g["paths"], g["wins"], g["ties"], g["losses"], g["k"]) == (3, 1, 1, 1, 1.5)
    assert g["share"] == {
        "n": 3,
        "mean": 0.5,
        "low": pytest.approx(WILSON[1, 3][0], rel=1e-12),
        "high": pytest.approx(WILSON[2, 3][1], rel=1e-12),
        "method": "Wilson, ties as losses (low) and as wins (high)",
    }
    assert res["picked_sample"]["k"] == 1 and res["picked_sample"]["paths"] == 3


def test_the_pragmatic_oracle_reports_one_instruction_per_path():
    # nDTW picks sample 0 (.8), which nobody reached the goal with; sample 1 and the inference
    # output both succeeded. Every metric is sample 0's: SR 0, not the best SR of another one.
    p = path("o:1", (-1, 1, 0.6), [(-2, 0, 0.8), (-3, 1, 0.7)], (-9, 1, 0.9))
    res = analyse([p], metrics=("success", "ndtw"))
    m = res["metrics"]
    assert (m["success"]["pragmatic"]["mean"], m["ndtw"]["pragmatic"]["mean"]) == (0.0, 0.8)
    assert (m["success"]["ppg_pragmatic"]["mean"], m["ndtw"]["ppg_pragmatic"]["mean"]) == (-1.0, pytest.approx(0.2))
    # Selected by SR, the inference output (r's own choice) and sample 1 tie at 1: r's choice
    # is kept, so the oracle is r on this path and every PPG_pragmatic is 0.
    res = analyse([p], metrics=("success", "ndtw"), select="success")
    m = res["metrics"]
    assert (m["success"]["pragmatic"]["mean"], m["ndtw"]["pragmatic"]["mean"]) == (1.0, 0.6)
    assert m["success"]["ppg_pragmatic"]["mean"] == m["ndtw"]["ppg_pragmatic"]["mean"] == 0.0
    # r is sample 0 here (-1 > -2); a tie on nDTW with the inference output keeps r's choice.
    q = path("o:2", (-2, 0, 0.6), [(-1, 1, 0.6)], (-9, 1, 0.9))
    assert analyse([q], metrics=("success", "ndtw"))["metrics"]["success"]["ppg_pragmatic"]["mean"] == 0.0
    with pytest.raises(ValueError):
        analyse([p], metrics=("success", "ndtw"), select="spl")
    tables = speaker_tables("t5", analyse([p]))
    assert "the one its followers did best on by nDTW" in tables[0]["note"]
    assert "PPG_pragmatic can be negative" in tables[0]["note"]


def test_unscored_samples_are_left_out_of_every_row():
    # Sample 1 of q1 and sample 0 of q2 have no speaker score: r cannot rank them, so neither
    # r nor r*_pragmatic may pick them (q1's unscored sample was followed best, nDTW 1.0).
    q1 = path("u:1", (-5, 0, 0.5), [(-7, 1, 0.8), (None, 1, 1.0)], (-6, 1, 0.9))
    q2 = path("u:2", (-4, 1, 0.7), [(None, 0, 0.2), (-3, 0, 0.4)], (-9, 1, 0.9))
    # An unscored sample nobody has followed does not hold its path back.
    q3 = path("u:3", (-2, 1, 1.0), [(-3, 0, 0.1), (None, None, None)], (-8, 1, 1.0))
    res = analyse([q1, q2, q3], metrics=("success", "ndtw"))
    assert res["counted"] == 3 and res["skipped"] == {} and res["unscored_samples"] == 3
    nd = res["metrics"]["ndtw"]
    assert nd["speaker_choice"]["mean"] == pytest.approx((0.5 + 0.4 + 1.0) / 3)  # r on q2: sample 1 (-3)
    assert nd["pragmatic"]["mean"] == pytest.approx((0.8 + 0.7 + 1.0) / 3)
    assert nd["search"]["mean"] == pytest.approx((0.5 + 0.4 + 1.0) / 3)
    assert nd["ppg_pragmatic"]["mean"] == pytest.approx((0.3 + 0.3 + 0) / 3)
    # gamma compares the scored samples only: q1 and q3 win, q2 loses (-3 > -4).
    assert (res["gamma"]["paths"], res["gamma"]["wins"], res["gamma"]["losses"]) == (3, 2, 1)
    note = speaker_tables("t5", res)[0]["note"]
    assert (
        "3 samples have no speaker score: left out of U_sub on every row and of γ (the speaker "
        "cannot rank them, so neither r nor an oracle may choose them)."
    ) in note


def test_the_paths_behind_every_row_do_not_depend_on_the_reference_scores():
    full = analyse([P1, P2, P3], metrics=("success", "ndtw"))
    p2_unscored_ref = path("h:2", (-8, 0, 0.4), [(-6, 1, 0.7), (-10, 0, 0.1)], (None, 1, 1.0))
    res = analyse([P1, p2_unscored_ref, P3], metrics=("success", "ndtw"))
    # Still all three paths, on every row; only r*_search is not reported.
    assert res["counted"] == 3 and res["skipped"] == {} and not res["search_available"]
    for key in ("speaker_choice", "inference", "pragmatic", "reference", "ppg_pragmatic"):
        for m in ("success", "ndtw"):
            assert res["metrics"][m][key] == full["metrics"][m][key], (key, m)
    assert res["metrics"]["ndtw"]["search"] is None and res["metrics"]["ndtw"]["ppg_search"] is None
    assert res["unavailable"] == [
        "r*_search and PPG_search: 1 of the 3 counted paths has no speaker score for the human reference; "
        "r*_search is reported only when every counted path has one, so that every row is over the same paths"
    ]
    assert "cannot compare" in res["metrics"]["ndtw"]["advice"]
    # Only one reference scored: the same three paths again.
    only_one = [P1] + [
        path(
            p.path,
            (p.inference.score, p.inference.values["success"], p.inference.values["ndtw"]),
            [(s.score, s.values["success"], s.values["ndtw"]) for s in p.samples],
            (None, p.reference.values["success"], p.reference.values["ndtw"]),
        )
        for p in (P2, P3)
    ]
    res = analyse(only_one, metrics=("success", "ndtw"))
    assert res["counted"] == 3
    assert res["metrics"]["success"]["speaker_choice"] == full["metrics"]["success"]["speaker_choice"]
    assert "2 of the 3 counted paths have no speaker score" in res["unavailable"][0]


def test_paths_left_out_of_every_row_and_why():
    no_inference_score = path("l:1", (None, 1, 1.0), [(-2, 1, 1.0)], (-9, 1, 1.0))
    no_sample_score = path("l:2", (-1, 1, 1.0), [(None, 1, 1.0), (None, 0, 0.5)], (-9, 1, 1.0))
    # The reference nobody followed yet: r*_search would not pick it (-7), but the path waits
    # for it all the same, so that which paths count never depends on the scores.
    reference_unfollowed = path("l:3", (-1, 1, 0.5), [(-2, 0, 0.1)], (-7, None, None))
    sample_unfollowed = path("l:4", (-1, 1, 1.0), [(-2, 1, 1.0), (-3, None, None)], (-9, 1, 1.0))
    res = analyse(
        [P1, P2, P3, no_inference_score, no_sample_score, reference_unfollowed, sample_unfollowed],
        metrics=("success", "ndtw"),
    )
    assert res["paths"] == 7 and res["counted"] == 3
    assert res["skipped"] == {NO_INFERENCE_SCORE: 1, NO_SAMPLE_SCORE: 1, NOT_FOLLOWED: 2}
    assert res["metrics"]["success"]["speaker_choice"]["n"] == res["metrics"]["success"]["reference"]["n"] == 3
    # gamma needs no followers: P1-P3 and the two unfollowed paths (both win) have scores.
    assert (res["gamma"]["paths"], res["gamma"]["wins"], res["gamma"]["ties"]) == (5, 3, 1)
    note = speaker_tables("t5", res)[0]["note"]
    assert note.startswith(
        "Paths counted: 3 of 7. "
        "Left out of every row: 1 (reason: the inference output has no speaker score, so "
        "the speaker cannot rank U_sub). "
        "Left out of every row: 1 (reason: no sample has a speaker score, so U_sub would be "
        "the inference output alone). "
        "Left out of every row: 2 (reason: a candidate of U_sub or the human reference has "
        "no valid annotation yet). "
        "2 samples have no speaker score"
    )


def test_no_scores_leave_every_path_out_and_say_why():
    paths = [path(f"h:{k}", (None, k % 2, 0.5), [(None, 1, 0.9), (None, 0, 0.1)], (None, 1, 0.7)) for k in range(4)]
    res = analyse(paths, metrics=("success", "ndtw"))
    assert res["counted"] == 0 and res["skipped"] == {NO_INFERENCE_SCORE: 4} and not res["search_available"]
    sr = res["metrics"]["success"]
    assert (
        sr["speaker_choice"] == sr["pragmatic"] == {"n": 0, "mean": None, "low": None, "high": None, "method": "Wilson"}
    )
    assert sr["search"] is None and sr["ppg_search"] is None and sr["difference"] is None
    assert "cannot compare" in sr["advice"]
    assert res["gamma"]["share"] is None and res["picked_sample"]["share"] is None
    text = " ".join(res["unavailable"])
    assert "r*_search" in text and "human references have no speaker score" in text
    assert "gamma: the inference outputs have no speaker score" in text


def test_coop_like_scores_only_on_the_inference_output():
    # The released coop files: a log-probability for the greedy output, none for the samples
    # or the reference. The speaker cannot rank its samples: no path counts, and the tables
    # say so rather than compare r, which could only be the inference output, with an oracle
    # choosing among candidates r never could.
    paths = [path(f"h:{k}", (-12.0, 0, 0.3), [(None, 1, 0.8)], (None, 1, 0.9)) for k in range(3)]
    res = analyse(paths, metrics=("success", "ndtw"))
    assert res["counted"] == 0 and res["skipped"] == {NO_SAMPLE_SCORE: 3} and res["unscored_samples"] == 3
    assert res["metrics"]["ndtw"]["ppg_pragmatic"]["n"] == 0
    assert not res["search_available"] and res["gamma"]["share"] is None
    assert "gamma: no path has speaker scores for the inference output and at least one sample" in res["unavailable"]
    tables = speaker_tables("t5", res)
    assert tables[2]["rows"][0]["remark"] == (
        "no path has speaker scores for the inference output and at least one sample"
    )


def test_gamma_ties_count_half():
    def g(name, inference, samples):
        return PathCandidates(
            name,
            Candidate("inference", inference[0], instruction=inference[1]),
            tuple(Candidate("sample", sc, candidate=k, instruction=t) for k, (sc, t) in enumerate(samples)),
        )

    paths = [
        # A sample that is the inference output's own text ties, even where the stored score is
        # higher by rounding: it is the same instruction.
        g("g:1", (-5.0, "go to the sofa"), [(-4.999999, " go to  the sofa"), (-7.0, "turn left")]),
        # Another instruction with exactly the same score: a tie.
        g("g:2", (-5.0, "go left"), [(-5.0, "go right")]),
        g("g:3", (-5.0, "go up"), [(-6.0, "go down")]),  # a win
        # A copy of the inference output does not save it from a better sample: a loss.
        g("g:4", (-5.0, "stop"), [(-5.5, "stop"), (-4.0, "wait")]),
    ]
    res = analyse(paths, metrics=("success", "ndtw"))
    gm = res["gamma"]
    assert (gm["paths"], gm["wins"], gm["ties"], gm["losses"], gm["k"]) == (4, 1, 2, 1, 2.0)
    # (1 + 2/2) / 4; the interval from Wilson(1 of 4)'s low to Wilson(3 of 4)'s high.
    assert gm["share"] == {
        "n": 4,
        "mean": 0.5,
        "low": pytest.approx(WILSON[1, 4][0], rel=1e-12),
        "high": pytest.approx(WILSON[3, 4][1], rel=1e-12),
        "method": "Wilson, ties as losses (low) and as wins (high)",
    }
    row = speaker_tables("t5", res)[2]["rows"][0]
    assert row["remark"] == "1 won, 2 tied, 1 lost; the ties count half: (1 + 2/2) / 4"
    # Without ties the share is the plain Wilson one.
    res = analyse(paths[2:], metrics=("success", "ndtw"))
    assert res["gamma"]["share"] == {
        "n": 2,
        "mean": 0.5,
        "low": pytest.approx(0.09453120573423074, rel=1e-12),
        "high": pytest.approx(0.9054687942657693, rel=1e-12),
        "method": "Wilson, ties as losses (low) and as wins (high)",
    }


def test_advice_follows_the_interval_of_the_difference():
    # Humans do much better on a sample than on r, and the reference is never picked:
    # PPG_pragmatic large, PPG_search 0 => the listener model.
    listener = [path(f"a:{k}", (-1, 0, 0.2), [(-2, 1, 0.9)], (-5, 1, 1.0)) for k in range(6)]
    res = analyse(listener, metrics=("success", "ndtw"))
    assert "model of the listener" in res["metrics"]["ndtw"]["advice"]
    # The reference is picked and followed well, no sample is better than r => search.
    search = [path(f"b:{k}", (-2, 0, 0.3), [(-3, 0, 0.1)], (-1, 1, 0.9 + k / 100)) for k in range(6)]
    res = analyse(search, metrics=("success", "ndtw"))
    assert res["metrics"]["ndtw"]["ppg_search"]["mean"] == pytest.approx(0.6 + 2.5 / 100)
    assert "inference algorithm" in res["metrics"]["ndtw"]["advice"]
    # Half and half: the interval of the difference covers 0.
    res = analyse(listener[:3] + search[:3], metrics=("success", "ndtw"))
    assert res["metrics"]["ndtw"]["advice"].startswith("no clear difference")
    d = res["metrics"]["ndtw"]["difference"]
    assert d["low"] <= 0 <= d["high"]
    # One path is too few to tell.
    assert "too few" in analyse(listener[:1], metrics=("success", "ndtw"))["metrics"]["ndtw"]["advice"]


def test_ppg_interval_is_t_on_the_paired_path_differences():
    import scipy.stats

    rng = np.random.default_rng(5)
    paths = []
    for k in range(30):
        v = rng.uniform(0, 1, size=4)
        paths.append(path(f"c:{k}", (-1, 0, v[0]), [(-2, 0, v[1]), (-3, 0, v[2])], (-0.5 if k % 3 else -9, 0, v[3])))
    res = analyse(paths, metrics=("ndtw",))
    # Per path rho(r*_search) - rho(r), the unit the path: scipy's t interval of the mean
    # difference on 29 df (the same as stats.paired_effect's).
    r = np.array([p.inference.values["ndtw"] for p in paths])
    s = np.array([p.reference.values["ndtw"] if k % 3 else p.inference.values["ndtw"] for k, p in enumerate(paths)])
    d = s - r
    low, high = scipy.stats.t.interval(0.95, len(d) - 1, loc=d.mean(), scale=scipy.stats.sem(d))
    got = res["metrics"]["ndtw"]["ppg_search"]
    assert got["mean"] == pytest.approx(float(d.mean()))
    assert got["low"] == pytest.approx(low, abs=1e-12) and got["high"] == pytest.approx(high, abs=1e-12)
    assert got["method"] == "t on paired differences" and got["n"] == 30
    # A rho (in [0, 1]) is stats.mean_interval over the paths.
    from app.leaderboards import stats

    assert res["metrics"]["ndtw"]["inference"] == stats.mean_interval(r.tolist()).as_dict()


def test_tables_render_every_quantity_and_the_advice():
    tables = speaker_tables("t5", analyse([P1, P2, P3]))
    keys = [t["key"] for t in tables]
    assert keys == ["nav_capability", "nav_capability_advice", "nav_capability_scores"]
    rows = {r["key"]: r for r in tables[0]["rows"]}
    assert set(rows) == {
        "speaker_choice",
        "inference",
        "search",
        "pragmatic",
        "reference",
        "ppg_search",
        "ppg_pragmatic",
        "difference",
    }
    assert rows["pragmatic"]["success"]["mean"] == pytest.approx(2 / 3)
    assert "Paths counted: 3 of 3" in tables[0]["note"] and "Left out" not in tables[0]["note"]
    assert [r["metric"] for r in tables[1]["rows"]] == ["SR", "SPL", "nDTW", "SDTW"]
    gamma = tables[2]["rows"][0]
    assert gamma["key"] == "gamma" and gamma["share"]["mean"] == 0.5 and gamma["paths"] == 3
    assert gamma["remark"] == "1 won, 1 tied, 1 lost; the ties count half: (1 + 1/2) / 3"
    assert "a tie counts half" in tables[2]["note"]
    json.dumps(tables, allow_nan=False)


# -- the upload format -------------------------------------------------------------------------


def capability_file(**change) -> dict:
    data = {
        "speaker": "t5",
        "paths": [
            {
                "path_id": "5593",
                "scan": "houseA",
                "path": ["a", "b", "c"],
                "heading": 0.05,
                "reference": {"instruction": "walk to the sofa", "score": -20.1},
                "inference": {"instruction": "go to the sofa", "score": -12.3},
                "samples": [{"instruction": "go left", "score": -15.0}, {"instruction": "go right", "score": None}],
            },
            {
                "path_id": 17,
                "scan": "houseA",
                "path": ["c", "d"],
                "heading": 1.0,
                "reference": {"instruction": "stop by the door", "score": None},
                "inference": {"instruction": "stop", "score": None},
                "samples": [{"instruction": "wait", "score": None, "candidate": 3}],
            },
        ],
    }
    data.update(change)
    return data


def test_capability_items_shape():
    parsed = parse_capability(json.dumps(capability_file()).encode())
    items = capability_items(parsed)
    assert [i.external_id for i in items] == [
        "t5:5593:inference",
        "t5:5593:sample:0",
        "t5:5593:sample:1",
        "5593:reference",
        "t5:17:inference",
        "t5:17:sample:3",
        "17:reference",
    ]
    first = items[0]
    assert first.payload == {"instruction": "go to the sofa", "scan": "houseA", "start": "a", "heading": 0.05}
    assert first.reference == {"path": ["a", "b", "c"], "role": "inference", "speaker_score": -12.3}
    assert items[2].reference == {"path": ["a", "b", "c"], "role": "sample", "speaker_score": None, "candidate": 1}
    assert items[3].reference["role"] == "reference" and items[3].reference["speaker_score"] == -20.1
    assert [(i.source, i.category) for i in items[:4]] == [
        ("agent", "t5"),
        ("agent", "t5 (samples)"),
        ("agent", "t5 (samples)"),
        ("human", "human"),
    ]
    assert {i.cluster for i in items[:4]} == {i.exclusion_group for i in items[:4]} == {"houseA:5593"}
    assert items[4].cluster == "houseA:17" and not any(i.is_gold for i in items)
    # The form's speaker option names the speaker over the file's.
    assert parse_capability(capability_file(), speaker="other").speaker == "other"


def test_the_pragmatic_metric_option_is_checked():
    data = json.dumps(capability_file()).encode()
    with pytest.raises(InputError) as e:
        import_capability(data, {"pragmatic_metric": "rating"})
    assert e.value.field == "pragmatic_metric"
    assert str(e.value) == "field 'pragmatic_metric': pragmatic_metric must be one of success, spl, ndtw, sdtw"


@pytest.mark.parametrize(
    "mutate, field, where",
    [
        (lambda d: d["paths"][0]["reference"].pop("instruction"), "reference.instruction", "path_id 5593"),
        (lambda d: d["paths"][1]["samples"][0].update(score="high"), "samples[0].score", "path_id 17"),
        (lambda d: d["paths"][0].update(samples=[]), "samples", "path_id 5593"),
        (lambda d: d["paths"][0]["samples"][1].update(candidate=0), "samples[1].candidate", "path_id 5593"),
        (lambda d: d["paths"][1].update(path_id="5593"), "path_id", "path_id 5593"),
        (lambda d: d["paths"][1].update(heading=None), "heading", "path_id 17"),
        (lambda d: d["paths"][0].update(inference="go"), "inference", "path_id 5593"),
        (lambda d: d["paths"][0].update(path=[]), "path", "path_id 5593"),
        (lambda d: d.update(speaker="human"), "speaker", ""),
        (lambda d: d.pop("speaker"), "speaker", ""),
        (lambda d: d.update(paths=[]), "paths", ""),
    ],
)
def test_bad_capability_files_name_the_path_and_field(mutate, field, where):
    data = capability_file()
    mutate(data)
    with pytest.raises(InputError) as e:
        parse_capability(json.dumps(data).encode())
    assert e.value.field == field
    assert where in str(e.value)


# -- the coop converter ------------------------------------------------------------------------


def _coop(pid, text, **extra):
    return {
        "generated_instr": text,
        "scan": "houseA",
        "path": ["a", "b"],
        "heading": 0.5,
        "path_id": pid,
        "instr_id": f"{pid}_0",
        "instructions": ["the human one", "another"],
        "distance": 1.0,
        **extra,
    }


def test_coop_converter():
    greedy = {
        "0": _coop(1, "qc", model="speaker_ref_agent1_eval"),
        "10": _coop(7, "greedy seven", generated_instr_sum_log_prob=-3.5, model="speaker-clip-t5_greedy"),
        "11": _coop(8, "greedy eight", generated_instr_sum_log_prob=-4.5, model="speaker-clip-t5_greedy"),
        "12": _coop(9, "greedy nine", generated_instr_sum_log_prob=-1.0, model="speaker-clip-t5_greedy"),
    }
    cands = {
        "7_0": _coop(7, "greedy seven"),
        "7_1": _coop(7, "a sample"),
        "7_2": _coop(7, "b sample"),
        "8_0": _coop(8, "not the greedy one"),
        "8_1": _coop(8, "c sample"),
    }
    data, report = coop_to_capability(greedy, cands)
    assert report["greedy_paths"] == 3 and report["in_candidates"] == 2
    assert report["missing_from_candidates"] == ["9"] and report["speaker"] == "speaker-clip-t5"
    assert report["candidate_0_is_the_greedy_output"] == 1
    seven, eight = data["paths"]
    assert seven["inference"] == {"instruction": "greedy seven", "score": -3.5}
    assert seven["reference"] == {"instruction": "the human one", "score": None}
    assert [(s["candidate"], s["score"]) for s in seven["samples"]] == [(1, None), (2, None)]
    assert [s["candidate"] for s in eight["samples"]] == [0, 1]  # candidate 0 differs: kept
    parsed = parse_capability(data)
    assert [i.external_id for i in capability_items(parsed)][:4] == [
        "speaker-clip-t5:7:inference",
        "speaker-clip-t5:7:sample:1",
        "speaker-clip-t5:7:sample:2",
        "7:reference",
    ]
    data, report = coop_to_capability(greedy, cands, speaker="t5", limit_paths=1)
    assert data["speaker"] == "t5" and len(data["paths"]) == 1 and report["in_candidates"] == 2


def test_the_documented_example_parses():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "kinds" / "navigation-capability.md").read_text()
    block = doc.split("```json", 1)[1].split("```", 1)[0]
    items = capability_items(parse_capability(block.encode()))
    assert [i.external_id for i in items] == [
        "t5:5593:inference",
        "t5:5593:sample:0",
        "t5:5593:sample:1",
        "5593:reference",
    ]
    # The worked example's numbers, as the doc prints them.
    res = analyse([P1, P2, P3], metrics=("success", "ndtw"))
    for key, sr, nd in (
        ("speaker_choice", "0.667", "0.600"),
        ("search", "0.667", "0.700"),
        ("pragmatic", "0.667", "0.850"),
        ("ppg_pragmatic", "0.000", "0.250"),
        ("difference", "0.000", "0.150"),
    ):
        m = res["metrics"]
        assert f"{m['success'][key]['mean']:.3f}" == sr and f"{m['ndtw'][key]['mean']:.3f}" == nd
        assert sr in doc and nd in doc
    assert f"{res['gamma']['share']['mean']:.3f}" == "0.500" and "gamma = (1 + 1/2) / 3 = 0.500" in doc
