"""STS recordings: replay, validation, the JSONL upload, the expert, and scenario mining
(app/kinds/sts/recordings.py, app/kinds/sts/mining.py)."""

import gzip
import json

import numpy as np
import pytest

from app.errors import InputError
from app.kinds.sts.env import ACTIONS, CATEGORIES, LEVELS, BabyAISimulator, ExpertError
from app.kinds.sts.mining import make_scenario, mine, mission_step, takeover_point
from app.kinds.sts.recordings import (
    Outcome,
    Replayable,
    RecordingError,
    check,
    expert_recording,
    parse_recordings_jsonl,
    replay,
    success_step,
)

SIM = BabyAISimulator()
LEVEL = "BabyAI-PutNextLocal-v0"


@pytest.fixture(scope="module")
def expert():
    return expert_recording(LEVEL, 7, id="e7")


def line_of(rec: Replayable, **over) -> str:
    d = rec.as_dict()
    d.update(over)
    return json.dumps(d)


def refusal(data, **kw) -> InputError:
    with pytest.raises(RecordingError) as err:
        parse_recordings_jsonl(data.encode() if isinstance(data, str) else data, **kw)
    assert isinstance(err.value, InputError)
    return err.value


# --- replay -------------------------------------------------------------------------------


def test_replay_gives_byte_identical_frames_every_time(expert):
    a = replay(expert, SIM, tile_size=4)
    b = replay(expert, SIM, tile_size=4)
    c = replay(expert, BabyAISimulator(), tile_size=4)  # a fresh simulator instance
    assert len(a.steps) == len(expert.actions) + 1
    for x, y, z in zip(a.steps, b.steps, c.steps):
        assert x.frame.tobytes() == y.frame.tobytes() == z.frame.tobytes()
        assert x.observation["image"].tobytes() == y.observation["image"].tobytes() == z.observation["image"].tobytes()
        assert x.observation["direction"] == z.observation["direction"] and x.action == z.action
    # The frames do change along the way (the replay is not stuck on one state).
    assert len({s.frame.tobytes() for s in a.steps}) > len(a.steps) // 2


DIGEST = """
import hashlib, json, sys
from app.kinds.sts.recordings import Replayable, replay
h = hashlib.sha256()
for d in json.loads(sys.argv[1]):
    for s in replay(Replayable(**d), tile_size=4).steps:
        h.update(s.frame.tobytes() + s.observation["image"].tobytes())
print(h.hexdigest())
"""


def test_replay_is_the_same_in_another_process(expert):
    """Nothing depends on the process: not the hash seed (set and dict orders), not the imports."""
    import hashlib
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    recs = [expert, expert_recording("BabyAI-SynthSeq-v0", 1)]
    h = hashlib.sha256()
    for rec in recs:
        for s in replay(rec, SIM, tile_size=4).steps:
            h.update(s.frame.tobytes() + s.observation["image"].tobytes())
    arg = json.dumps([r.as_dict() for r in recs])
    out = subprocess.run(
        [sys.executable, "-c", DIGEST, arg],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(ROOT)},
        check=True,
    )
    assert out.stdout.strip() == h.hexdigest()


def test_replay_upto_stops_there_and_the_episode_goes_on(expert):
    r = replay(expert, SIM, 3, frames=False)
    assert [s.step for s in r.steps] == [0, 1, 2, 3] and r.steps[0].action is None
    assert all(s.frame is None for s in r.steps) and r.episode.steps == 3 and r.success_step is None
    for a in expert.actions[3:]:
        r.episode.step(a)
    assert r.episode.success
    with pytest.raises(RecordingError, match="beyond the recording") as err:
        replay(expert, SIM, len(expert.actions) + 1)
    assert err.value.field == "actions"


def test_expert_succeeds_on_every_family_and_its_recording_replays_to_success():
    # Every level once, and more seeds of one small level per family.
    sample = [(level, 1) for level in LEVELS] + [
        (level, seed)
        for level in (
            "BabyAI-GoToLocal-v0",
            "BabyAI-PickupLoc-v0",
            "BabyAI-OpenDoor-v0",
            LEVEL,
            "BabyAI-MiniBossLevel-v0",
        )
        for seed in (2, 3, 4)
    ]
    for level, seed in sample:
        rec = expert_recording(level, seed, id=f"{level}:{seed}")
        assert rec.actor == "expert" and rec.mission == SIM.reset(level, seed).mission
        r = replay(rec, SIM, frames=False)
        assert r.success_step == len(rec.actions) == success_step(rec, SIM)
        assert r.steps[-1].success and not any(s.success for s in r.steps[:-1])
        assert check(rec, SIM) == Outcome(len(rec.actions), len(rec.actions))


def test_expert_recording_respects_a_step_limit():
    with pytest.raises(ExpertError, match="did not succeed .* within 3 steps"):
        expert_recording("BabyAI-GoTo-v0", 0, max_steps=3)


def test_outcome_of_a_recording_that_did_not_finish(expert):
    cut = Replayable(LEVEL, 7, expert.mission, expert.actions[:-1], "human", "cut")
    assert check(cut, SIM) == Outcome(None, None) and success_step(cut, SIM) is None


# --- validation and the upload ------------------------------------------------------------


def test_parse_reads_names_and_ints_gzip_and_blank_lines(expert):
    names = [ACTIONS[a] for a in expert.actions]
    text = "\n" + line_of(expert, actions=names) + "\n\n" + line_of(expert, id=8, actor="human") + "\n"
    for data in (text.encode(), gzip.compress(text.encode())):
        a, b = parse_recordings_jsonl(data, SIM)
        assert a.actions == b.actions == expert.actions and a.id == "e7" and b.id == "8"
        assert (a.line, b.line) == (2, 4) and b.actor == "human"
    no_id = parse_recordings_jsonl(
        json.dumps({k: v for k, v in expert.as_dict().items() if k not in ("id", "actor")}).encode()
    )[0]
    assert no_id.id is None and no_id.actor == "upload"


def test_an_out_of_range_action_is_refused_with_line_and_field(expert):
    bad = line_of(expert, actions=[*expert.actions[:3], 7])
    err = refusal(line_of(expert) + "\n" + bad)
    assert (err.line, err.field) == (2, "actions") and "actions[3]" in str(err) and "out of range" in str(err)
    err = refusal(line_of(expert, actions=["forward", "jump"]))
    assert (err.line, err.field) == (1, "actions") and "'jump'" in str(err)
    assert str(err).startswith("line 1, field 'actions':")


def test_a_wrong_seed_is_refused_as_a_mission_mismatch(expert):
    err = refusal("\n" + line_of(expert, seed=8))
    assert (err.line, err.field) == (2, "mission")
    assert "seed 8" in str(err) and repr(expert.mission) in str(err)


def test_actions_past_the_end_are_refused(expert):
    n = len(expert.actions)
    err = refusal(line_of(expert, actions=[*expert.actions, 2]))
    assert (err.line, err.field) == (1, "actions")
    assert f"actions[{n}] comes after the episode ended at step {n} (success)" in str(err)
    # The step limit ends an episode too.
    limit = SIM.reset(LEVEL, 7).max_steps
    err = refusal(line_of(expert, actions=["left"] * (limit + 1)))
    assert err.field == "actions" and f"ends an episode after {limit}" in str(err)


def test_shape_errors_name_their_field(expert):
    cases = [
        ("not json", None, "not valid JSON"),
        ("[1, 2]", None, "JSON object"),
        (line_of(expert, level="BabyAI-Nope-v0"), "level", "unknown level"),
        (line_of(expert, level=3), "level", "not a level id"),
        (line_of(expert, seed="7"), "seed", "not a whole number"),
        (line_of(expert, seed=-1), "seed", "from 0 to"),
        (line_of(expert, mission=""), "mission", "non-empty"),
        (line_of(expert, actions="2,2"), "actions", "list"),
        (line_of(expert, actor="robot"), "actor", "not one of"),
        (line_of(expert, id=""), "id", "non-empty"),
        (line_of(expert, extra=1), "extra", "unknown field"),
        (json.dumps({"level": LEVEL}), "seed", "missing 'seed'"),
    ]
    for text, field, said in cases:
        err = refusal(text)
        assert err.line == 1 and err.field == field and said in str(err), (text, str(err))
    err = refusal(line_of(expert) + "\n" + line_of(expert))
    assert (err.line, err.field) == (2, "id") and "line 1" in str(err)
    assert "no recordings" in str(refusal("\n\n"))
    assert refusal(b"\xff\xfe").line == 1


def test_parse_without_validation_leaves_replay_to_later(expert):
    recs = parse_recordings_jsonl(line_of(expert, seed=8).encode(), SIM, validate=False)
    with pytest.raises(RecordingError) as err:
        check(recs[0], SIM)
    assert (err.value.line, err.value.field) == (1, "mission")


# --- mining -------------------------------------------------------------------------------


def test_takeover_rules(expert):
    n = len(expert.actions)
    assert takeover_point(expert, "first step") == 0
    assert takeover_point(expert, "mission given") == mission_step(expert) == 0  # BabyAI: with the first observation
    assert takeover_point(expert, "before success", k=2, simulator=SIM) == n - 2
    assert takeover_point(expert, "before success", k=n, simulator=SIM) == 0
    with pytest.raises(RecordingError, match=f"k = {n + 1} is more than the {n} steps") as err:
        takeover_point(expert, "before success", k=n + 1, simulator=SIM)
    assert err.value.field == "k"
    for k in (0, None, True):
        with pytest.raises(RecordingError, match="k must be"):
            takeover_point(expert, "before success", k=k, simulator=SIM)
    cut = Replayable(LEVEL, 7, expert.mission, expert.actions[:-1], "human", "cut")
    with pytest.raises(RecordingError, match="never succeeds"):
        takeover_point(cut, "before success", k=1, simulator=SIM)
    with pytest.raises(RecordingError, match="unknown rule") as err:
        takeover_point(expert, "halfway")
    assert err.value.field == "rule"


def test_make_scenario_and_its_refusals(expert):
    s = make_scenario(expert, 3, 20, tags=["easy", "easy", " mine "], simulator=SIM)
    assert s == {
        "recording": "e7",
        "takeover": 3,
        "continuation": 20,
        "instruction": expert.mission,
        "category": "put next to",
        "tags": ["easy", "mine"],
    }
    n = len(expert.actions)
    rec = parse_recordings_jsonl(("\n" + line_of(expert)).encode(), SIM)[0]  # line 2
    for takeover, said in (
        (n + 1, "beyond the recording"),
        (n, "where the recording's episode ended"),
        (-1, "whole number"),
    ):
        with pytest.raises(RecordingError, match=said) as err:
            make_scenario(rec, takeover, 20, simulator=SIM)
        assert (err.value.line, err.value.field) == (2, "takeover")
    with pytest.raises(RecordingError) as err:
        make_scenario(rec, 0, 0, simulator=SIM)
    assert err.value.field == "continuation"
    with pytest.raises(RecordingError) as err:
        make_scenario(rec, 0, 5, tags=[""], simulator=SIM)
    assert err.value.field == "tags"
    # An unfinished recording can be taken over at its very end.
    cut = Replayable(LEVEL, 7, expert.mission, expert.actions[:-1], "human", "cut")
    assert make_scenario(cut, n - 1, 5, simulator=SIM)["takeover"] == n - 1


def test_mine_in_bulk():
    recs = [
        expert_recording(level, 0, id=level)
        for level in ("BabyAI-GoToLocal-v0", "BabyAI-PickupLoc-v0", "BabyAI-OpenDoor-v0", LEVEL, "BabyAI-SynthSeq-v0")
    ]
    first = mine(recs, "first step", 30, tags=["v1"], simulator=SIM)
    assert [s["takeover"] for s in first] == [0] * 5
    assert [s["category"] for s in first] == list(CATEGORIES)
    assert first[0]["tags"] == ["v1", "rule:first step"]
    assert [s["takeover"] for s in mine(recs, "mission given", 30, simulator=SIM)] == [0] * 5
    before = mine(recs, "before success", 30, k=3, simulator=SIM, skip_inapplicable=True)
    lengths = {r.id: len(r.actions) for r in recs}
    assert before and all(s["takeover"] == lengths[s["recording"]] - 3 for s in before)
    assert lengths["BabyAI-GoToLocal-v0"] < 3  # so one recording is too short for k = 3
    assert len(before) == sum(n >= 3 for n in lengths.values()) == len(recs) - 1
    with pytest.raises(RecordingError, match="more than"):
        mine(recs, "before success", 30, k=3, simulator=SIM)


def test_replayed_context_matches_the_recording_frames(expert):
    full = replay(expert, SIM, tile_size=4)
    part = replay(expert, SIM, 4, tile_size=4)
    assert all(np.array_equal(a.frame, b.frame) for a, b in zip(full.steps, part.steps))
