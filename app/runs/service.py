"""Starting, finding, listing and cancelling agent runs, for every kind alike (the kinds'
own checks through their AgentRuns component)."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app import jobs, jsonsafe
from app.auth.models import User
from app.errors import Conflict, InputError
from app.kinds import all_kinds
from app.params import MAX_ID, json_number
from app.runs.component import AgentRuns, Param, Started, an_id
from app.runs.models import AgentRun
from app.studies.models import Study


class NotFound(LookupError):
    """Not among the caller's (404: another researcher's runs are not revealed to exist)."""


def component(kind_name: str) -> AgentRuns:
    kinds = all_kinds()
    if kind_name not in kinds:
        raise InputError(f"unknown kind {kind_name!r}: installed are {', '.join(kinds)}", field="kind")
    runs: AgentRuns | None = kinds[kind_name].agent_runs()
    if runs is None:
        raise Conflict(
            f"{kinds[kind_name].title} has no agent runs (kinds with runs: {', '.join(kinds_with_runs())})",
            field="kind",
        )
    return runs


def kinds_with_runs() -> list[str]:
    return [n for n, k in all_kinds().items() if k.agent_runs() is not None]


def _known(runs: AgentRuns, params: dict[str, Any]) -> None:
    for name in params:
        if name not in runs.fields:
            allowed = ", ".join(runs.fields) or "none"
            raise InputError(f"unknown field {name!r} for a {runs.noun} (it takes: {allowed})", field=str(name))


def from_json(runs: AgentRuns, body: dict[str, Any]) -> dict[str, Any]:
    """A JSON body's fields as the kind takes them: a file field's value is the file's JSON."""
    _known(runs, body)
    return {
        name: (json.dumps(v).encode() if runs.fields[name].type == "file" else v)
        for name, v in body.items()
        if v is not None
    }


def from_form(runs: AgentRuns, values: dict[str, Any]) -> dict[str, Any]:
    """A form's fields (text, files as bytes) as the kind takes them; blank: absent."""
    from app.web import form_number

    _known(runs, values)
    out: dict[str, Any] = {}
    for name, value in values.items():
        kind = runs.fields[name].type
        if kind == "file":
            # Only an upload's bytes: text in its place could name a file on the server.
            if not isinstance(value, (bytes, bytearray)):
                raise InputError(f"send {name} as a file upload", field=name)
            out[name] = bytes(value)
            continue
        text = str(value).strip()
        if not text:
            continue
        if kind in ("int", "float"):
            out[name] = form_number(text, name, int if kind == "int" else float)
        elif kind == "ints":
            try:
                out[name] = jsonsafe.loads(text if text.startswith("[") else f"[{text}]")
            except json.JSONDecodeError:
                raise InputError(f"give {name} as 3,4 or [3, 4]", field=name) from None
        else:
            out[name] = text
    return out


def _range(p: Param) -> str:
    def show(x: float) -> str:
        return str(int(x)) if float(x).is_integer() else f"{x:g}"

    low = f"greater than {show(p.above)}" if p.above is not None else f"from {show(p.low)}" if p.low is not None else ""
    high = "" if p.high is None else f" and at most {show(p.high)}" if p.above is not None else f" to {show(p.high)}"
    return low + high


def _number(name: str, value: object, p: Param) -> int | float:
    whole = p.type in ("int", "ints")
    number = json_number(value, whole=whole)
    if number is None:
        raise InputError(f"{name} must be {'a whole number' if whole else 'a number'} {_range(p)}", field=name)
    value = number
    if (
        (p.low is not None and value < p.low)
        or (p.above is not None and value <= p.above)
        or (p.high is not None and value > p.high)
    ):
        raise InputError(f"{name} must be {_range(p)}", field=name)
    return value


def checked(runs: AgentRuns, params: dict[str, Any]) -> dict[str, Any]:
    """The fields as the kind's declaration takes them (each Param; `required`, `one_of`), or
    a refusal naming the field, before its start: the API's schema says the same
    (api._schema_of). Whole numbers sent as 3.0 come back as 3."""
    for name in runs.required:
        if name not in params:
            raise InputError(f"{name} is required for a {runs.noun}", field=name)
    for group in runs.one_of:
        given = [n for n in group if n in params]
        if len(given) != 1:
            raise InputError(f"give one of {' or '.join(group)}, not {len(given)}", field=group[0])
    out = dict(params)
    for name, value in params.items():
        p = runs.fields[name]
        if p.type in ("int", "float"):
            out[name] = _number(name, value, p)
        elif p.type == "ints":
            if not isinstance(value, list):
                raise InputError(f"{name} must be a list of whole numbers", field=name)
            out[name] = [_number(name, v, p) for v in value]
            if len(set(out[name])) != len(value):
                raise InputError(f"{name}: each value once", field=name)
            if p.most is not None and len(value) > p.most:
                raise InputError(f"{name}: at most {p.most} values", field=name)
        elif p.type == "text":
            if not isinstance(value, str):
                raise InputError(f"{name} must be a text", field=name)
            if p.choices and value not in p.choices:
                raise InputError(f"{name} is one of {', '.join(p.choices)}", field=name)
    for name, p in runs.fields.items():
        if p.counts and name in out and out[name] != len(out.get(p.counts, ())):
            raise InputError(f"{name} = {out[name]} but {len(out.get(p.counts, ()))} {p.counts} are given", field=name)
    return out


def start(
    session: Session,
    user: User,
    kind_name: str,
    params: dict[str, Any],
    *,
    study: Study | None = None,
    target: dict[str, Any] | None = None,
) -> AgentRun:
    """Check and store the run and its job, then queue it (jobs.submit: when the queue cannot be
    reached nothing is left behind and BrokerUnavailable is raised)."""
    runs = component(kind_name)
    target = dict(target or {})
    if study is None and not runs.target_keys:
        raise InputError(f"a {runs.noun} runs on a study: POST /api/v1/studies/{{id}}/runs", field="study_id")
    if study is not None and study.kind != kind_name:
        raise Conflict(f"study {study.id} is a {study.kind} study, not {kind_name}", field="study")
    if study is None:
        missing = [k for k in runs.target_keys if k not in target]
        extra = [k for k in target if k not in runs.target_keys]
        if missing or extra:
            raise InputError(f"a {runs.noun}'s target names {', '.join(runs.target_keys)}", field="target")
        target = {k: _number(f"target.{k}", v, an_id()) for k, v in target.items()}
    params = checked(runs, params)
    started = runs.start(session, user, study, target, params)
    run = add(session, user, kind_name, started, study=study, target=target)
    jobs.submit(session, started.job, withdraw=((AgentRun, run.id), *started.withdraw))
    return run


def add(
    session: Session,
    user: User,
    kind_name: str,
    started: Started,
    *,
    study: Study | None = None,
    target: dict[str, Any] | None = None,
) -> AgentRun:
    """The run's row only (flushed): for a caller that runs the job itself (the demo)."""
    run = AgentRun(
        kind=kind_name,
        study_id=study.id if study is not None else None,
        target=target or {},
        agent_id=started.agent_id,
        artifact_ids=list(started.artifact_ids),
        params=started.params,
        job_id=started.job.id,
        owner_id=user.id,
    )
    session.add(run)
    session.flush()
    return run


def _may_see(session: Session, user: User, run: AgentRun) -> bool:
    if user.role == "admin" or run.owner_id == user.id:
        return True
    if run.study_id is not None:
        study = session.get(Study, run.study_id)
        return study is not None and study.owner_id == user.id
    kind = all_kinds().get(run.kind)
    runs = kind.agent_runs() if kind is not None else None
    return runs is not None and runs.may_see(session, user, run)


def get(session: Session, user: User, run_id: int) -> AgentRun:
    run = session.get(AgentRun, run_id) if 1 <= run_id <= MAX_ID else None
    if run is None or not _may_see(session, user, run):
        raise NotFound(f"no run {run_id} among yours")
    return run


def of_job(session: Session, job_id: int | None) -> AgentRun | None:
    return session.scalar(select(AgentRun).where(AgentRun.job_id == job_id)) if job_id else None


def of_study(session: Session, study_id: int) -> list[AgentRun]:
    """A study's runs, newest first (its page shows them to whoever may manage it)."""
    return list(session.scalars(select(AgentRun).where(AgentRun.study_id == study_id).order_by(AgentRun.id.desc())))


def page_context(session: Session, kind_name: str, runs: list[AgentRun], poll: str | None) -> dict[str, Any]:
    """What templates/runs/list.html needs: the runs, the kind's component, the URL to poll
    (None: the section around the list polls itself)."""
    return {"agent_runs": summaries(session, runs), "runs_component": component(kind_name), "poll": poll}


def study_page_context(session: Session, study: Study) -> dict[str, Any]:
    return page_context(session, study.kind, of_study(session, study.id), f"/studies/{study.id}/runs")


def of_target(session: Session, kind_name: str, **target: Any) -> list[AgentRun]:
    """A kind's runs over its own target whose keys match (an STS suite's: suite_id=...)."""
    rows = session.scalars(select(AgentRun).where(AgentRun.kind == kind_name).order_by(AgentRun.id.desc()))
    return [r for r in rows if all((r.target or {}).get(k) == v for k, v in target.items())]


def list_runs(
    session: Session, user: User, *, study_id: int | None = None, kind: str | None = None, limit: int = 200
) -> list[AgentRun]:
    q = select(AgentRun).order_by(AgentRun.id.desc())
    if study_id is not None:
        q = q.where(AgentRun.study_id == study_id)
    if kind is not None:
        q = q.where(AgentRun.kind == kind)
    if user.role != "admin":
        mine = select(Study.id).where(Study.owner_id == user.id)
        q = q.where((AgentRun.owner_id == user.id) | AgentRun.study_id.in_(mine))
    return list(session.scalars(q.limit(limit)))


def cancel(session: Session, user: User, run_id: int) -> AgentRun:
    run = get(session, user, run_id)
    job = session.get(jobs.Job, run.job_id) if run.job_id else None
    if job is None or job.state not in ("queued", "running"):
        state = job.state if job is not None else "gone"
        raise Conflict(f"the run is {state}: only a queued or running run can be cancelled", field="state")
    component(run.kind).cancel(session, run, job)
    return run


def summaries(session: Session, runs: list[AgentRun]) -> list[dict[str, Any]]:
    """summary() of each run, their jobs read in one query first (summary's session.get then
    finds each in the session), not one query per run."""
    ids = [r.job_id for r in runs if r.job_id]
    if ids:
        session.scalars(select(jobs.Job).where(jobs.Job.id.in_(ids))).all()
    return [summary(session, r) for r in runs]


def summary(session: Session, run: AgentRun) -> dict[str, Any]:
    """The one shape of a run, for every kind: what ran on what, its job's state and progress,
    and what it stored (`detail`, in the kind's words)."""
    job = session.get(jobs.Job, run.job_id) if run.job_id else None
    kind = all_kinds().get(run.kind)
    runs = kind.agent_runs() if kind is not None else None
    return {
        "id": run.id,
        "kind": run.kind,
        "noun": runs.noun if runs else "run",
        "study_id": run.study_id,
        "target": run.target or {},
        "agent_id": run.agent_id,
        "artifact_ids": run.artifact_ids or [],
        "params": run.params or {},
        "job_id": run.job_id,
        "state": job.state if job else "gone",
        "done": job.done if job else 0,
        "total": job.total if job else 0,
        "log": job.log if job else "",
        "result": (job.result or {}) if job else {},
        "created_at": run.created_at.isoformat(),
        "detail": runs.describe(session, run, job) if runs else {},
    }
