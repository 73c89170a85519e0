"""The capability analysis (paper section 4.3) on hand-built paths whose rho, PPG and gamma are
worked out by hand here, plus the `capability` upload format and the coop converter."""

from __future__ import annotations

import json

import numpy as np
import pytest

from app.errors import InputError
from app.kinds.navigation.capability import (Candidate, PathCandidates, analyse, capability_items,
                                             coop_to_capability, parse_capability, speaker_tables)


def cand(role, score, sr=None, ndtw=None, k=None) -> Candidate:
    # SPL and SDTW follow from SR and nDTW here (a straight walk: SPL = SR).
    values = {} if sr is None else {"success": float(sr), "ndtw": float(ndtw), "spl": float(sr),
                                    "sdtw": float(sr) * float(ndtw)}
    return Candidate(role=role, score=score, values=values, candidate=k)


def path(name, inference, samples, reference) -> PathCandidates:
    return PathCandidates(name, cand("inference", *inference),
                          tuple(cand("sample", *s, k=k) for k, s in enumerate(samples)),
                          cand("reference", *reference))


# (score, SR, nDTW) per candidate; the comments give each path's picks.
P1 = path("h:1", (-5, 0, .5), [(-7, 1, .9), (-9, 0, .2)], (-6, 1, .8))
# r = inference (-5); r*_search = inference (the reference's -6 is lower); pragmatic: sample 0.
P2 = path("h:2", (-8, 0, .4), [(-6, 1, .7), (-10, 0, .1)], (-4, 1, 1.0))
# r = sample 0 (-6 beats the inference's -8); r*_search = the reference (-4); pragmatic: sample 0.
P3 = path("h:3", (-3, 1, .6), [(-3, 0, .3), (-12, 1, .95)], (-3, 0, .2))
# ties at -3: r and r*_search keep the inference output; pragmatic: sample 1 (SR 1, nDTW .95).


def test_rho_ppg_and_gamma_by_hand():
    res = analyse([P1, P2, P3], metrics=("success", "ndtw"))
    assert res["paths"] == 3 and res["counted"] == 3 and res["skipped"] == {}
    assert res["search_available"] and res["unavailable"] == []
    sr, nd = res["metrics"]["success"], res["metrics"]["ndtw"]
    expected = {  # (SR, nDTW) means over the three paths
        "speaker_choice": ((0 + 1 + 1) / 3, (.5 + .7 + .6) / 3),
        "inference": ((0 + 0 + 1) / 3, (.5 + .4 + .6) / 3),
        "search": ((0 + 1 + 1) / 3, (.5 + 1.0 + .6) / 3),
        "pragmatic": ((1 + 1 + 1) / 3, (.9 + .7 + .95) / 3),
        "reference": ((1 + 1 + 0) / 3, (.8 + 1.0 + .2) / 3),
        "ppg_search": (0.0, (0 + .3 + 0) / 3),
        "ppg_pragmatic": ((1 + 0 + 0) / 3, (.4 + 0 + .35) / 3),
        "difference": ((1 + 0 + 0) / 3, (.4 - .3 + .35) / 3),
    }
    for key, (want_sr, want_nd) in expected.items():
        assert sr[key]["mean"] == pytest.approx(want_sr), key
        assert nd[key]["mean"] == pytest.approx(want_nd), key
        assert sr[key]["n"] == nd[key]["n"] == 3
        for e in (sr[key], nd[key]):
            assert e["low"] - 1e-12 <= e["mean"] <= e["high"] + 1e-12
    # PPG_search on SR is 0 on every path: the interval collapses onto 0.
    assert sr["ppg_search"]["low"] == sr["ppg_search"]["high"] == 0.0
    # gamma: only path 1's inference output beats all its samples (path 3 ties: not strictly).
    assert res["gamma"]["paths"] == 3 and res["gamma"]["k"] == 1
    assert res["gamma"]["share"]["mean"] == pytest.approx(1 / 3)
    assert res["picked_sample"]["k"] == 1 and res["picked_sample"]["paths"] == 3


def test_paths_missing_annotations_are_left_out():
    unfollowed = path("h:4", (-1, 1, 1.0), [(-2, 1, 1.0), (-3, None, None)], (-9, 1, 1.0))
    # The search oracle picks this reference (-0.5), which nobody has followed yet.
    ref_unfollowed = path("h:5", (-1, 1, 1.0), [(-2, 1, 1.0)], (-0.5, None, None))
    # A reference nobody followed that r*_search does not pick does not matter.
    ref_not_needed = path("h:6", (-1, 1, .5), [(-2, 0, .1)], (-7, None, None))
    res = analyse([P1, P2, P3, unfollowed, ref_unfollowed, ref_not_needed], metrics=("success", "ndtw"))
    assert res["paths"] == 6 and res["counted"] == 4
    assert res["skipped"] == {"a candidate of U_sub has no valid annotation": 1,
                              "the reference picked by r*_search has no valid annotation": 1}
    sr = res["metrics"]["success"]
    assert sr["speaker_choice"]["n"] == 4
    assert sr["speaker_choice"]["mean"] == pytest.approx((0 + 1 + 1 + 1) / 4)
    assert sr["pragmatic"]["mean"] == pytest.approx(1.0)
    # The reference row uses the counted paths whose reference was followed (3 of 4).
    assert sr["reference"]["n"] == 3
    # gamma needs no followers: all six paths have scores; the inference output wins on 1, 4, 5, 6.
    assert res["gamma"]["paths"] == 6 and res["gamma"]["k"] == 4


def test_no_scores_uses_the_inference_output_and_says_what_is_missing():
    paths = [path(f"h:{k}", (None, k % 2, .5), [(None, 1, .9), (None, 0, .1)], (None, 1, .7)) for k in range(4)]
    res = analyse(paths, metrics=("success", "ndtw"))
    assert res["counted"] == 4 and not res["search_available"]
    sr = res["metrics"]["success"]
    assert sr["speaker_choice"]["mean"] == sr["inference"]["mean"] == pytest.approx(0.5)
    assert sr["search"] is None and sr["ppg_search"] is None and sr["difference"] is None
    assert sr["ppg_pragmatic"]["mean"] == pytest.approx(0.5)
    assert "cannot compare" in sr["advice"]
    assert res["gamma"]["share"] is None and res["picked_sample"]["k"] == 0
    text = " ".join(res["unavailable"])
    assert "r*_search" in text and "human references have no speaker score" in text
    assert "gamma" in text and "inference outputs have no speaker score" in text


def test_coop_like_scores_only_on_the_inference_output():
    # The released coop files: a log-probability for the greedy output, none for the samples
    # or the reference. r is the inference output; neither r*_search nor gamma can be had.
    paths = [path(f"h:{k}", (-12.0, 0, .3), [(None, 1, .8)], (None, 1, .9)) for k in range(3)]
    res = analyse(paths, metrics=("success", "ndtw"))
    assert res["metrics"]["ndtw"]["speaker_choice"]["mean"] == pytest.approx(.3)
    assert res["metrics"]["ndtw"]["ppg_pragmatic"]["mean"] == pytest.approx(.5)
    assert not res["search_available"] and res["gamma"]["share"] is None
    assert any("all of its samples" in u for u in res["unavailable"])


def test_advice_follows_the_interval_of_the_difference():
    # Humans do much better on a sample than on r, and the reference is never picked:
    # PPG_pragmatic large, PPG_search 0 => the listener model.
    listener = [path(f"a:{k}", (-1, 0, .2), [(-2, 1, .9)], (-5, 1, 1.0)) for k in range(6)]
    res = analyse(listener, metrics=("success", "ndtw"))
    assert "model of the listener" in res["metrics"]["ndtw"]["advice"]
    # The reference is picked and followed well, no sample is better than r => search.
    search = [path(f"b:{k}", (-2, 0, .3), [(-3, 0, .1)], (-1, 1, .9 + k / 100)) for k in range(6)]
    res = analyse(search, metrics=("success", "ndtw"))
    assert res["metrics"]["ndtw"]["ppg_search"]["mean"] == pytest.approx(.6 + 2.5 / 100)
    assert "inference algorithm" in res["metrics"]["ndtw"]["advice"]
    # Half and half: the interval of the difference covers 0.
    res = analyse(listener[:3] + search[:3], metrics=("success", "ndtw"))
    assert res["metrics"]["ndtw"]["advice"].startswith("no clear difference")
    d = res["metrics"]["ndtw"]["difference"]
    assert d["low"] <= 0 <= d["high"]
    # One path is too few to tell.
    assert "too few" in analyse(listener[:1], metrics=("success", "ndtw"))["metrics"]["ndtw"]["advice"]


def test_ppg_interval_is_a_bootstrap_over_paths():
    rng = np.random.default_rng(5)
    paths = []
    for k in range(30):
        v = rng.uniform(0, 1, size=4)
        paths.append(path(f"c:{k}", (-1, 0, v[0]), [(-2, 0, v[1]), (-3, 0, v[2])], (-0.5 if k % 3 else -9, 0, v[3])))
    res = analyse(paths, metrics=("ndtw",), n_boot=4000)
    # Our own resampling of paths: recompute rho(r*_search) and rho(r) on each resample.
    r = np.array([p.inference.values["ndtw"] for p in paths])
    s = np.array([p.reference.values["ndtw"] if k % 3 else p.inference.values["ndtw"]
                  for k, p in enumerate(paths)])
    idx = np.random.default_rng(1).integers(0, len(paths), size=(20000, len(paths)))
    diffs = s[idx].mean(axis=1) - r[idx].mean(axis=1)
    low, high = np.percentile(diffs, [2.5, 97.5])
    got = res["metrics"]["ndtw"]["ppg_search"]
    assert got["mean"] == pytest.approx(float((s - r).mean()))
    assert got["low"] == pytest.approx(low, abs=0.03) and got["high"] == pytest.approx(high, abs=0.03)


def test_tables_render_every_quantity_and_the_advice():
    tables = speaker_tables("t5", analyse([P1, P2, P3]))
    keys = [t["key"] for t in tables]
    assert keys == ["nav_capability", "nav_capability_advice", "nav_capability_scores"]
    rows = {r["key"]: r for r in tables[0]["rows"]}
    assert set(rows) == {"speaker_choice", "inference", "search", "pragmatic", "reference",
                         "ppg_search", "ppg_pragmatic", "difference"}
    assert rows["pragmatic"]["success"]["mean"] == pytest.approx(1.0)
    assert "Paths counted: 3 of 3" in tables[0]["note"]
    assert [r["metric"] for r in tables[1]["rows"]] == ["SR", "SPL", "nDTW", "SDTW"]
    gamma = tables[2]["rows"][0]
    assert gamma["key"] == "gamma" and gamma["share"]["mean"] == pytest.approx(1 / 3)
    json.dumps(tables, allow_nan=False)


# -- the upload format -------------------------------------------------------------------------


def capability_file(**change) -> dict:
    data = {"speaker": "t5", "paths": [
        {"path_id": "5593", "scan": "houseA", "path": ["a", "b", "c"], "heading": 0.05,
         "reference": {"instruction": "walk to the sofa", "score": -20.1},
         "inference": {"instruction": "go to the sofa", "score": -12.3},
         "samples": [{"instruction": "go left", "score": -15.0}, {"instruction": "go right", "score": None}]},
        {"path_id": 17, "scan": "houseA", "path": ["c", "d"], "heading": 1.0,
         "reference": {"instruction": "stop by the door", "score": None},
         "inference": {"instruction": "stop", "score": None},
         "samples": [{"instruction": "wait", "score": None, "candidate": 3}]},
    ]}
    data.update(change)
    return data


def test_capability_items_shape():
    parsed = parse_capability(json.dumps(capability_file()).encode())
    items = capability_items(parsed)
    assert [i.external_id for i in items] == [
        "t5:5593:inference", "t5:5593:sample:0", "t5:5593:sample:1", "5593:reference",
        "t5:17:inference", "t5:17:sample:3", "17:reference"]
    first = items[0]
    assert first.payload == {"instruction": "go to the sofa", "scan": "houseA", "start": "a", "heading": 0.05}
    assert first.reference == {"path": ["a", "b", "c"], "role": "inference", "speaker_score": -12.3}
    assert items[2].reference == {"path": ["a", "b", "c"], "role": "sample", "speaker_score": None,
                                  "candidate": 1}
    assert items[3].reference["role"] == "reference" and items[3].reference["speaker_score"] == -20.1
    assert [(i.source, i.category) for i in items[:4]] == [
        ("agent", "t5"), ("agent", "t5 (samples)"), ("agent", "t5 (samples)"), ("human", "human")]
    assert {i.cluster for i in items[:4]} == {i.exclusion_group for i in items[:4]} == {"houseA:5593"}
    assert items[4].cluster == "houseA:17" and not any(i.is_gold for i in items)
    # The form's speaker option names the speaker over the file's.
    assert parse_capability(capability_file(), speaker="other").speaker == "other"


@pytest.mark.parametrize("mutate, field, where", [
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
])
def test_bad_capability_files_name_the_path_and_field(mutate, field, where):
    data = capability_file()
    mutate(data)
    with pytest.raises(InputError) as e:
        parse_capability(json.dumps(data).encode())
    assert e.value.field == field
    assert where in str(e.value)


# -- the coop converter ------------------------------------------------------------------------


def _coop(pid, text, **extra):
    return {"generated_instr": text, "scan": "houseA", "path": ["a", "b"], "heading": 0.5,
            "path_id": pid, "instr_id": f"{pid}_0", "instructions": ["the human one", "another"],
            "distance": 1.0, **extra}


def test_coop_converter():
    greedy = {"0": _coop(1, "qc", model="speaker_ref_agent1_eval"),
              "10": _coop(7, "greedy seven", generated_instr_sum_log_prob=-3.5, model="speaker-clip-t5_greedy"),
              "11": _coop(8, "greedy eight", generated_instr_sum_log_prob=-4.5, model="speaker-clip-t5_greedy"),
              "12": _coop(9, "greedy nine", generated_instr_sum_log_prob=-1.0, model="speaker-clip-t5_greedy")}
    cands = {"7_0": _coop(7, "greedy seven"), "7_1": _coop(7, "a sample"), "7_2": _coop(7, "b sample"),
             "8_0": _coop(8, "not the greedy one"), "8_1": _coop(8, "c sample")}
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
        "speaker-clip-t5:7:inference", "speaker-clip-t5:7:sample:1", "speaker-clip-t5:7:sample:2",
        "7:reference"]
    data, report = coop_to_capability(greedy, cands, speaker="t5", limit_paths=1)
    assert data["speaker"] == "t5" and len(data["paths"]) == 1 and report["in_candidates"] == 2


def test_the_documented_example_parses():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "kinds" / "navigation-capability.md").read_text()
    block = doc.split("```json", 1)[1].split("```", 1)[0]
    items = capability_items(parse_capability(block.encode()))
    assert [i.external_id for i in items] == ["t5:5593:inference", "t5:5593:sample:0", "t5:5593:sample:1",
                                              "5593:reference"]
    # The worked example's numbers, as the doc prints them.
    res = analyse([P1, P2, P3], metrics=("success", "ndtw"))
    for key, sr, nd in (("speaker_choice", "0.667", "0.600"), ("search", "0.667", "0.700"),
                        ("pragmatic", "1.000", "0.850"), ("ppg_pragmatic", "0.333", "0.250")):
        m = res["metrics"]
        assert f"{m['success'][key]['mean']:.3f}" == sr and f"{m['ndtw'][key]['mean']:.3f}" == nd
        assert sr in doc and nd in doc
