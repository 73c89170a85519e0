"""The human row (issue 30.4): people play a published suite version's scenarios, and their
plays become continuations of the built-in agent "people", judged like any agent's.

`build_play_study` makes a play study whose items start at each scenario's takeover state: the
item's payload keeps, on the server only (play.public_view leaves them out, as it does the
seed), the scenario id and the context's actions, replayed before the worker's; the worker has
at most the scenario's continuation length. `continuations_from_study` stores each answer as a
`Continuation` of "people", once (its notes name the study, the item and the worker's
pseudonym, never a platform id), so a study built with "people" among its agents
(study.build_study) puts people on the leaderboard beside the agents, on the same scenarios.
"""

from __future__ import annotations

import json

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.auth.models import User
from app.errors import InputError
from app.kinds.sts import play
from app.kinds.sts.models import PEOPLE, Continuation, Recording, Scenario, Suite, SuiteVersion
from app.kinds.sts.recordings import RecordingError
from app.kinds.sts.study import scenario_key
from app.kinds.sts.suites import KIND_NAME, Conflict, NotFound, builtin_agent, new_plays, scenarios_of
from app.studies import services
from app.studies.models import Item, Study


def build_play_study(
    session: Session,
    user: User,
    suite: Suite,
    version: SuiteVersion,
    settings: services.StudySettings,
    *,
    tile: int | None = None,
) -> tuple[Study, dict]:
    """A draft play study of the published version's scenarios, one item each (id "s<id>",
    the scenario's key in a study built from the version)."""
    if version.state != "published":
        raise Conflict(
            f"version {version.number} is a draft: people play a published version, whose scenarios can no longer change",
            field="version",
        )
    scenarios = scenarios_of(session, version)
    if not scenarios:
        raise Conflict(f"version {version.number} has no scenarios to play", field="version")
    recs = {
        r.id: r for r in session.scalars(select(Recording).where(Recording.id.in_({s.recording_id for s in scenarios})))
    }
    # The missions importer checks each (level, seed, mission) in BabyAI and makes the items;
    # the scenario's start and length are added to their payloads below.
    lines = [
        {
            "id": scenario_key(sc),
            "level": recs[sc.recording_id].level,
            "seed": recs[sc.recording_id].seed,
            "mission": recs[sc.recording_id].mission,
            "instruction": sc.instruction,
            "category": sc.category,
        }
        for sc in scenarios
    ]
    data = "\n".join(json.dumps(x) for x in lines).encode()
    study = services.create_study(
        session, user, KIND_NAME, settings, data, "missions", {} if tile is None else {"tile": tile}
    )
    by_key = {scenario_key(sc): sc for sc in scenarios}
    for item in session.scalars(select(Item).where(Item.study_id == study.id)):
        sc = by_key[item.external_id]
        context = list(recs[sc.recording_id].actions[: sc.takeover])
        item.payload = {**item.payload, "scenario": sc.id, "context": context, "max_steps": sc.continuation}
    study.kind_settings = {
        **(study.kind_settings or {}),
        "suite": {"id": suite.id, "name": suite.name, "version": version.number},
    }
    session.commit()
    return study, {"study": study.id, "slug": study.slug, "items": len(lines), "scenarios": len(scenarios)}


def _end(payload: dict, actions: list[int]) -> tuple[int | None, str]:
    """The play's success step after the takeover and how it ended (models.ENDS), as a
    generated continuation's: replayed again, never taken from the stored answer."""
    episode_replay = play.replay_play(payload, actions)
    episode = episode_replay.episode
    success = play.after_context(episode_replay.success_step, payload)
    if success is not None:
        return success, "success"
    if episode.done:
        return None, "time out" if episode.truncated else "failure"
    return None, "length"  # the continuation length, or the person sent before it


def continuations_from_study(session: Session, user: User, study_id: int) -> dict:
    """A scenario play study's answers as continuations of the suite owner's "people" (the
    study's owner or an admin; 404 for another). An answer stored before is skipped
    (`existing`), as are empty plays and rejected workers' answers."""
    study = session.get(Study, study_id)
    if study is None or not services.can_manage(user, study):
        raise NotFound("no such study among yours")
    suite_of = (study.kind_settings or {}).get("suite") or {}
    if study.kind != KIND_NAME or (study.kind_settings or {}).get("mode") != play.MODE or not suite_of:
        raise Conflict(
            f"study {study.id} is not a play study of a suite's scenarios (make one with "
            "POST /api/v1/sts/suites/{id}/versions/{n}/play-study)",
            field="study_id",
        )
    suite = session.get(Suite, suite_of["id"])
    if suite is None:
        raise Conflict(f"the suite of study {study.id} was deleted", field="study_id")
    agent = builtin_agent(session, suite.owner_id, PEOPLE)
    session.flush()
    prefix = f"play:{study.id}:"
    have = set(
        session.scalars(
            select(Continuation.notes).where(Continuation.agent_id == agent.id, Continuation.notes.startswith(prefix))
        )
    )
    next_index: dict[int, int] = {}
    rows, counts = [], {"existing": 0, "empty": 0}
    for note, external_id, payload, actions, _ in new_plays(session, study, prefix, have, counts, scenarios_only=True):
        sc = session.get(Scenario, int(payload["scenario"]))
        if sc is None or sc.suite_id != suite.id:
            raise Conflict(f"the scenario of item {external_id!r} is no longer in the suite", field="study_id")
        try:
            success, end = _end(payload, [int(a) for a in actions])
        except RecordingError as exc:  # it replayed when it was sent: the simulator changed since
            raise InputError(
                f"the play {note!r} no longer replays ({exc.message}): nothing was stored", field="study_id"
            ) from None
        if sc.id not in next_index:
            last = session.scalar(
                select(func.max(Continuation.index)).where(
                    Continuation.agent_id == agent.id, Continuation.scenario_id == sc.id
                )
            )
            next_index[sc.id] = 0 if last is None else last + 1
        have.add(note)
        rows.append(
            Continuation(
                scenario_id=sc.id,
                agent_id=agent.id,
                index=next_index[sc.id],
                actions=[int(a) for a in actions],
                success_step=success,
                end=end,
                seed=None,
                notes=note,
            )
        )
        next_index[sc.id] += 1
    session.add_all(rows)
    session.commit()
    return {
        "study": study.id,
        "agent_id": agent.id,
        "agent": PEOPLE,
        "created": len(rows),
        **counts,
        "continuations": [
            {
                "scenario": r.scenario_id,
                "index": r.index,
                "annotator": r.notes.rsplit(":", 1)[1],
                "actions": r.actions,
                "success_step": r.success_step,
                "end": r.end,
            }
            for r in rows
        ],
    }
