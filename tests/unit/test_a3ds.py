"""The A3DS reference game's core: scene ids both ways, the caption parser, the pragmatic
metrics on vectors worked by hand for z = 1..6, the built-in speakers, and `proctor a3ds
score`. Tests on the released files skip without ../shared/data/a3ds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from app.errors import InputError
from app.kinds.a3ds import scenes, speakers
from app.kinds.a3ds.captions import parse
from app.kinds.a3ds.cli import a3ds as a3ds_cli
from app.kinds.a3ds.metrics import means, score_caption
from app.kinds.a3ds.scenes import FEATURES, factors, scene_id

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "a3ds"
real = pytest.mark.skipif(
    not (DATA / "3dshapes_factor_terminals.json").exists(), reason=f"A3DS data not found under {DATA}"
)

# Image 12500: red floor, yellow wall, medium blue tiny cylinder, "nearly in the middle".
T = (0, 2, 6, 0, 1, 5)


def sid(*f):
    return scene_id(list(f))


# ---- scenes ---------------------------------------------------------------------------------


def test_index_formula_both_ways():
    assert sid(*T) == 12500 and factors(12500) == T
    assert factors(0) == (0,) * 6 and factors(479999) == (9, 9, 9, 7, 3, 14)
    assert scene_id([0, 0, 0, 0, 0, 1]) == 1 and scene_id([0, 0, 0, 0, 1, 0]) == 15
    assert scenes.N_SCENES == 480000


def test_ids_out_of_range_are_refused_naming_the_field():
    with pytest.raises(InputError, match="out of range: 0 to 479999"):
        factors(480000)
    with pytest.raises(InputError, match="out of range"):
        factors(-1)
    with pytest.raises(InputError) as exc:
        scene_id([0, 0, 0, 8, 0, 0])
    assert exc.value.field == "scale" and "0 to 7" in str(exc.value)
    with pytest.raises(InputError, match="6 factors"):
        scene_id([0, 0, 0])


@real
def test_the_sandbox_ids_have_the_released_factors_and_words():
    rows = json.loads((DATA / "sandbox_1000_factors_DERIVED.json").read_text())
    assert len(rows) == 1000
    for r in rows:
        assert factors(r["image_id"]) == tuple(r["factor_idx"])
        assert scene_id(r["factor_idx"]) == r["image_id"]
        assert scenes.describe(r["image_id"]) == r["nl"]


@real
def test_the_words_are_the_grammar_terminals():
    table = json.loads((DATA / "3dshapes_factor_terminals.json").read_text())
    assert tuple(table["factor_order"]) == FEATURES
    for f in FEATURES:
        assert scenes.WORDS[f] == tuple(v["nl"] for v in table["factors"][f])
    assert scenes.SCALES == pytest.approx([v["value"] for v in table["factors"]["scale"]])
    assert scenes.ORIENTATIONS == pytest.approx([v["value"] for v in table["factors"]["orientation"]])


def test_design_pairs_differ_in_exactly_z_or_the_named_features():
    pairs = scenes.design_pairs(
        {
            "z": {str(z): 5 for z in range(1, 7)},
            "random": 3,
            "named": [{"features": ["shape", "wall_hue"], "count": 4}],
        },
        seed=7,
    )
    by = {}
    for how, p in pairs:
        by.setdefault(how, []).append(p)
    for z in range(1, 7):
        assert len(by[f"z={z}"]) == 5 and all(p.z == z for p in by[f"z={z}"])
    assert all(set(p.contrastive) == {"shape", "wall_hue"} for p in by["named:shape+wall_hue"])
    assert len(by["random"]) == 3 and all(p.target != p.distractor for p in by["random"])
    assert pairs == scenes.design_pairs(
        {
            "z": {str(z): 5 for z in range(1, 7)},
            "random": 3,
            "named": [{"features": ["shape", "wall_hue"], "count": 4}],
        },
        seed=7,
    )


@pytest.mark.parametrize(
    "design,field",
    [
        ({"z": {"7": 1}}, "pairs.z.7"),
        ({"z": {"1": -1}}, "pairs.z.1"),
        ({"random": "3"}, "pairs.random"),
        ({"named": [{"features": ["colour"], "count": 1}]}, "pairs.named.0.features"),
        ({"zz": 1}, "pairs.zz"),
    ],
)
def test_bad_designs_name_the_field(design, field):
    with pytest.raises(InputError) as exc:
        scenes.design_pairs(design, 0)
    assert exc.value.field == field


def test_a_design_is_capped_in_total_not_only_per_entry():
    # Each entry is within the cap; together they are not, and nothing is drawn.
    many = {"named": [{"features": ["shape"], "count": scenes.MAX_PAIRS}] * 3}
    with pytest.raises(InputError) as exc:
        scenes.design_pairs(many, 0)
    assert exc.value.field == "pairs" and str(3 * scenes.MAX_PAIRS) in str(exc.value)
    at_cap = {"random": scenes.MAX_PAIRS - 1, "z": {"2": 1}}
    assert len(scenes.design_pairs(at_cap, 0)) == scenes.MAX_PAIRS


# ---- the parser -----------------------------------------------------------------------------


def test_a_colour_word_without_a_place_counts_only_when_the_colour_is_unique_in_the_target():
    red, blue = scenes.HUES.index("red"), scenes.HUES.index("medium blue")
    # floor red, wall blue, object blue: "red" can only be the floor; "blue" is ambiguous.
    target = scene_id((red, blue, blue, 0, 0, 0))
    assert parse("red", target).mentions == {"floor_hue": frozenset([red])}
    got = parse("medium blue", target)
    assert got.mentions == {} and got.unparsed == ["medium", "blue"]
    # A colour the target does not have, or no target at all: never guessed.
    assert parse("purple", target).unparsed == ["purple"]
    assert parse("red").unparsed == ["red"]
    # Placed by its position it needs no rule: "blue wall" is the wall's even when shared.
    assert parse("a medium blue wall", target).mentions == {"wall_hue": frozenset([blue])}
    # The paper's figure 1 case: the red is the ball's alone, so "red" alone is contrastive.
    distractor = scene_id((blue, blue, red, 0, 0, 0))
    ball = scene_id((blue, blue, red, 0, 0, 0))
    other = scene_id((blue, blue, blue, 0, 0, 0))
    assert score_caption(ball, other, "red").c == 1
    assert score_caption(target, distractor, "red").mentioned == ["floor_hue"]


@real
def test_the_27_released_short_captions_parse_to_the_image_features():
    released = json.loads((DATA / "example_short_captions_27.json").read_text())
    assert released["image_id"] == 12500 and len(released["captions"]) == 27
    seen = set()
    for caption in released["captions"]:
        p = parse(caption)
        assert p.unparsed == [], caption
        assert 2 <= len(p.mentions) <= 3 or caption.startswith("the cylinder is"), caption
        for f, values in p.mentions.items():
            assert T[FEATURES.index(f)] in values, (caption, f)
        seen |= set(p.mentions)
    assert seen == set(FEATURES)
    # The short speaker makes exactly these, in the released order.
    assert speakers.short_captions(12500) == released["captions"]


def test_colour_words_go_by_position():
    p = parse("A red ball on green floor in front of a pink wall")
    assert p.mentions == {"object_hue": {0}, "shape": {2}, "floor_hue": {3}, "wall_hue": {9}} and not p.unparsed
    # The exhaustive grammar's sentence that ends on the wall's hue, and a hue after "is".
    p = parse("a tiny red ball standing in the middle on light green floor in front of a dark blue")
    assert p.mentions["wall_hue"] == {7} and p.mentions["floor_hue"] == {4} and p.mentions["object_hue"] == {0}
    assert parse("the ball is medium blue").mentions == {"shape": {2}, "object_hue": {6}}
    # "in the middle" means three orientations; "nearly in the middle" two.
    assert parse("a pill in the middle").mentions["orientation"] == {6, 7, 8}
    assert parse("a pill nearly in the middle").mentions["orientation"] == {5, 9}


def test_what_is_not_understood_is_reported():
    # The paper's Figure 1 caption by the RP model: the stray "green"s have no place.
    p = parse("A tiny red ball green near the floor in green of")
    assert p.mentions == {"scale": {0}, "object_hue": {0}, "shape": {2}}
    assert p.unparsed == ["green", "near", "green"]


# ---- the metrics, worked by hand ------------------------------------------------------------


def vec(d, caption):
    s = score_caption(sid(*T), sid(*d), caption)
    return (s.z, s.c, s.k, s.discriminative, s.contrastive_efficiency, s.relevance, s.optimal)


def test_z1():
    d = (0, 2, 6, 0, 2, 5)  # a ball, not a cylinder
    # the contrastive feature alone: everything ideal
    assert vec(d, "a cylinder") == (1, 1, 1, 1, 1.0, 1.0, 1)
    # plus two redundant ones: r = 1 - 2/5
    assert vec(d, "a tiny cylinder on red floor") == (1, 1, 3, 1, 1.0, pytest.approx(0.6), 1)
    # c = 0: shape named falsely, scale redundant; no efficiency; r = 1 - 1/5
    assert vec(d, "a tiny ball") == (1, 0, 1, 0, None, pytest.approx(0.8), 0)


def test_z2():
    d = (0, 2, 6, 3, 2, 5)  # scale and shape differ
    assert vec(d, "a tiny cylinder") == (2, 2, 2, 1, 0.0, 1.0, 0)  # e = 1 - 1/1
    assert vec(d, "there is a cylinder on red floor") == (2, 1, 2, 1, 1.0, pytest.approx(0.75), 1)


def test_z3():
    d = (1, 3, 7, 0, 1, 5)  # the three hues differ
    # c = 2 (object, wall), k = 3: e = 1 - 1/2, r = 1 - 1/3
    assert vec(d, "a medium blue cylinder in front of a yellow wall") == (3, 2, 3, 1, 0.5, pytest.approx(2 / 3), 0)


def test_z4():
    d = (1, 3, 7, 1, 1, 5)  # hues and scale differ
    assert vec(d, "there is a cylinder on red floor") == (4, 1, 2, 1, 1.0, 0.5, 1)
    # c = 3 of z = 4: e = 1 - 2/3
    assert vec(d, "a tiny medium blue cylinder on red floor") == (4, 3, 4, 1, pytest.approx(1 / 3), 0.5, 0)


def test_z5():
    d = (1, 3, 7, 1, 2, 5)  # all but the orientation
    assert vec(d, "a cylinder nearly in the middle") == (5, 1, 2, 1, 1.0, 0.0, 1)
    # c = 0: only the shared orientation; r = 1 - 1/1
    assert vec(d, "the object is nearly in the middle") == (5, 0, 1, 0, None, 0.0, 0)
    assert vec(d, "a pink object") == (5, 0, 0, 0, None, 1.0, 0)  # false, names nothing true


def test_z6_relevance_is_undefined_not_a_crash():
    d = (1, 3, 7, 1, 2, 6)
    full = "a tiny medium blue cylinder standing on red floor in front of a yellow wall nearly in the middle"
    assert vec(d, full) == (6, 6, 6, 1, 0.0, None, 0)  # e = 1 - 5/5
    assert vec(d, "a green block") == (6, 0, 0, 0, None, None, 0)  # c = 0, both named falsely
    s = score_caption(sid(*T), sid(*d), "a green block")
    assert s.false == ["object_hue", "shape"] and s.mentioned == ["object_hue", "shape"]
    m = means([s, score_caption(sid(*T), sid(0, 2, 6, 0, 2, 5), "a cylinder")])
    assert m["relevance"] == 1.0 and m["n_relevance"] == 1 and m["relevance_undefined"] == 1
    assert m["contrastive_efficiency"] == 1.0 and m["n_contrastive_efficiency"] == 1


def test_a_phrase_that_fits_both_orientations_is_not_contrastive():
    t, d = sid(0, 2, 6, 0, 1, 6), sid(0, 2, 6, 0, 1, 7)  # both "in the middle"
    s = score_caption(t, d, "a cylinder in the middle")
    assert (s.z, s.c, s.k, s.discriminative, s.relevance) == (1, 0, 2, 0, pytest.approx(0.8))
    assert s.ambiguous == ["orientation"]


def test_identical_scenes_are_not_a_pair():
    with pytest.raises(ValueError):
        score_caption(12500, 12500, "a cylinder")


# ---- speakers -------------------------------------------------------------------------------


def test_speakers_say_what_they_promise():
    for _how, pair in scenes.design_pairs({"z": {str(z): 20 for z in range(1, 7)}}, seed=3):
        lit = score_caption(pair.target, pair.distractor, speakers.speak("literal", pair, 3))
        assert lit.k == 6 and not lit.false and not lit.unparsed
        short = score_caption(pair.target, pair.distractor, speakers.speak("short", pair, 3))
        assert 1 <= short.k <= 3 and not short.false and not short.unparsed
        telling = speakers.telling_features(pair)
        con = score_caption(pair.target, pair.distractor, speakers.speak("contrastive", pair, 3))
        if telling:
            assert con.mentioned == telling and con.c == len(telling) and con.relevance in (1.0, None)
        mini = score_caption(pair.target, pair.distractor, speakers.speak("minimal", pair, 3))
        if telling:
            assert mini.c == 1 and mini.optimal == 1 and mini.k == 1
        assert not con.false and not con.unparsed and not mini.unparsed


def test_speakers_are_deterministic_given_a_seed():
    pairs = [p for _, p in scenes.design_pairs({"z": {"3": 30}}, seed=1)]
    for s in speakers.SPEAKERS:
        assert [speakers.speak(s, p, 5) for p in pairs] == [speakers.speak(s, p, 5) for p in pairs]
    assert [speakers.speak("literal", p, 5) for p in pairs] != [speakers.speak("literal", p, 6) for p in pairs]


def test_every_exhaustive_caption_names_all_six_truly():
    for c in speakers.exhaustive_captions(12500):
        p = parse(c)
        assert set(p.mentions) == set(FEATURES) and not p.unparsed, c
        assert all(T[FEATURES.index(f)] in v for f, v in p.mentions.items())


# ---- proctor a3ds score ------------------------------------------------------------------


def test_score_command_json(tmp_path):
    f = tmp_path / "pairs.jsonl"
    f.write_text(
        json.dumps({"target": 12500, "distractor": sid(0, 2, 6, 0, 2, 5), "caption": "a cylinder"})
        + "\n"
        + json.dumps({"target": 12500, "distractor": sid(1, 3, 7, 1, 2, 6), "caption": "a green block"})
        + "\n"
    )
    out = CliRunner().invoke(a3ds_cli, ["score", "--pairs", str(f), "--json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert doc["per_pair"][0] == {
        "z": 1,
        "c": 1,
        "k": 1,
        "discriminative": 1,
        "contrastive_efficiency": 1.0,
        "relevance": 1.0,
        "optimal": 1,
        "mentioned": ["shape"],
        "unparsed": [],
    }
    assert doc["per_pair"][1]["relevance"] is None and doc["per_pair"][1]["z"] == 6
    assert doc["mean"]["discriminative"] == 0.5 and doc["mean"]["relevance_undefined"] == 1
    table = CliRunner().invoke(a3ds_cli, ["score", "--pairs", str(f)])
    assert table.exit_code == 0 and "undef" in table.output


@pytest.mark.parametrize(
    "line,message",
    [
        (
            '{"target": 480000, "distractor": 1, "caption": "a ball"}',
            "line 2, field 'target': scene id 480000 is out of range",
        ),
        ('{"target": 1, "distractor": -3, "caption": "a ball"}', "line 2, field 'distractor'"),
        ('{"target": 1, "distractor": 2', "line 2: not valid JSON"),
        ('{"target": 1, "distractor": 2}', "line 2, field 'caption'"),
        ('{"target": 1, "distractor": 1, "caption": "a ball"}', "same scene"),
    ],
)
def test_score_command_errors_name_line_and_field(tmp_path, line, message):
    f = tmp_path / "pairs.jsonl"
    f.write_text('{"target": 12500, "distractor": 12501, "caption": "a ball"}\n' + line + "\n")
    out = CliRunner().invoke(a3ds_cli, ["score", "--pairs", str(f), "--json"])
    assert out.exit_code != 0 and message in out.output, out.output


def test_the_literal_listener_picks_the_picture_the_caption_fits():
    from app.kinds.a3ds.listeners import pick

    other = scene_id((0, 2, 6, 0, 2, 5))  # T but a different shape
    assert pick("literal", "a cylinder", [12500, other]) == "1"
    assert pick("literal", "a cylinder", [other, 12500]) == "2"  # the order shown does not matter
    assert pick("literal", "a red floor", [12500, other]) == "none"  # both have it: can't tell


def test_score_with_people_and_a_model_listener_gives_ppi_per_captioner(tmp_path):
    import random

    from app.kinds.a3ds.formats import parse_pairs
    from app.kinds.a3ds.listeners import pick
    from app.leaderboards import stats

    rng = random.Random(4)
    lines = []
    for k in range(80):
        pair = scenes.pair_differing_in(rng, rng.sample(FEATURES, rng.randint(1, 6)))
        who = "short" if k % 2 else "literal"
        lines.append(
            {
                "id": f"p{k}",
                "target": pair.target,
                "distractor": pair.distractor,
                "caption": speakers.speak(who, pair, 0),
                "captioner": who,
            }
        )
    pairs_file, people_file = tmp_path / "pairs.jsonl", tmp_path / "people.jsonl"
    pairs_file.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    # People answer a random 50 of the 80 captions, right 80% of the time.
    people = {f"p{k}": rng.random() < 0.8 for k in rng.sample(range(80), 50)}
    people_file.write_text("\n".join(json.dumps({"id": i, "right": r}) for i, r in people.items()) + "\n")
    out = CliRunner().invoke(
        a3ds_cli, ["score", "--pairs", str(pairs_file), "--people", str(people_file), "--judge", "literal", "--json"]
    )
    assert out.exit_code == 0, out.output
    judged = json.loads(out.output)["judged"]
    assert set(judged) == {"literal", "short"}
    for who in ("literal", "short"):
        mine = [p for p in parse_pairs(pairs_file.read_bytes()) if p.captioner == who]
        judge = {p.id: float(pick("literal", p.caption, [p.pair.target, p.pair.distractor]) == "1") for p in mine}
        seen = [p.id for p in mine if p.id in people]
        want = stats.ppi_mean(
            [float(people[i]) for i in seen],
            [judge[i] for i in seen],
            [judge[p.id] for p in mine if p.id not in people],
        )
        got = judged[who]
        assert got["judge"] == pytest.approx(sum(judge.values()) / 40)
        assert got["ppi"]["n_human"] == len(seen) and got["ppi"]["n_judge"] == 40 - len(seen)
        assert (got["ppi"]["mean"], got["ppi"]["low"], got["ppi"]["high"]) == pytest.approx(
            (want["mean"], want["low"], want["high"])
        )
        assert got["ppi"]["effective_n"] == pytest.approx(want["effective_n"])
        assert got["judge_agreement"]["n"] == len(seen) and got["plan"]["of"] == 40
    table = CliRunner().invoke(
        a3ds_cli, ["score", "--pairs", str(pairs_file), "--people", str(people_file), "--judge", "literal"]
    )
    assert table.exit_code == 0 and "PPI++" in table.output and "literal" in table.output
    # A pick on a pair P does not have, or --people alone: refused, naming the line or the option.
    people_file.write_text(json.dumps({"id": "p99", "right": True}) + "\n")
    out = CliRunner().invoke(
        a3ds_cli, ["score", "--pairs", str(pairs_file), "--people", str(people_file), "--judge", "literal"]
    )
    assert out.exit_code != 0 and "line 1" in out.output and "id must name a pair" in out.output
    out = CliRunner().invoke(a3ds_cli, ["score", "--pairs", str(pairs_file), "--people", str(people_file)])
    assert out.exit_code != 0 and "--people and --judge go together" in out.output
