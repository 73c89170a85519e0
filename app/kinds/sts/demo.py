"""The demo (`proctor demo`): the STS study made the way a researcher makes one, in the demo
researcher's account. The expert's recordings on four level families, a suite whose version 1
is published, continuations of the expert (the skyline), the random policy and a
behavioural-cloning baseline trained there and then with the training code (tiny, a few
seconds on the CPU; uploaded and validated like any policy, and left out with a note when torch
is missing), and a study built from the version with reference episodes (study.py). The core's
demo sets it live. Beside it, a side-by-side study of the same version (pairs.py: every two
agents' matched continuations, judged against each other), live, with simulated judges on part
of it, so its pairwise leaderboard has ratings and a browser has pairs left to work. Jobs run here, one after another: the demo needs no worker.

`demo_lines()` is a small fixed file of continuations in the upload format, which the tests
upload: expert and random continuations of the same four families, without a suite."""

from __future__ import annotations

import functools
import json
import sys
import time

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.kinds.sts.env import ACTIONS, ExpertError, get_simulator

LEVELS = ("BabyAI-GoToLocal-v0", "BabyAI-PickupLoc-v0", "BabyAI-OpenDoor-v0", "BabyAI-PutNextLocal-v0")
SEEDS = (1, 2)
REFERENCE_SEEDS = (11,)
TAKEOVER = 2
CONTINUATIONS = 2  # per scenario and agent (the paper uses ten)
LENGTH = 40  # the agent's own steps at most


def _episode(sim, level: str, seed: int, context: list[int], policy, length: int) -> list[int]:
    """The context forced, then `policy(episode)` for up to `length` steps or the episode's end."""
    ep = sim.reset(level, seed)
    for a in context:
        ep.step(a)
    actions = list(context)
    while not ep.done and len(actions) - len(context) < length:
        a = policy(ep)
        ep.step(a)
        actions.append(a)
    return actions


def _expert_context(sim, level: str, seed: int) -> tuple[str, list[int]]:
    """The mission and the expert's first TAKEOVER actions (fewer when it succeeds sooner: the
    agent must have something left to do)."""
    ep = sim.reset(level, seed)
    actions = []
    while not ep.done:
        a = ep.expert_action()
        ep.step(a)
        actions.append(a)
    return ep.mission, actions[: min(TAKEOVER, len(actions) - 1)]


def demo_lines() -> list[dict]:
    """The continuations, fresh dicts each call (callers edit them): simulated once a process
    (about 0.3 s of episodes, asked for by ~40 tests and the demo)."""
    return [json.loads(line) for line in _demo_lines()]


@functools.cache
def _demo_lines() -> tuple[str, ...]:
    sim = get_simulator()
    lines: list[str] = []
    for level in LEVELS:
        for seed in SEEDS + REFERENCE_SEEDS:
            mission, context = _expert_context(sim, level, seed)
            reference = seed in REFERENCE_SEEDS
            scenario = f"{level.removeprefix('BabyAI-').removesuffix('-v0')}-{seed}"
            for c in range(CONTINUATIONS if not reference else 1):
                rng = np.random.default_rng([seed, c])
                agents = {
                    "expert": lambda ep: ep.expert_action(),
                    "random": lambda ep, rng=rng: int(rng.integers(0, len(ACTIONS) - 1)),
                }
                for agent, policy in agents.items():
                    actions = _episode(sim, level, seed, context, policy, LENGTH)
                    line = {
                        "scenario": scenario,
                        "agent": agent,
                        "continuation": c,
                        "level": level,
                        "seed": seed,
                        "mission": mission,
                        "actions": actions,
                        "takeover": len(context),
                        "length": LENGTH,
                    }
                    if reference:  # labelled by the simulator's own outcome
                        line.update(reference=True, id=f"reference/{scenario}/{agent}")
                    lines.append(json.dumps(line))
    return tuple(lines)


# --- the demo study, through the suites ------------------------------------------------------

SUITE = "Demo suite"
SUITE_SEEDS = (3, 6)  # per level: the expert's games the suite takes over (6 to 13 steps)
K = 4  # the takeover: this many of the expert's steps before its success
SUITE_LENGTH = 16  # the agents' own steps at most
SUITE_CONTINUATIONS = 2  # per scenario and agent
REFERENCE = {"expert_successes": 4, "random_failures": 4}
BASELINE = "bc"
# The baseline is tiny and trained briefly, so that the demo starts in seconds: it is there to
# sit between the expert and random, not to be good.
BASELINE_EPISODES = 12  # expert games per level (seeds 0..), as `proctor train sts-policy --episodes`
BASELINE_SIZES = {"embed": 16, "channels": 16, "hidden": 64}
BASELINE_EPOCHS = 20
BASELINE_BATCH = 32
VALIDATION_WAIT_S = 300  # a worker elsewhere (REDIS_URL set) may take the validation job


def _note(message: str) -> None:
    print(f"  sts demo: {message}", file=sys.stderr)


def _run(job_id: int) -> tuple[str, str]:
    """Run a job here and now, as a worker would: its final state and log."""
    from app import jobs
    from app.db import get_sessionmaker

    jobs.run_job(job_id)
    with get_sessionmaker()() as s:
        job = s.get(jobs.Job, job_id)
        deadline = time.monotonic() + VALIDATION_WAIT_S
        while job.state in ("queued", "running") and time.monotonic() < deadline:
            time.sleep(0.5)  # claimed by a worker of a configured queue: let it finish
            s.expire_all()
            job = s.get(jobs.Job, job_id)
        return job.state, job.log


def _baseline(session: Session, owner):
    """The behavioural-cloning agent with a valid policy (trained and uploaded on first use),
    or None, with a note saying why, when it cannot be had here."""
    from app.agents.artifacts import upload_artifact
    from app.agents.models import AgentArtifact
    from app.jobs import BrokerUnavailable, Job
    from app.kinds.sts.policies import ROLE, newest_valid_policy
    from app.studies.services import register_agent

    try:
        import torch
        from safetensors.torch import save
    except ImportError as exc:
        _note(f"no trained baseline: {exc.name} is not installed (the expert and random agents only)")
        return None
    from workers.sts.train import demonstrations, train_policy

    agent = register_agent(
        session,
        owner,
        "sts",
        BASELINE,
        description="behavioural cloning of the expert (demo-sized, trained by `proctor demo`)",
    )
    session.commit()
    if newest_valid_policy(session, agent) is not None:
        return agent
    started = time.monotonic()
    data = demonstrations(LEVELS, range(BASELINE_EPISODES))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # this small, it trained 3x faster on one thread than on two here
    try:
        model = train_policy(data, **BASELINE_SIZES, epochs=BASELINE_EPOCHS, batch=BASELINE_BATCH, seed=0)
    finally:
        torch.set_num_threads(threads)
    weights = save({k: v.contiguous() for k, v in model.state_dict().items()})
    try:
        artifact = upload_artifact(session, agent, ROLE, "safetensors", weights, model.config())
    except BrokerUnavailable as exc:
        _note(f"no trained baseline: its validation could not be queued ({exc})")
        return None
    job_id = next(
        j.id
        for j in session.scalars(select(Job).where(Job.task == "sts.validate", Job.state == "queued"))
        if j.params.get("artifact_id") == artifact.id
    )
    state, log = _run(job_id)
    session.expire_all()
    artifact = session.get(AgentArtifact, artifact.id)
    if artifact.state != "valid":
        why = artifact.verdict if artifact.state == "invalid" else f"its validation job is {state}: {log}"
        _note(f"no trained baseline: its policy is {artifact.state}: {why}")
        return None
    _note(f"trained the baseline {BASELINE!r} on {len(data)} expert steps in {time.monotonic() - started:.1f} s")
    return agent


def build_demo(session: Session, owner, settings):
    """The demo study (a draft; the core sets it live): recordings, a published suite,
    generation runs and a study of the version, through the services the API uses. What an
    earlier, interrupted run stored is reused."""
    from app.kinds.sts import generation, suites
    from app.runs import service as runs
    from app.kinds.sts.models import Suite
    from app.kinds.sts.study import build_study

    recordings = []
    for level in LEVELS:
        recordings += suites.expert_recordings(session, owner, level, list(SUITE_SEEDS))[0]
    suite = session.scalar(select(Suite).where(Suite.owner_id == owner.id, Suite.name == SUITE)) or suites.create_suite(
        session,
        owner,
        SUITE,
        f"The demo: the expert's games on four BabyAI level families, taken over {K} steps before its success",
    )
    version = suites.get_version(session, suite, 1)
    if version.state == "draft":
        suites.add_scenarios(
            session,
            version,
            rule="before success",
            k=K,
            continuation=SUITE_LENGTH,
            recordings=[r.id for r in recordings if r.success_step >= K],
            tags=["demo"],
        )
        suites.publish(session, version)
    agents = [suites.builtin_agent(session, owner.id, name) for name in ("expert", "random")]
    session.commit()
    if (baseline := _baseline(session, owner)) is not None:
        agents.append(baseline)
    for agent in agents:
        run = generation.create_run(session, owner, suite, version, agent, continuations=SUITE_CONTINUATIONS)
        runs.add(
            session,
            owner,
            generation.KIND_NAME,
            generation.started(session, run),
            target={"suite_id": suite.id, "version": version.number},
        )
        job_id = run.job_id
        session.commit()
        state, log = _run(job_id)
        if state != "done":
            raise RuntimeError(f"the demo's generation for {suites.agent_label(agent)} is {state}:\n{log}")
    session.expire_all()
    agents.append(play_people(session, owner, suite, version))
    study, _ = build_study(
        session,
        owner,
        suite,
        version,
        settings,
        agents=[a.id for a in agents],
        reference=REFERENCE,
        continuations=SUITE_CONTINUATIONS,
    )
    # People side by side with the agents too: the human row on the pairwise leaderboard.
    build_pairs(session, owner, suite, version, [a.id for a in agents])
    return study


PLAY_TITLE = "Demo: STS play"
PLAYERS = {"steady": 0.0, "hasty": 0.3}  # a simulated player's share of keys pressed at random


def play_people(session: Session, owner, suite, version):
    """The human row (people.py): a live play study of the version, which simulated people play
    through the assignment engine as a person plays on the page (each scenario SUITE_CONTINUATIONS
    times, one play a scenario left for you), and their plays stored as continuations of the
    built-in agent "people", which the demo study then judges beside the agents."""
    from app.demo import demo_settings, simulate_task
    from app.kinds.sts.people import build_play_study, continuations_from_study
    from app.kinds.sts.models import PEOPLE
    from app.kinds.sts.suites import builtin_agent, scenarios_of
    from app.studies import services
    from app.studies.models import Study

    study = session.scalar(select(Study).where(Study.title == PLAY_TITLE, Study.owner_id == owner.id))
    if study is None:
        settings = demo_settings(
            PLAY_TITLE,
            bundle_size=len(scenarios_of(session, version)),  # a player plays every scenario once
            annotations_per_item=SUITE_CONTINUATIONS + 1,
        )  # the instructions: the play study's own (the kind's defaults for missions)
        study, _ = build_play_study(session, owner, suite, version, settings)
    if study.state == "draft":
        services.set_state(session, study, "live", owner)
        sim = get_simulator()
        for i, (name, slips) in enumerate(PLAYERS.items()):

            def answer(item, rng, slips=slips):
                p = item.payload

                def policy(ep):
                    if rng.random() >= slips:
                        try:
                            return ep.expert_action()
                        except ExpertError:  # lost after their slips: they press keys at random
                            pass
                    return rng.randrange(len(ACTIONS) - 1)

                context = list(p["context"])
                return {
                    "actions": _episode(sim, p["level"], p["seed"], context, policy, p["max_steps"])[len(context) :]
                }

            simulate_task(session, study, f"demo-player-{name}", answer, 45.0, seed=200 + i)
    continuations_from_study(session, owner, study.id)
    return builtin_agent(session, owner.id, PEOPLE)


def simulate_markers(session: Session, study, researcher) -> None:
    """The demo's annotators, so that its leaderboard has figures: each marks what the
    simulator (or a reference episode's label) says with their own accuracy, the other verdict
    otherwise, at the step the truth has, in about 20 s a continuation."""
    from app.demo import simulate_task
    from app.kinds.sts.score import truth

    from app.studies.models import Item

    # Enough of them that people mark a good part of each agent's continuations, not all: the
    # leaderboard's PPI++ table puts the simulator's verdict on the rest (issue 28). Two rounds
    # of four an agent (people's row among them), so each agent's share stays the same.
    refs = session.scalars(select(Item.reference).where(Item.study_id == study.id, Item.is_gold.is_(False)))
    agents = {(r or {}).get("agent") for r in refs}
    for i, accuracy in enumerate((0.95, 0.9, 0.85, 0.8) * 2 * len(agents)):

        def answer(item, rng, accuracy=accuracy):
            said, step = truth(item.reference or {})
            if rng.random() >= accuracy:
                said = "failure" if said == "success" else "success"
            return {"marker": said, "step": step or 0}

        simulate_task(session, study, f"demo-marker-{i + 1}", answer, 20.0, seed=i)
    simulate_pairs(session, researcher)


PAIRS_TITLE = "Demo: STS side by side"
PAIR_JUDGES = 4  # simulated judges, a task (PAIR_BUNDLE pairs) each: the rest is left to people
PAIR_BUNDLE = 6


def build_pairs(session: Session, owner, suite, version, agent_ids: list[int]) -> None:
    """The side-by-side study of the version and agents (a draft: simulate_pairs sets it live):
    one continuation of each agent a scenario, every two of them a pair."""
    from app.demo import demo_settings
    from app.kinds.sts.study import build_study
    from app.studies.models import Study

    if session.scalar(select(Study.id).where(Study.title == PAIRS_TITLE)):
        return
    settings = demo_settings(
        PAIRS_TITLE, bundle_size=PAIR_BUNDLE, gold_rate=0.2, annotations_per_item=2, instructions=PAIR_INSTRUCTIONS
    )
    build_study(
        session,
        owner,
        suite,
        version,
        settings,
        agents=agent_ids,
        reference={"pairs": REFERENCE["expert_successes"]},
        continuations=1,
        pairs=True,
    )


def simulate_pairs(session: Session, researcher) -> None:
    """The side-by-side study live, with a few simulated judges who pick the side the simulator
    says succeeded (a tie where both or neither did) with their own accuracy, and mark each
    side where the simulator says."""
    from app.demo import simulate_task
    from app.studies import services
    from app.studies.models import Study

    study = session.scalar(select(Study).where(Study.title == PAIRS_TITLE, Study.owner_id == researcher.id))
    if study is None or study.state != "draft":
        return
    services.set_state(session, study, "live", researcher)
    for i, accuracy in enumerate((0.95, 0.9, 0.85, 0.8)[:PAIR_JUDGES]):

        def answer(item, rng, accuracy=accuracy):
            ref = item.reference or {}
            won = {s: ref[s]["simulator"] == "success" for s in ("a", "b")}
            winner = "tie" if won["a"] == won["b"] else ("a" if won["a"] else "b")
            if rng.random() >= accuracy:
                winner = rng.choice([w for w in ("a", "b", "tie") if w != winner])
            out: dict = {"winner": winner, "reason": ""}
            for s in ("a", "b"):
                step = ref[s]["success_step"]
                out[f"{s}_marker"] = "success" if step is not None else "failure"
                out[f"{s}_step"] = step if step is not None else ref[s]["length"]
            return out

        simulate_task(session, study, f"demo-judge-{i + 1}", answer, 30.0, seed=100 + i)


PAIR_INSTRUCTIONS = (
    "Two agents take over the same recording at the same moment: A on the left, B on the right, on one "
    "timeline. Mark on each the first moment it succeeds at the instruction, or fails (at the end if it "
    "never succeeds), then say which did better, or a tie."
)
