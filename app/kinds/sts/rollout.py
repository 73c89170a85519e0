"""Continuations (the paper's section 3.2): the agent is forced through a scenario's context,
then acts alone for the continuation length, C times per scenario.

`rollout_batched` steps many environments together with one policy call per step for the
whole batch (what makes generation fast on a network policy); `rollout_sequential` runs one
continuation at a time and is the reference it is tested against. Both give the same results
for the same jobs: the environment is deterministic, and every continuation samples from its
own generator, seeded by its job, so no result depends on what else is in the batch.

A policy is a callable `policy(batch_obs) -> actions`:

- `batch_obs`: {"image": uint8 [B, 7, 7, 3], "direction": int64 [B], "mission": list[str]}
  (`Episode.observation()` stacked).
- it returns either B action ints, or B rows of action probabilities [B, 7] which the rollout
  samples, each row with its continuation's own generator.
- Policies are stateless: the same observation gets the same answer. (A recurrent policy would
  need its memory carried per continuation; not supported yet.)
- A policy with `privileged = True` (the expert) also gets `batch_obs["episodes"]`, the live
  `Episode`s, to read the simulator's state; with `follows_context = True` the expert is also
  asked before each forced context action (see `start`). Uploaded policies do neither.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from app.kinds.sts.env import (
    ACTION_INDEX,
    ACTIONS,
    Episode,
    ExpertError,
    Simulator,
    SimulatorError,
    action_index,
    get_simulator,
)
from app.kinds.sts.recordings import Replayable, RecordingError, replay

DONE = ACTION_INDEX["done"]


@dataclass(frozen=True)
class Job:
    """One continuation to generate: a scenario's recording, takeover and length, and the seed
    of the continuation's own sampling (e.g. the scenario's seed + the continuation's index)."""

    recording: Replayable
    takeover: int
    length: int
    seed: int = 0


@dataclass
class Continuation:
    actions: list[int]  # the agent's actions after the takeover point
    success_step: int | None  # continuation actions after which the simulator reported success
    end: str  # "success", "failure" (the simulator's), "time out" (the level's step limit), "length"
    notes: list[str] = field(default_factory=list)  # e.g. the expert gave up

    def recording(self, job: Job, actor: str = "agent", id: str | None = None) -> Replayable:
        """The whole episode, context then continuation, as a recording to replay and render."""
        context = job.recording.actions[: job.takeover]
        r = job.recording
        return Replayable(r.level, r.seed, r.mission, [*context, *self.actions], actor, id)


def jobs_for(
    scenarios: list[dict], recordings: dict[str, Replayable], continuations: int = 10, seed: int = 0
) -> list[Job]:
    """C jobs per scenario (a dict from `mining.make_scenario`); continuation c of scenario i
    samples with seed `seed + i * continuations + c`."""
    out = []
    for i, s in enumerate(scenarios):
        rec = recordings[s["recording"]]
        out += [Job(rec, s["takeover"], s["continuation"], seed + i * continuations + c) for c in range(continuations)]
    return out


def start(job: Job, simulator: Simulator, follow_expert: bool = False) -> Episode:
    """A live episode at the job's takeover point: its context forced, action by action.

    With `follow_expert`, the expert is asked before every forced action, so it sees the whole
    context and replans around each action it did not suggest (BabyAI's advisor mode). A bot
    built fresh at the takeover point plans from the mission alone, which fails where the
    context left it mid-task (e.g. already carrying the object to put next to another: 13 of 31
    PutNextLocal takeovers from expert recordings failed that way, none when it followed). If
    it gives up during the context, it starts afresh at the takeover point."""
    rec = job.recording
    if isinstance(job.length, bool) or not isinstance(job.length, int) or job.length < 1:
        raise RecordingError(
            f"the continuation length must be at least 1 step, not {job.length!r}", line=rec.line, field="continuation"
        )
    if not 0 <= job.takeover <= len(rec.actions):
        raise RecordingError(
            f"takeover step {job.takeover} is beyond the recording, which has {len(rec.actions)} actions",
            line=rec.line,
            field="takeover",
        )
    # Recordings are checked when stored: only the context is replayed here.
    episode = replay(rec, simulator, 0, frames=False, check_all=False).episode
    for i, a in enumerate(rec.actions[: job.takeover]):
        if follow_expert and episode.expert_error is None:
            try:
                episode.expert_action()
            except ExpertError:
                pass
        if episode.done:
            break
        _step_context(episode, i, a, rec)
    if follow_expert and episode.expert_error is not None:
        episode.reset_expert()
    if episode.done:
        raise RecordingError(
            f"the recording's episode ended at step {episode.steps}, at or before the takeover step {job.takeover}",
            line=job.recording.line,
            field="takeover",
        )
    return episode


def _step_context(episode: Episode, i: int, a, rec: Replayable) -> None:
    try:
        episode.step(a)
    except SimulatorError as exc:
        raise RecordingError(f"actions[{i}]: {exc}", line=rec.line, field="actions") from None


def batch_observations(episodes: list[Episode], privileged: bool = False) -> dict:
    obs = [e.observation() for e in episodes]
    out = {
        "image": np.stack([o["image"] for o in obs]).astype(np.uint8, copy=False),
        "direction": np.array([o["direction"] for o in obs], dtype=np.int64),
        "mission": [o["mission"] for o in obs],
    }
    if privileged:
        out["episodes"] = list(episodes)
    return out


def _choose(out, rngs: list[np.random.Generator]) -> list[int]:
    """Actions from a policy's answer: ints as they are, probability rows sampled per row."""
    arr = np.asarray(out)
    if arr.ndim == 1 and len(arr) == len(rngs):
        return [action_index(a.item() if isinstance(a, np.generic) else a) for a in arr]
    if arr.ndim == 2 and arr.shape == (len(rngs), len(ACTIONS)):
        p = arr.astype(np.float64)
        if not np.isfinite(p).all() or (p < 0).any() or (p.sum(axis=1) <= 0).any():
            raise ValueError(
                "the policy's action probabilities must be finite, non-negative, with a positive sum per row"
            )
        cdf = np.cumsum(p, axis=1)
        # Inverse CDF with one uniform per row: the same draw whatever the batch around it.
        u = np.array([rng.random() for rng in rngs]) * cdf[:, -1]
        # searchsorted(row, u, side="right") for every row at once: how many entries are <= u.
        return np.minimum((cdf <= u[:, None]).sum(axis=1), len(ACTIONS) - 1).tolist()
    raise ValueError(
        f"the policy answered shape {arr.shape} for {len(rngs)} observations: "
        f"expected ({len(rngs)},) actions or ({len(rngs)}, {len(ACTIONS)}) probabilities"
    )


class _Starts:
    """Episodes at each job's takeover point. The C continuations of a scenario are C
    consecutive jobs at one state: the context is forced once and its snapshot copied for the
    others (a level generation costs 1-5 ms, a copy 0.4-1 ms; the copies are tested to behave
    as the original)."""

    def __init__(self, jobs: list[Job], simulator: Simulator, follow_expert: bool):
        self.jobs, self.simulator, self.follow = jobs, simulator, follow_expert
        self._from: Job | None = None
        self._restore = None

    @staticmethod
    def _same_start(a: Job | None, b: Job) -> bool:
        return a is not None and a.recording is b.recording and a.takeover == b.takeover

    def episode(self, index: int) -> Episode:
        job = self.jobs[index]
        if self._restore is not None and self._same_start(self._from, job):
            return self._restore()
        episode = start(job, self.simulator, self.follow)
        following = self.jobs[index + 1] if index + 1 < len(self.jobs) else None
        self._from, self._restore = (job, episode.snapshot()) if self._same_start(following, job) else (None, None)
        return episode


class _Running:
    __slots__ = ("index", "job", "episode", "rng", "actions", "success_step", "end", "notes")

    def __init__(self, index: int, job: Job, starts: _Starts):
        self.index, self.job = index, job
        self.episode = starts.episode(index)
        self.rng = np.random.default_rng(job.seed)
        self.actions: list[int] = []
        self.success_step: int | None = None
        self.end: str | None = None
        self.notes: list[str] = []

    def take(self, action: int) -> bool:
        """One action; True when the continuation is over."""
        r = self.episode.step(action)
        self.actions.append(action)
        if r.success:
            self.success_step, self.end = len(self.actions), "success"
        elif r.done:
            self.end = "time out" if r.truncated else "failure"
        elif len(self.actions) >= self.job.length:
            self.end = "length"
        return self.end is not None

    def result(self) -> Continuation:
        if self.episode.expert_error:
            self.notes.append(self.episode.expert_error)
        return Continuation(self.actions, self.success_step, self.end, self.notes)


def rollout_batched(
    jobs: list[Job],
    policy,
    simulator: Simulator | None = None,
    *,
    batch_size: int = 64,
    progress=None,
    on_result=None,
    cancelled=None,
) -> list[Continuation | None]:
    """All jobs' continuations, `batch_size` environments stepped together: one policy call per
    step for the whole batch; a finished continuation leaves and the next job takes its place
    (its context forced first). Results in the order of `jobs`.

    For a background job: `progress(done, total)` after every step, `on_result(index,
    continuation)` as each one finishes (store it there, so a job run again after its worker
    was killed can leave out what is stored), and `cancelled()` checked before every step:
    when it says True the rollout stops and unfinished continuations are None."""
    sim = simulator or get_simulator()
    privileged = getattr(policy, "privileged", False)
    follow = getattr(policy, "follows_context", False)
    results: list[Continuation | None] = [None] * len(jobs)
    queue = iter(enumerate(jobs))
    starts = _Starts(jobs, sim, follow)
    running: list[_Running] = []
    done = 0

    def refill():
        while len(running) < batch_size:
            nxt = next(queue, None)
            if nxt is None:
                return
            running.append(_Running(nxt[0], nxt[1], starts))

    refill()
    while running:
        if cancelled is not None and cancelled():
            break
        obs = batch_observations([r.episode for r in running], privileged)
        actions = _choose(policy(obs), [r.rng for r in running])
        still = []
        for r, a in zip(running, actions):
            if r.take(a):
                results[r.index] = r.result()
                done += 1
                if on_result is not None:
                    on_result(r.index, results[r.index])
            else:
                still.append(r)
        running[:] = still
        refill()
        if progress is not None:
            progress(done, len(jobs))
    return results


def rollout_sequential(jobs: list[Job], policy, simulator: Simulator | None = None) -> list[Continuation]:
    """The reference: one continuation at a time, one policy call per step with a batch of one."""
    sim = simulator or get_simulator()
    privileged = getattr(policy, "privileged", False)
    follow = getattr(policy, "follows_context", False)
    starts = _Starts(jobs, sim, follow)
    out = []
    for i, job in enumerate(jobs):
        r = _Running(i, job, starts)
        while True:
            a = _choose(policy(batch_observations([r.episode], privileged)), [r.rng])[0]
            if r.take(a):
                break
        out.append(r.result())
    return out


# --- built-in policies ----------------------------------------------------------------------


def random_policy(actions: tuple[str, ...] = ACTIONS):
    """Uniform over `actions` (all seven by default). It answers probabilities, so the sampling
    is done by the rollout with each continuation's own generator (seeded by its job): that is
    what keeps batched and one-at-a-time results equal."""
    p = np.zeros(len(ACTIONS))
    p[[action_index(a) for a in actions]] = 1.0 / len(actions)

    def policy(batch_obs):
        return np.broadcast_to(p, (len(batch_obs["mission"]), len(ACTIONS)))

    return policy


class ExpertPolicy:
    """The skyline: BabyAIBot per environment (`Episode.expert_action`), following the context
    from the first step (`start(follow_expert=True)`) so it knows what was done and seen.
    Where the bot gives up (it asserts on states it cannot handle, e.g. a box a context opened,
    which it takes for an unsolvable mission), the expert answers `done`, a no-op in BabyAI, for
    the rest of the continuation, and the continuation notes why."""

    privileged = True
    follows_context = True

    def __call__(self, batch_obs):
        out = []
        for ep in batch_obs["episodes"]:
            try:
                out.append(ep.expert_action())
            except ExpertError:
                out.append(DONE)
        return np.array(out, dtype=np.int64)


expert_policy = ExpertPolicy()


__all__ = [
    "Continuation",
    "ExpertPolicy",
    "Job",
    "batch_observations",
    "expert_policy",
    "jobs_for",
    "random_policy",
    "rollout_batched",
    "rollout_sequential",
    "start",
]
