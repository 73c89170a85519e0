"""Suites of scenarios (paper 004, sections 3.1 and 5.1): recordings stored and replayed, suites
with versions, scenarios mined from recordings in bulk by rule or one at a time, and personal
tags. The web side's services: views.py calls them, generation.py and study.py build on them.

Version semantics: version n holds every scenario added in versions <= n. Only a draft version
takes new scenarios; publishing makes it immutable (nothing added, changed or removed: a
`Conflict`, which the API answers 409); version n + 1 can be started only once n is published.
"""

from __future__ import annotations

from collections.abc import Iterator

from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.agents.models import Agent
from app.auth.models import User
from app.db import utcnow
from app import errors
from app.errors import InputError
from app.params import MAX_ID
from app.kinds.sts import mining
from app.kinds.sts.env import MAX_SEED, SimulatorError, get_simulator
from app.kinds.sts.models import (
    BUILTIN_AGENTS,
    BUILTIN_VERSION,
    Continuation,
    Recording,
    Scenario,
    ScenarioTag,
    Suite,
    SuiteVersion,
)
from app.kinds.sts.recordings import Replayable, RecordingError, check, expert_recording, parse_recordings_jsonl

KIND_NAME = "sts"
MAX_RECORDINGS = 10_000  # per upload
MAX_SEEDS = 200  # expert recordings made in one request (each is played out on the server)
MAX_NAME = 255
MAX_TAG = mining.MAX_TAG_LENGTH
DEFAULT_CONTINUATION = 40  # the agent's own steps, when a researcher does not say


class Conflict(errors.Conflict):
    """A request the suite's state refuses: a published version changed, a second draft, a
    generation already going. The API answers 409."""


class NotFound(LookupError):
    """Not among the caller's (another researcher's things are not revealed to exist): 404."""


def _commit(session: Session, what: str) -> None:
    """Commit; a unique key another request took meanwhile is a Conflict, not a 500."""
    try:
        session.commit()
    except IntegrityError:
        session.rollback()
        raise Conflict(f"another request stored {what} at the same moment: nothing was stored; try again") from None


def may_manage(user: User, owner_id: int | None) -> bool:
    return user.role == "admin" or (owner_id is not None and owner_id == user.id)


# --- recordings -----------------------------------------------------------------------------


def replayable(row: Recording) -> Replayable:
    """The stored recording as recordings.Replayable, named by its row id."""
    return Replayable(row.level, row.seed, row.mission, list(row.actions), row.actor, str(row.id))


def recording_label(row: Recording) -> str:
    return row.external_id or f"#{row.id}"


def _row(owner: User, rec: Replayable, success_step: int | None) -> Recording:
    return Recording(
        owner_id=owner.id,
        external_id=rec.id,
        level=rec.level,
        seed=rec.seed,
        mission=rec.mission,
        actions=list(rec.actions),
        actor=rec.actor,
        success_step=success_step,
        n_actions=len(rec.actions),
    )


def store_recordings(session: Session, owner: User, data: bytes) -> list[Recording]:
    """An uploaded JSONL file of recordings (recordings.py's format), every line replayed; the
    first bad line is refused with its line and field and nothing is stored. An id the owner
    already uses is refused the same way."""
    recs = parse_recordings_jsonl(data, validate=False)
    if len(recs) > MAX_RECORDINGS:
        raise InputError(f"{len(recs)} recordings; at most {MAX_RECORDINGS} per upload", field="file")
    ids = [r.id for r in recs if r.id is not None]
    taken = (
        set(
            session.scalars(
                select(Recording.external_id).where(Recording.owner_id == owner.id, Recording.external_id.in_(ids))
            )
        )
        if ids
        else set()
    )
    rows = []
    for rec in recs:
        if rec.id in taken:
            raise RecordingError(f"you already have a recording with the id {rec.id!r}", line=rec.line, field="id")
        rows.append(_row(owner, rec, check(rec).success))  # replays it: RecordingError names line and field
    session.add_all(rows)
    _commit(session, "recordings with these ids")
    return rows


def _seeds(seeds: object) -> list[int]:
    if not isinstance(seeds, (list, tuple)) or not seeds:
        raise InputError("seeds must be a non-empty list of whole numbers", field="seeds")
    if len(seeds) > MAX_SEEDS:
        raise InputError(f"at most {MAX_SEEDS} seeds per request", field="seeds")
    for s in seeds:
        if isinstance(s, bool) or not isinstance(s, int) or not 0 <= s <= MAX_SEED:
            raise InputError(f"seed {s!r} is not a whole number from 0 to {MAX_SEED}", field="seeds")
    return list(dict.fromkeys(seeds))


def parse_seeds(text: str) -> list[int]:
    """A form's seeds: "1, 2, 5-9"."""
    out = []
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        low, _, high = part.partition("-")
        try:
            a, b = int(low), int(high or low)
        except ValueError:
            raise InputError(f"{part!r} is neither a seed nor a range like 5-9", field="seeds") from None
        if b < a or b - a >= MAX_SEEDS:
            raise InputError(f"the range {part!r} is empty or longer than {MAX_SEEDS}", field="seeds")
        out += range(a, b + 1)
    return out


def expert_recordings(
    session: Session, owner: User, level: str, seeds: object, max_steps: int | None = None
) -> tuple[list[Recording], int]:
    """The expert (BabyAIBot) playing `level` from each seed, recorded on the server under the
    id "expert:<level>:<seed>"; a seed already recorded is reused. (rows, how many are new)."""
    sim = get_simulator()
    try:
        sim.check_level(level)
    except SimulatorError as exc:
        raise InputError(str(exc), field="level") from None
    if max_steps is not None and (isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1):
        raise InputError("max_steps must be a whole number of steps, at least 1", field="max_steps")
    seeds = _seeds(seeds)
    ids = {s: f"expert:{level}:{s}" for s in seeds}
    have = {
        r.external_id: r
        for r in session.scalars(
            select(Recording).where(Recording.owner_id == owner.id, Recording.external_id.in_(list(ids.values())))
        )
    }
    rows, new = [], []
    for s in seeds:
        if ids[s] in have:
            rows.append(have[ids[s]])
            continue
        try:
            rec = expert_recording(level, s, max_steps, sim, id=ids[s])
        except (SimulatorError, RuntimeError) as exc:  # a bad seed, or the expert gave up
            raise InputError(f"seed {s}: {exc}", field="seeds") from None
        row = _row(owner, rec, len(rec.actions))  # the expert's recordings end at its success
        rows.append(row)
        new.append(row)
    session.add_all(new)
    _commit(session, "these expert recordings")
    return rows, len(new)


def new_plays(
    session: Session, study, prefix: str, have: set[str], counts: dict[str, int], scenarios_only: bool = False
) -> Iterator[tuple[str, str, dict, list, str]]:
    """A play study's plays not stored yet, in the order they were answered: each one's id
    (prefix, item's external id, pseudonym), the item's external id and payload, the actions played and who
    played them (their pseudonym; every crowd account has one). Excluded answers, answers that
    are no play, and with `scenarios_only` plays of no suite scenario are left out; a play whose
    id is in `have` counts as "existing", an empty one as "empty" (in `counts`)."""
    from app.kinds.sts.play import is_play
    from app.studies.models import Annotation, Item

    for external_id, payload, response, pseudonym, worker_id in session.execute(
        select(Item.external_id, Item.payload, Annotation.response, User.pseudonym, User.id)
        .join(Item, Item.id == Annotation.item_id)
        .join(User, User.id == Annotation.worker_id)
        .where(Annotation.study_id == study.id, Annotation.excluded.is_(False))
        .order_by(Annotation.id)
    ):
        actions = (response or {}).get("actions")
        if not is_play(payload) or not isinstance(actions, list) or (scenarios_only and "scenario" not in payload):
            continue
        who = pseudonym or f"user-{worker_id}"
        play_id = f"{prefix}{external_id}:{who}"
        if play_id in have:
            counts["existing"] += 1
        elif not actions:
            counts["empty"] += 1
        else:
            yield play_id, external_id, payload, actions, who


def play_recordings(session: Session, user: User, study_id: int, *, only_successes: bool = False) -> dict:
    """A play study's answers as recordings of the study owner's (an admin may do it for them):
    each play (a worker's actions on a mission, replayed again here) is stored under the id
    "play:<study>:<item>:<pseudonym>" with the actor "human:<pseudonym>", never the worker's
    platform id. Plays stored before are skipped, so running it again adds only new answers; so
    are empty plays, rejected workers' answers, and with `only_successes` those that failed."""
    from app.kinds.sts.play import MODE
    from app.studies.models import Study
    from app.studies.services import can_manage

    study = session.get(Study, study_id)
    if study is None or not can_manage(user, study):
        raise NotFound("no such study among yours")
    if study.kind != KIND_NAME or (study.kind_settings or {}).get("mode") != MODE:
        raise Conflict(
            f"study {study.id} is not a play study (its items are not missions people play)", field="study_id"
        )
    owner = session.get(User, study.owner_id)
    prefix = f"play:{study.id}:"
    have = set(
        session.scalars(
            select(Recording.external_id).where(
                Recording.owner_id == owner.id, Recording.external_id.startswith(prefix)
            )
        )
    )
    rows, counts = [], {"existing": 0, "empty": 0, "failed": 0}
    for rid, _, payload, played, who in new_plays(session, study, prefix, have, counts):
        # A scenario's play (people.py) starts after its context: the recording is the whole episode.
        actions = [*(payload.get("context") or []), *played]
        rec = Replayable(payload["level"], int(payload["seed"]), payload["mission"], actions, f"human:{who}", rid)
        try:
            outcome = check(rec)
        except RecordingError as exc:  # it replayed when it was sent: the simulator changed since
            raise InputError(
                f"the play {rid!r} no longer replays ({exc.message}): nothing was stored", field="study_id"
            ) from None
        if only_successes and outcome.success is None:
            counts["failed"] += 1
            continue
        have.add(rid)
        rows.append(_row(owner, rec, outcome.success))
    session.add_all(rows)
    _commit(session, "recordings of these plays")
    return {
        "study": study.id,
        "owner": owner.id,
        "created": len(rows),
        **counts,
        "recordings": [recording_dict(r) for r in rows],
    }


def recordings_of(session: Session, user: User, owner_id: int | None = None) -> list[Recording]:
    """The owner's recordings (the caller's by default; an admin may name another owner)."""
    owner_id = user.id if owner_id is None else owner_id
    if not may_manage(user, owner_id):
        return []
    return list(session.scalars(select(Recording).where(Recording.owner_id == owner_id).order_by(Recording.id)))


def recording_dict(row: Recording) -> dict:
    return {
        "id": row.id,
        "external_id": row.external_id,
        "level": row.level,
        "seed": row.seed,
        "mission": row.mission,
        "actor": row.actor,
        "n_actions": row.n_actions,
        "success_step": row.success_step,
    }


# --- suites and versions --------------------------------------------------------------------


def _name(name: object) -> str:
    if not isinstance(name, str) or not name.strip() or len(name.strip()) > MAX_NAME:
        raise InputError(f"a suite needs a name of 1-{MAX_NAME} characters", field="name")
    return name.strip()


def create_suite(session: Session, owner: User, name: object, description: object = "") -> Suite:
    """A suite and its first version, a draft."""
    name = _name(name)
    if not isinstance(description, str):
        raise InputError("description must be text", field="description")
    if session.scalar(select(Suite.id).where(Suite.owner_id == owner.id, Suite.name == name)) is not None:
        raise Conflict(f"you already have a suite named {name!r}", field="name")
    suite = Suite(owner_id=owner.id, name=name, description=description.strip())
    session.add(suite)
    session.flush()
    session.add(SuiteVersion(suite_id=suite.id, number=1, state="draft"))
    _commit(session, f"a suite named {name!r}")
    return suite


def get_suite(session: Session, user: User, suite_id: int) -> Suite:
    suite = session.get(Suite, suite_id)
    if suite is None or not may_manage(user, suite.owner_id):
        raise NotFound("no such suite among yours")
    return suite


def suites_of(session: Session, user: User) -> list[Suite]:
    q = select(Suite).order_by(Suite.id)
    if user.role != "admin":
        q = q.where(Suite.owner_id == user.id)
    return list(session.scalars(q))


def versions_of(session: Session, suite: Suite) -> list[SuiteVersion]:
    return list(
        session.scalars(select(SuiteVersion).where(SuiteVersion.suite_id == suite.id).order_by(SuiteVersion.number))
    )


def get_version(session: Session, suite: Suite, number: int) -> SuiteVersion:
    version = session.scalar(
        select(SuiteVersion).where(SuiteVersion.suite_id == suite.id, SuiteVersion.number == number)
    )
    if version is None:
        raise NotFound(f"{suite.name} has no version {number}")
    return version


def latest_version(session: Session, suite: Suite) -> SuiteVersion:
    return versions_of(session, suite)[-1]


def new_version(session: Session, suite: Suite) -> SuiteVersion:
    """Version n + 1, a draft, once version n is published (one draft at a time, so every
    version is a batch added to a fixed earlier one)."""
    latest = latest_version(session, suite)
    if latest.state != "published":
        raise Conflict(
            f"version {latest.number} of {suite.name!r} is still a draft: add its scenarios and "
            f"publish it before starting version {latest.number + 1}",
            field="version",
        )
    version = SuiteVersion(suite_id=suite.id, number=latest.number + 1, state="draft")
    session.add(version)
    _commit(session, f"version {version.number}")
    return version


def _published(session: Session, version: SuiteVersion, what: str) -> Conflict:
    """The refusal names the next step as it stands: the draft there is, or the version to start
    (never a version that already exists)."""
    suite = session.get(Suite, version.suite_id)
    latest = latest_version(session, suite)
    step = (
        f"Add scenarios to version {latest.number}, the draft"
        if latest.state == "draft"
        else f"Start version {latest.number + 1} to add scenarios"
    )
    return Conflict(
        f"version {version.number} of {suite.name!r} is published and cannot change: no scenario can be {what}. {step}",
        field="version",
    )


def require_draft(session: Session, version: SuiteVersion, what: str) -> None:
    if version.state != "draft":
        raise _published(session, version, what)


def publish(session: Session, version: SuiteVersion) -> SuiteVersion:
    """Make the draft immutable. A version that adds nothing is refused (it would be its
    predecessor under another number)."""
    if version.state == "published":
        raise Conflict(
            f"version {version.number} was published on {version.published_at:%Y-%m-%d %H:%M} UTC", field="version"
        )
    if not session.scalar(select(func.count(Scenario.id)).where(Scenario.version_id == version.id)):
        raise Conflict(f"version {version.number} adds no scenarios: add some before publishing it", field="version")
    version.state, version.published_at = "published", utcnow()
    session.commit()
    return version


def scenarios_query(version: SuiteVersion):
    """Version n's scenarios: those its suite added in versions 1..n."""
    return (
        select(Scenario)
        .join(SuiteVersion, SuiteVersion.id == Scenario.version_id)
        .where(Scenario.suite_id == version.suite_id, SuiteVersion.number <= version.number)
        .order_by(Scenario.id)
    )


def scenarios_of(session: Session, version: SuiteVersion) -> list[Scenario]:
    return list(session.scalars(scenarios_query(version)))


def version_summary(session: Session, version: SuiteVersion) -> dict:
    """A version with its scenario counts (all of them, and per category; and those it added)."""
    per_category = dict(
        session.execute(
            select(Scenario.category, func.count(Scenario.id))
            .join(SuiteVersion, SuiteVersion.id == Scenario.version_id)
            .where(Scenario.suite_id == version.suite_id, SuiteVersion.number <= version.number)
            .group_by(Scenario.category)
            .order_by(Scenario.category)
        ).all()
    )
    added = session.scalar(select(func.count(Scenario.id)).where(Scenario.version_id == version.id))
    return {
        "number": version.number,
        "state": version.state,
        "published_at": version.published_at.isoformat() if version.published_at else None,
        "scenarios": sum(per_category.values()),
        "added": added,
        "per_category": per_category,
    }


def suite_dict(session: Session, suite: Suite) -> dict:
    return {
        "id": suite.id,
        "name": suite.name,
        "description": suite.description,
        "owner_id": suite.owner_id,
        "versions": [version_summary(session, v) for v in versions_of(session, suite)],
    }


# --- scenarios ------------------------------------------------------------------------------


def _tags(tags: object, field: str = "tags") -> list[str]:
    if tags is None:
        return []
    if (
        not isinstance(tags, (list, tuple))
        or len(tags) > mining.MAX_TAGS
        or not all(isinstance(t, str) and t.strip() and len(t.strip()) <= MAX_TAG for t in tags)
    ):
        raise InputError(
            f"tags must be at most {mining.MAX_TAGS} non-empty texts of at most {MAX_TAG} characters", field=field
        )
    return list(dict.fromkeys(t.strip() for t in tags))


def _owners_recordings(session: Session, suite: Suite, ids: object) -> list[Recording]:
    """The suite owner's recordings by id (all of them when `ids` is None)."""
    q = select(Recording).where(Recording.owner_id == suite.owner_id).order_by(Recording.id)
    if ids is None:
        rows = list(session.scalars(q))
        if not rows:
            raise InputError("there are no recordings to mine: upload or record some first", field="recordings")
        return rows
    if (
        not isinstance(ids, (list, tuple))
        or not ids
        or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids)
    ):
        raise InputError("recordings must be a non-empty list of recording ids", field="recordings")
    rows = {r.id: r for r in session.scalars(q.where(Recording.id.in_(list(ids))))}
    missing = [i for i in ids if i not in rows]
    if missing:
        raise errors.Missing(f"no recording {missing[0]} among the suite owner's", field="recordings")
    return [rows[i] for i in dict.fromkeys(ids)]


def _scenario_error(row: Recording, exc: RecordingError) -> InputError:
    """A mining refusal about a stored recording: named by the recording, not an upload line;
    a 409 (the request is well formed, the recording does not allow it: a takeover past its end)."""
    return Conflict(f"recording {recording_label(row)}: {exc.message}", field=exc.field)


def add_scenarios(
    session: Session,
    version: SuiteVersion,
    *,
    rule: str | None = None,
    k: object = None,
    takeover: object = None,
    recordings: object = None,
    continuation: object = DEFAULT_CONTINUATION,
    category: object = None,
    tags: object = (),
) -> dict:
    """Add scenarios to a draft version: by a bulk rule (mining.RULES, "before success" with
    k) over the chosen recordings (all of the suite owner's by default: those the rule does not
    apply to are left out and counted), or one recording at an explicit takeover step. The
    category is the level's family unless given; a scenario the suite already has (same
    recording, takeover and length, in any version) is skipped. All or nothing."""
    suite = session.get(Suite, version.suite_id)
    require_draft(session, version, "added")
    if (rule is None) == (takeover is None):
        raise InputError("give either a rule (bulk) or a takeover step (one recording)", field="rule")
    if rule is not None and rule not in mining.RULES:
        raise InputError(f"unknown rule {rule!r}: use one of {', '.join(mining.RULES)}", field="rule")
    if category is not None and (
        not isinstance(category, str) or not category.strip() or len(category.strip()) > MAX_TAG
    ):
        raise InputError(f"category must be a non-empty text of at most {MAX_TAG} characters", field="category")
    if rule == "before success" and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise InputError(f"k must be a whole number of steps, at least 1, not {k!r}", field="k")
    if (
        isinstance(continuation, bool)
        or not isinstance(continuation, int)
        or not 1 <= continuation <= mining.MAX_CONTINUATION
    ):
        raise InputError(f"the continuation length must be 1-{mining.MAX_CONTINUATION} steps", field="continuation")
    tags = _tags(tags)
    rows = _owners_recordings(session, suite, recordings)
    # Named, not defaulted to the owner's recordings: the schema requires them with a takeover.
    if takeover is not None and (recordings is None or len(rows) != 1):
        raise InputError("a takeover step is for one recording: name exactly one", field="recordings")
    sim = get_simulator()
    made: list[tuple[Recording, dict]] = []
    inapplicable = 0
    for row in rows:
        rec = replayable(row)
        try:
            outcome = check(rec, sim)  # validates and gives the end, once per recording
            if rule is None:
                step = takeover
            elif recordings is None and rule == "before success" and (outcome.success is None or k > outcome.success):
                inapplicable += 1  # over all of the owner's recordings, skip those it misses
                continue
            else:
                step = mining.takeover_point(rec, rule, k, sim, outcome=outcome)
            extra = [f"rule:{rule}"] if rule else []
            s = mining.make_scenario(
                rec,
                step,
                continuation,
                category=category.strip() if category else None,
                tags=[*tags, *extra],
                simulator=sim,
                outcome=outcome,
            )
        except RecordingError as exc:
            raise _scenario_error(row, exc) from None
        made.append((row, s))
    have = set(
        session.execute(
            select(Scenario.recording_id, Scenario.takeover, Scenario.continuation).where(Scenario.suite_id == suite.id)
        ).tuples()
    )
    added = []
    for row, s in made:
        key = (row.id, s["takeover"], s["continuation"])
        if key in have:
            continue
        have.add(key)
        sc = Scenario(
            suite_id=suite.id,
            version_id=version.id,
            recording_id=row.id,
            takeover=s["takeover"],
            continuation=s["continuation"],
            instruction=s["instruction"],
            category=s["category"],
            tags=s["tags"],
        )
        session.add(sc)
        added.append(sc)
    _commit(session, "some of these scenarios")
    return {
        "version": version.number,
        "added": [scenario_dict(session, sc) for sc in added],
        "skipped": len(made) - len(added),
        "inapplicable": inapplicable,
    }


def get_scenario(session: Session, user: User, scenario_id: int) -> tuple[Scenario, Suite, SuiteVersion]:
    sc = session.get(Scenario, scenario_id)
    suite = session.get(Suite, sc.suite_id) if sc else None
    if suite is None or not may_manage(user, suite.owner_id):
        raise NotFound("no such scenario among yours")
    return sc, suite, session.get(SuiteVersion, sc.version_id)


def update_scenario(
    session: Session,
    scenario: Scenario,
    *,
    takeover: object = None,
    continuation: object = None,
    category: object = None,
    tags: object = None,
    instruction: object = None,
) -> dict:
    """Change a draft version's scenario. A new takeover point or length makes another
    context, so the continuations stored for the old one are removed (how many is returned)."""
    version = session.get(SuiteVersion, scenario.version_id)
    require_draft(session, version, "changed")
    row = session.get(Recording, scenario.recording_id)
    new_takeover = scenario.takeover if takeover is None else takeover
    new_length = scenario.continuation if continuation is None else continuation
    new_category = scenario.category if category is None else category
    if not isinstance(new_category, str) or not new_category.strip() or len(new_category.strip()) > MAX_TAG:
        raise InputError(f"category must be a non-empty text of at most {MAX_TAG} characters", field="category")
    try:
        mining.make_scenario(replayable(row), new_takeover, new_length, category=new_category.strip())
    except RecordingError as exc:
        raise _scenario_error(row, exc) from None
    if instruction is not None and (not isinstance(instruction, str) or not instruction.strip()):
        raise InputError("the instruction must be a non-empty text", field="instruction")
    removed = 0
    if (new_takeover, new_length) != (scenario.takeover, scenario.continuation):
        clash = session.scalar(
            select(Scenario.id).where(
                Scenario.suite_id == scenario.suite_id,
                Scenario.recording_id == scenario.recording_id,
                Scenario.takeover == new_takeover,
                Scenario.continuation == new_length,
                Scenario.id != scenario.id,
            )
        )
        if clash is not None:
            raise Conflict(
                f"scenario {clash} already takes this recording over at step {new_takeover} for {new_length} steps",
                field="takeover",
            )
        removed = session.execute(delete(Continuation).where(Continuation.scenario_id == scenario.id)).rowcount
        scenario.takeover, scenario.continuation = new_takeover, new_length
    scenario.category = new_category.strip()
    if tags is not None:
        scenario.tags = _tags(tags)
    if instruction is not None:
        scenario.instruction = instruction.strip()
    _commit(session, "a scenario at this takeover step")
    return {**scenario_dict(session, scenario), "continuations_removed": removed}


def remove_scenario(session: Session, scenario: Scenario) -> None:
    require_draft(session, session.get(SuiteVersion, scenario.version_id), "removed")
    session.delete(scenario)  # its continuations and tags go with it (ON DELETE CASCADE)
    session.commit()


def personal_tags(session: Session, user: User, scenario_ids: list[int]) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    if scenario_ids:
        for sid, tag in session.execute(
            select(ScenarioTag.scenario_id, ScenarioTag.tag)
            .where(ScenarioTag.user_id == user.id, ScenarioTag.scenario_id.in_(scenario_ids))
            .order_by(ScenarioTag.tag)
        ):
            out.setdefault(sid, []).append(tag)
    return out


def add_tag(session: Session, user: User, scenario: Scenario, tag: object) -> list[str]:
    """A personal tag (any version's scenario takes them: they are no part of the suite)."""
    if not isinstance(tag, str) or not tag.strip() or len(tag.strip()) > MAX_TAG:
        raise InputError(f"a tag is a non-empty text of at most {MAX_TAG} characters", field="tag")
    tag = tag.strip()
    exists = session.scalar(
        select(ScenarioTag.id).where(
            ScenarioTag.scenario_id == scenario.id, ScenarioTag.user_id == user.id, ScenarioTag.tag == tag
        )
    )
    if exists is None:
        session.add(ScenarioTag(scenario_id=scenario.id, user_id=user.id, tag=tag))
        try:
            session.commit()
        except IntegrityError:  # the same tag from a second request: it is there either way
            session.rollback()
    return personal_tags(session, user, [scenario.id]).get(scenario.id, [])


def remove_tag(session: Session, user: User, scenario: Scenario, tag: str) -> list[str]:
    session.execute(
        delete(ScenarioTag).where(
            ScenarioTag.scenario_id == scenario.id, ScenarioTag.user_id == user.id, ScenarioTag.tag == tag.strip()
        )
    )
    session.commit()
    return personal_tags(session, user, [scenario.id]).get(scenario.id, [])


def scenario_dict(
    session: Session,
    sc: Scenario,
    mine: list[str] | None = None,
    numbers: dict[int, int] | None = None,
    recording: Recording | None = None,
) -> dict:
    """`numbers`: version id -> number (saves a query per scenario in lists)."""
    number = numbers[sc.version_id] if numbers else session.get(SuiteVersion, sc.version_id).number
    rec = recording or session.get(Recording, sc.recording_id)
    out = {
        "id": sc.id,
        "version": number,
        "recording": sc.recording_id,
        "recording_label": recording_label(rec),
        "level": rec.level,
        "seed": rec.seed,
        "takeover": sc.takeover,
        "continuation": sc.continuation,
        "instruction": sc.instruction,
        "category": sc.category,
        "tags": list(sc.tags or []),
    }
    if mine is not None:
        out["my_tags"] = mine
    return out


def scenario_list(session: Session, user: User, version: SuiteVersion) -> list[dict]:
    scenarios = scenarios_of(session, version)
    numbers = {
        v.id: v.number for v in session.scalars(select(SuiteVersion).where(SuiteVersion.suite_id == version.suite_id))
    }
    recs = (
        {
            r.id: r
            for r in session.scalars(select(Recording).where(Recording.id.in_({s.recording_id for s in scenarios})))
        }
        if scenarios
        else {}
    )
    mine = personal_tags(session, user, [s.id for s in scenarios])
    return [scenario_dict(session, s, mine.get(s.id, []), numbers, recs[s.recording_id]) for s in scenarios]


# --- agents ---------------------------------------------------------------------------------


def builtin_agent(session: Session, owner_id: int, name: str) -> Agent:
    """The built-in agent `name` (expert, random) of this researcher, made on first use."""
    from app.studies.services import register_agent

    owner = session.get(User, owner_id)
    return register_agent(session, owner, KIND_NAME, name, version=BUILTIN_VERSION, description=BUILTIN_AGENTS[name])


def resolve_agent(session: Session, user: User, suite: Suite, spec: object, field: str = "agent") -> Agent:
    """An agent by id (an STS agent of the caller's or the suite owner's; an admin's any) or a
    built-in's name (the suite owner's, so every run on a suite shares its continuations)."""
    if isinstance(spec, str) and spec in BUILTIN_AGENTS:
        return builtin_agent(session, suite.owner_id, spec)
    if isinstance(spec, bool) or not isinstance(spec, int) or not 1 <= spec <= MAX_ID:
        raise InputError(
            f"an agent is an agent id or one of the built-in {', '.join(BUILTIN_AGENTS)}, not {spec!r}", field=field
        )
    agent = session.get(Agent, spec)
    if agent is None or not (user.role == "admin" or agent.owner_id in (user.id, suite.owner_id)):
        raise errors.Missing(f"no agent {spec} among yours", field=field)
    if agent.kind != KIND_NAME:
        raise Conflict(f"agent {spec} is a {agent.kind} agent, not an STS one", field=field)
    return agent


def agent_label(agent: Agent) -> str:
    """The agent's name in a study's items (its version when it has several)."""
    return agent.name if agent.version in ("1", BUILTIN_VERSION) else f"{agent.name} v{agent.version}"


def agents_for(session: Session, suite: Suite) -> list[Agent]:
    """The STS agents the suite page offers: the built-ins and the owner's own."""
    for name in BUILTIN_AGENTS:
        builtin_agent(session, suite.owner_id, name)
    session.commit()
    return list(
        session.scalars(
            select(Agent)
            .where(Agent.owner_id == suite.owner_id, Agent.kind == KIND_NAME)
            .order_by(Agent.version != BUILTIN_VERSION, Agent.name)
        )
    )


def simulator_scores(session: Session, version: SuiteVersion) -> list[dict]:
    """Per agent, the simulator's success share over its stored continuations of this
    version's scenarios (overall and per category), and how many scenarios it covers. An
    older version's score is the same filter over the same rows, so it stays comparable."""
    scen = scenarios_query(version).subquery()
    rows = session.execute(
        select(Continuation.agent_id, scen.c.category, scen.c.id, Continuation.success_step).join(
            scen, scen.c.id == Continuation.scenario_id
        )
    ).all()
    n_scenarios = session.scalar(select(func.count()).select_from(scen))
    by_agent: dict[int, dict] = {}
    for agent_id, category, sid, success in rows:
        a = by_agent.setdefault(agent_id, {"n": 0, "success": 0, "scenarios": set(), "per_category": {}})
        a["n"] += 1
        a["success"] += success is not None
        a["scenarios"].add(sid)
        c = a["per_category"].setdefault(category, [0, 0])
        c[0] += 1
        c[1] += success is not None
    agents = {a.id: a for a in session.scalars(select(Agent).where(Agent.id.in_(list(by_agent))))} if by_agent else {}
    out = []
    for agent_id, a in by_agent.items():
        out.append(
            {
                "agent_id": agent_id,
                "agent": agent_label(agents[agent_id]),
                "continuations": a["n"],
                "scenarios": len(a["scenarios"]),
                "of_scenarios": n_scenarios,
                "success": a["success"] / a["n"],
                "per_category": {c: v[1] / v[0] for c, v in sorted(a["per_category"].items())},
            }
        )
    return sorted(out, key=lambda r: -r["success"])
