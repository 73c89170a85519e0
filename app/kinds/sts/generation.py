"""Generation runs (paper 004, section 3.2): an agent is forced through each scenario's context
of a suite version, then acts alone for the continuation length, C times per scenario.

One job `sts.generation` per (agent, suite version), in the "models" queue. Continuations are
stored per (scenario, agent, index) as they finish, so a job run again (its worker was killed,
or the researcher asks for more) generates only what is missing; a scenario carried into a
later version is never generated twice. Continuation `index` of a scenario samples with its
own generator, seeded from (run seed, scenario id, index): the same whatever else is in the
batch or the version.
"""

from __future__ import annotations

import time

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app import jobs
from app.agents.models import Agent
from app.auth.models import User
from app import errors
from app.errors import InputError
from app.kinds.sts import rollout
from app.kinds.sts.models import (
    BUILTIN_AGENTS,
    BUILTIN_VERSION,
    PEOPLE,
    Continuation,
    GenerationRun,
    Recording,
    Scenario,
    Suite,
    SuiteVersion,
)
from app.kinds.sts.policies import policy_for_agent
from app.params import MAX_ID, whole_number
from app.runs.component import AgentRuns, Param, Started, an_id
from app.kinds.sts.suites import Conflict, NotFound, agent_label, may_manage, replayable, scenarios_of, scenarios_query

KIND_NAME = "sts"
DEFAULT_CONTINUATIONS = 10  # C per scenario (the paper's ten)
MAX_CONTINUATIONS = 100
DEFAULT_BATCH = 64
MAX_BATCH = 512
# Progress reports and cancel checks cost a commit or a query each: at most this often.
CHECK_EVERY_S = 1.0
FLUSH_EVERY = 200  # continuations buffered before they are committed


def continuation_seed(seed: int, scenario_id: int, index: int) -> int:
    """The sampling seed of one continuation (31 bits: it is stored in an integer column)."""
    return int(np.random.SeedSequence([seed, scenario_id, index]).generate_state(1)[0]) & 0x7FFFFFFF


def create_run(
    session: Session,
    user: User,
    suite: Suite,
    version: SuiteVersion,
    agent: Agent,
    *,
    continuations: object = DEFAULT_CONTINUATIONS,
    seed: object = 0,
    batch_size: object = DEFAULT_BATCH,
) -> GenerationRun:
    """Store the run and its job (the caller submits it). One run of an agent on a suite at a
    time: a second while one is queued or running would race it for the same continuations."""
    if agent.name == PEOPLE and agent.version == BUILTIN_VERSION:
        raise Conflict(
            "people's continuations come from a play study of the version (people.py), not from a "
            "generation: POST /api/v1/sts/suites/{id}/versions/{n}/play-study, then "
            "POST /api/v1/sts/continuations/from-study",
            field="agent",
        )
    c = whole_number(continuations, "continuations", 1, MAX_CONTINUATIONS)
    seed = whole_number(seed, "seed", 0, 2**31 - 1)
    batch_size = whole_number(batch_size, "batch_size", 1, MAX_BATCH)
    if not session.scalar(select(func.count()).select_from(scenarios_query(version).subquery())):
        raise Conflict(f"version {version.number} has no scenarios to continue", field="version")
    going = session.scalar(
        select(GenerationRun.job_id)
        .join(jobs.Job, jobs.Job.id == GenerationRun.job_id)
        .join(SuiteVersion, SuiteVersion.id == GenerationRun.version_id)
        .where(
            SuiteVersion.suite_id == suite.id,
            GenerationRun.agent_id == agent.id,
            jobs.Job.state.in_(("queued", "running")),
        )
    )
    if going is not None:
        raise Conflict(
            f"{agent_label(agent)} already has a generation on {suite.name!r} queued or running "
            f"(job {going}): wait for it or cancel it",
            field="agent",
        )
    run = GenerationRun(
        version_id=version.id, agent_id=agent.id, owner_id=user.id, continuations=c, seed=seed, batch_size=batch_size
    )
    session.add(run)
    session.flush()
    job = jobs.create_job(
        session,
        f"{KIND_NAME}.generate",
        owner_id=user.id,
        run_id=run.id,
        agent_id=agent.id,
        version_id=version.id,
        continuations=c,
        seed=seed,
        batch_size=batch_size,
    )
    run.job_id = job.id
    session.flush()
    return run


def get_run(session: Session, user: User, run_id: int) -> GenerationRun:
    run = session.get(GenerationRun, run_id)
    version = session.get(SuiteVersion, run.version_id) if run else None
    suite = session.get(Suite, version.suite_id) if version else None
    if suite is None or not may_manage(user, suite.owner_id):
        raise NotFound("no such generation run among yours")
    return run


def _described(session: Session, run: GenerationRun) -> dict:
    """What the run ran and how many of its continuations the version holds."""
    version = session.get(SuiteVersion, run.version_id)
    agent = session.get(Agent, run.agent_id)
    scen = scenarios_query(version).subquery()
    n_scenarios = session.scalar(select(func.count()).select_from(scen))
    stored = session.scalar(
        select(func.count(Continuation.id))
        .join(scen, scen.c.id == Continuation.scenario_id)
        .where(Continuation.agent_id == run.agent_id, Continuation.index < run.continuations)
    )
    return {
        "suite_id": version.suite_id,
        "version": version.number,
        "agent_id": run.agent_id,
        "agent": agent_label(agent),
        "continuations": run.continuations,
        "seed": run.seed,
        "batch_size": run.batch_size,
        "scenarios": n_scenarios,
        "stored": stored,
        "expected": n_scenarios * run.continuations,
    }


def summary(session: Session, run: GenerationRun) -> dict:
    job = session.get(jobs.Job, run.job_id) if run.job_id else None
    d = _described(session, run)
    return {
        "id": run.id,
        **d,
        "job": run.job_id,
        "state": job.state if job else "withdrawn",
        "done": job.done if job else 0,
        "total": job.total if job else d["expected"],
        "log": job.log if job else "",
        "result": job.result if job else {},
    }


def started(session: Session, run: GenerationRun) -> Started:
    """A stored run as the runs service records it (app/runs)."""
    return Started(
        session.get(jobs.Job, run.job_id),
        agent_id=run.agent_id,
        withdraw=((GenerationRun, run.id),),
        params={
            "continuations": run.continuations,
            "seed": run.seed,
            "batch_size": run.batch_size,
            "generation_run": run.id,
        },
    )


def of_job(session: Session, job_id: int | None) -> GenerationRun | None:
    return session.scalar(select(GenerationRun).where(GenerationRun.job_id == job_id)) if job_id else None


class SuiteRuns(AgentRuns):
    """STS's agent runs (app/runs): an agent's continuations of a suite version's scenarios.
    The target is the version, not a study: studies are built from what runs stored."""

    noun = "generation run"
    target_keys = ("suite_id", "version")
    columns = (("Agent", "agent"), ("Version", "version"), ("C", "continuations"), ("Stored", "stored"))
    unit = "continuations"
    fields = {
        "agent_id": an_id(),
        "agent": Param("text", choices=tuple(BUILTIN_AGENTS)),
        "continuations": Param("int", 1, MAX_CONTINUATIONS),
        "seed": Param("int", 0, 2**31 - 1),
        "batch_size": Param("int", 1, MAX_BATCH),
    }
    one_of = (("agent_id", "agent"),)

    def start(self, session: Session, user: User, study, target: dict, params: dict) -> Started:
        from app.kinds.sts import suites

        if study is not None:
            raise Conflict(
                "STS runs continue a suite version's scenarios: POST /api/v1/runs with "
                '{"kind": "sts", "target": {"suite_id", "version"}}',
                field="study",
            )
        for key in self.target_keys:
            value = target[key]
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_ID:
                raise InputError(f"target.{key} must be an id (a whole number from 1)", field="target")
        try:  # first: another's suite is not revealed to exist, whatever else is wrong
            suite = suites.get_suite(session, user, target["suite_id"])
            version = suites.get_version(session, suite, target["version"])
        except NotFound as exc:
            raise errors.Missing(str(exc), field="target") from None
        if ("agent_id" in params) == ("agent" in params):
            raise InputError(
                f"give agent_id (an STS agent) or agent (a built-in: {', '.join(suites.BUILTIN_AGENTS)})", field="agent"
            )
        agent = suites.resolve_agent(
            session,
            user,
            suite,
            params.get("agent_id", params.get("agent")),
            "agent_id" if "agent_id" in params else "agent",
        )
        run = create_run(
            session,
            user,
            suite,
            version,
            agent,
            continuations=params.get("continuations", DEFAULT_CONTINUATIONS),
            seed=params.get("seed", 0),
            batch_size=params.get("batch_size", DEFAULT_BATCH),
        )
        return started(session, run)

    def may_see(self, session: Session, user: User, run) -> bool:
        suite = session.get(Suite, (run.target or {}).get("suite_id") or 0)
        return suite is not None and may_manage(user, suite.owner_id)

    def describe(self, session: Session, run, job: jobs.Job | None) -> dict:
        grun = of_job(session, run.job_id)
        return {"generation_run": grun.id, **_described(session, grun)} if grun else {}


class _Sink:
    """Continuations buffered and committed in batches; one already stored (a second worker on
    the same job, after its first was thought dead) is left as it is."""

    def __init__(self, session: Session, agent_id: int):
        self.session, self.agent_id = session, agent_id
        self.pending: list[dict] = []
        self.stored = 0

    def add(self, scenario_id: int, index: int, seed: int, c: rollout.Continuation) -> None:
        self.pending.append(
            dict(
                scenario_id=scenario_id,
                agent_id=self.agent_id,
                index=index,
                actions=[int(a) for a in c.actions],
                success_step=c.success_step,
                end=c.end,
                seed=seed,
                notes="; ".join(c.notes),
            )
        )
        if len(self.pending) >= FLUSH_EVERY:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        rows, self.pending = self.pending, []
        self.session.add_all(Continuation(**r) for r in rows)
        try:
            self.session.commit()
        except IntegrityError:
            self.session.rollback()
            have = set(
                self.session.execute(
                    select(Continuation.scenario_id, Continuation.index).where(
                        Continuation.agent_id == self.agent_id,
                        Continuation.scenario_id.in_({r["scenario_id"] for r in rows}),
                    )
                ).tuples()
            )
            rows = [r for r in rows if (r["scenario_id"], r["index"]) not in have]
            self.session.add_all(Continuation(**r) for r in rows)
            self.session.commit()
        self.stored += len(rows)


def _every(fn, seconds: float):
    """fn(), asked at most every `seconds` (the last answer in between)."""
    state = {"at": None, "value": False}

    def call():
        now = time.monotonic()
        if state["at"] is None or now - state["at"] >= seconds:
            state["at"], state["value"] = now, fn()
        return state["value"]

    return call


def generate(
    session: Session,
    agent: Agent,
    wanted: list[tuple[Scenario, int]],
    seed: int,
    policy,
    *,
    batch_size: int = DEFAULT_BATCH,
    progress=None,
    cancelled=None,
) -> dict:
    """The agent's continuations (scenario, index) in `wanted` that are not stored yet, rolled
    out in batches and stored as they finish. `progress(done, total)` counts stored ones
    (those already there included); `cancelled()` stops it, keeping what finished."""
    ids = {sc.id for sc, _ in wanted}
    have = (
        set(
            session.execute(
                select(Continuation.scenario_id, Continuation.index).where(
                    Continuation.agent_id == agent.id, Continuation.scenario_id.in_(ids)
                )
            ).tuples()
        )
        if ids
        else set()
    )
    todo = [(sc, i) for sc, i in wanted if (sc.id, i) not in have]
    rec_ids = {sc.recording_id for sc, _ in todo}
    recs = (
        {r.id: replayable(r) for r in session.scalars(select(Recording).where(Recording.id.in_(rec_ids)))}
        if rec_ids
        else {}
    )
    seeds = [continuation_seed(seed, sc.id, i) for sc, i in todo]
    work = [rollout.Job(recs[sc.recording_id], sc.takeover, sc.continuation, s) for (sc, _), s in zip(todo, seeds)]
    keys = [(sc.id, i) for sc, i in todo]  # plain ids: the rows expire at each commit below
    total, before = len(wanted), len(wanted) - len(todo)
    session.commit()  # end the read: on SQLite the progress reports write from another session
    if progress is not None:
        progress(
            before,
            total,
            f"{agent_label(agent)}: {before} of {total} continuations already stored, {len(todo)} to generate",
        )
    sink = _Sink(session, agent.id)

    def on_result(k: int, c: rollout.Continuation) -> None:
        sink.add(*keys[k], seeds[k], c)

    report = None
    if progress is not None:

        def report_now(done: int, _total: int) -> None:
            sink.flush()  # committed before the report, which writes from its own session
            progress(before + sink.stored, total)

        throttled = _every(lambda: True, CHECK_EVERY_S)

        def report(done: int, _total: int) -> None:
            if done == _total or throttled():
                report_now(done, _total)

    stop = _every(cancelled, CHECK_EVERY_S) if cancelled is not None else None
    rollout.rollout_batched(work, policy, batch_size=batch_size, progress=report, on_result=on_result, cancelled=stop)
    sink.flush()
    stopped = bool(stop and stop())
    if progress is not None:
        progress(
            before + sink.stored,
            total,
            f"stored {sink.stored} continuations" + (" before it was cancelled" if stopped else ""),
        )
    return {"stored": sink.stored, "had": before, "wanted": total, "cancelled": stopped}


def run_generation(session: Session, job, progress) -> dict:
    """The job `sts.generation`: params agent_id, version_id, continuations (C), seed,
    batch_size. Idempotent: what is stored is skipped, so a re-run resumes."""
    p = job.params
    version = session.get(SuiteVersion, p["version_id"])
    agent = session.get(Agent, p["agent_id"])
    if version is None or agent is None:
        raise LookupError("the suite version or the agent of this run was deleted")
    policy = policy_for_agent(session, agent)
    scenarios = scenarios_of(session, version)
    wanted = [(sc, i) for sc in scenarios for i in range(int(p["continuations"]))]
    try:
        result = generate(
            session,
            agent,
            wanted,
            int(p["seed"]),
            policy,
            batch_size=int(p.get("batch_size", DEFAULT_BATCH)),
            progress=progress,
            cancelled=progress.cancelled,
        )
    finally:
        if (close := getattr(policy, "close", None)) is not None:
            close()  # an uploaded TorchScript policy's sandboxed process
    return {**result, "scenarios": len(scenarios), "continuations": int(p["continuations"])}
