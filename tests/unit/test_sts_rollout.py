"""STS continuations: forced context, then the agent alone; batched == one at a time
(app/kinds/sts/rollout.py)."""

import numpy as np
import pytest

from app.kinds.sts.env import ACTIONS, BabyAISimulator
from app.kinds.sts.mining import mine
from app.kinds.sts.recordings import Replayable, RecordingError, check, expert_recording, replay
from app.kinds.sts.rollout import (
    Continuation,
    Job,
    expert_policy,
    jobs_for,
    random_policy,
    rollout_batched,
    rollout_sequential,
    start,
)

SIM = BabyAISimulator()
LEVELS = (
    "BabyAI-GoToLocal-v0",
    "BabyAI-PickupLoc-v0",
    "BabyAI-OpenDoorDebug-v0",
    "BabyAI-PutNextLocal-v0",
    "BabyAI-MiniBossLevel-v0",
)


@pytest.fixture(scope="module")
def suite():
    recs = [expert_recording(level, 1, id=f"{level}:1") for level in LEVELS]
    scenarios = mine(recs, "first step", 12, simulator=SIM) + mine(
        recs, "before success", 12, k=2, simulator=SIM, skip_inapplicable=True
    )
    return {r.id: r for r in recs}, scenarios


class TinyNet:
    """A deterministic stateless policy over the observation, answering probabilities."""

    def __init__(self):
        rng = np.random.default_rng(0)
        self.w = rng.normal(size=(7 * 7 * 3 + 4, len(ACTIONS)))

    def __call__(self, obs):
        x = np.concatenate([obs["image"].reshape(len(obs["mission"]), -1) / 10.0, np.eye(4)[obs["direction"]]], axis=1)
        z = x @ self.w
        p = np.exp(z - z.max(axis=1, keepdims=True))
        return p / p.sum(axis=1, keepdims=True)


def test_batched_equals_one_at_a_time(suite):
    recordings, scenarios = suite
    jobs = jobs_for(scenarios, recordings, continuations=2, seed=100)
    assert len(jobs) == 2 * len(scenarios) >= 16
    calls = []

    def counting(policy):
        def call(obs):
            calls.append(len(obs["mission"]))
            return policy(obs)

        call.privileged = getattr(policy, "privileged", False)
        call.follows_context = getattr(policy, "follows_context", False)
        return call

    for policy in (random_policy(), TinyNet(), expert_policy):
        calls.clear()
        batched = rollout_batched(jobs, counting(policy), SIM, batch_size=8)
        assert max(calls) == 8 and len(calls) < sum(len(c.actions) for c in batched)  # one call per step per batch
        assert rollout_batched(jobs, policy, SIM, batch_size=3) == batched
        assert rollout_sequential(jobs, policy, SIM) == batched
    # Sampling differs between continuations of one scenario (their seeds differ).
    rnd = rollout_batched(jobs[:2], random_policy(), SIM)
    assert len({tuple(c.actions) for c in rnd}) == 2


def test_a_continuation_forces_the_context_then_acts(suite):
    recordings, _ = suite
    rec = recordings["BabyAI-PutNextLocal-v0:1"]
    takeover = len(rec.actions) - 2
    [c] = rollout_sequential([Job(rec, takeover, 10, seed=1)], expert_policy, SIM)
    # The expert finishes what the context started, in the two steps the recording took.
    assert c.actions == rec.actions[takeover:] and c.success_step == 2 and c.end == "success"
    whole = c.recording(Job(rec, takeover, 10, 1))
    assert whole.actions == rec.actions and whole.actor == "agent" and check(whole, SIM).success == len(rec.actions)
    # The continuation's frames come from replaying the whole; its context frames are the recording's.
    a, b = replay(rec, SIM, takeover, tile_size=4), replay(whole, SIM, takeover, tile_size=4)
    assert all(x.frame.tobytes() == y.frame.tobytes() for x, y in zip(a.steps, b.steps))


def test_success_step_is_counted_from_the_takeover(suite):
    recordings, _ = suite
    rec = recordings["BabyAI-MiniBossLevel-v0:1"]
    for takeover in (0, 3, len(rec.actions) - 1):
        [c] = rollout_batched([Job(rec, takeover, 500)], expert_policy, SIM)
        assert c.end == "success" and c.success_step == len(c.actions)
        # Replayed as a recording, the success lands at takeover + success step.
        assert check(c.recording(Job(rec, takeover, 500)), SIM).success == takeover + c.success_step


def test_continuations_stop_at_their_length_or_the_episode_end(suite):
    recordings, _ = suite
    rec = recordings["BabyAI-GoToLocal-v0:1"]
    [c] = rollout_batched([Job(rec, 0, 5)], lambda obs: np.zeros(len(obs["mission"]), dtype=int), SIM)
    assert c == Continuation([0] * 5, None, "length")
    ep = SIM.reset(rec.level, rec.seed)
    [c] = rollout_batched([Job(rec, 0, 1000)], lambda obs: [0] * len(obs["mission"]), SIM)
    assert c.end == "time out" and len(c.actions) == ep.max_steps and c.success_step is None


def test_random_policy_mostly_fails_on_a_hard_level_and_the_expert_succeeds():
    recs = [expert_recording("BabyAI-GoTo-v0", seed, id=str(seed)) for seed in range(4)]
    jobs = [Job(r, 0, 64, seed=s) for r in recs for s in range(3)]
    rnd = rollout_batched(jobs, random_policy(), SIM)
    assert sum(c.success_step is not None for c in rnd) <= len(jobs) // 4
    exp = rollout_batched([Job(r, 0, 500) for r in recs], expert_policy, SIM)
    assert all(c.success_step is not None for c in exp)
    # From the first step, the expert does exactly what its recording did.
    assert [c.actions for c in exp] == [r.actions for r in recs]


def test_random_policy_keeps_to_its_actions(suite):
    recordings, _ = suite
    rec = recordings["BabyAI-GoToLocal-v0:1"]
    [c] = rollout_batched([Job(rec, 0, 40, seed=3)], random_policy(("left", "right")), SIM)
    assert set(c.actions) <= {0, 1} and len(c.actions) == 40


def test_results_are_handed_over_as_they_finish_and_a_cancel_stops(suite):
    recordings, scenarios = suite
    jobs = jobs_for(scenarios[:4], recordings, continuations=2)
    got = {}
    out = rollout_batched(jobs, random_policy(), SIM, batch_size=3, on_result=got.__setitem__)
    assert got == dict(enumerate(out)) and None not in out
    steps = []
    part = rollout_batched(
        jobs,
        random_policy(),
        SIM,
        batch_size=3,
        progress=lambda done, total: steps.append(done),
        cancelled=lambda: len(steps) >= 2,
    )
    assert len(steps) == 2 and None in part
    assert all(c is None or c == out[i] for i, c in enumerate(part))


def test_bad_jobs_and_bad_answers_are_refused(suite):
    recordings, _ = suite
    rec = recordings["BabyAI-GoToLocal-v0:1"]
    n = len(rec.actions)
    with pytest.raises(RecordingError, match="beyond the recording") as err:
        start(Job(rec, n + 1, 5), SIM)
    assert err.value.field == "takeover"
    with pytest.raises(RecordingError, match="ended at step") as err:
        start(Job(rec, n, 5), SIM)
    assert err.value.field == "takeover"
    with pytest.raises(RecordingError, match="at least 1 step") as err:
        start(Job(rec, 0, 0), SIM)
    assert err.value.field == "continuation"
    wrong = Replayable(rec.level, rec.seed + 1, rec.mission, rec.actions, "upload", "w", line=4)
    with pytest.raises(RecordingError) as err:
        start(Job(wrong, 0, 5), SIM)
    assert (err.value.line, err.value.field) == (4, "mission")
    for answer, said in (([9], "out of range"), (np.zeros((1, 3)), "expected"), ([[-1] * 7], "non-negative")):
        with pytest.raises(ValueError, match=said):
            rollout_batched([Job(rec, 0, 5)], lambda obs, a=answer: a, SIM)
