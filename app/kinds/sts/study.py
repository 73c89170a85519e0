"""A study from a published suite version: the chosen agents' stored continuations of every
scenario of the version become its items, with reference episodes mixed in (expert
continuations that succeed, labelled success; random ones that fail, labelled failure; paper
004, section 3.3). The items go through the kind's own importer (the "continuations" format),
so each is replayed and rendered exactly as an uploaded one, and carries its scenario, agent,
continuation, category, tags and the suite version that added its scenario."""

from __future__ import annotations

import json
import random

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.auth.models import User
from app.errors import InputError
from app.kinds.sts.generation import generate
from app.kinds.sts.models import MAX_REFERENCE, Continuation, Recording, Scenario, Suite, SuiteVersion
from app.kinds.sts.policies import policy_for_agent
from app.kinds.sts.suites import Conflict, agent_label, builtin_agent, resolve_agent, scenarios_of
from app.studies import services
from app.studies.models import Study

MAX_AGENTS = 20
REFERENCE_KEYS = {"expert_successes": ("expert", "success"), "random_failures": ("random", "failure")}


def scenario_key(sc: Scenario) -> str:
    return f"s{sc.id}"


def _reference(spec: object) -> dict[str, int]:
    if spec is None:
        return {}
    if not isinstance(spec, dict):
        raise InputError('reference is {"expert_successes": k, "random_failures": k}', field="reference")
    out = {}
    for key, value in spec.items():
        if key not in REFERENCE_KEYS:
            raise InputError(
                f"unknown reference kind {key!r}: use {', '.join(REFERENCE_KEYS)}", field=f"reference.{key}"
            )
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_REFERENCE:
            raise InputError(f"{key} must be a whole number from 0 to {MAX_REFERENCE}", field=f"reference.{key}")
        out[key] = value
    return out


def _stored(session: Session, agent_id: int, scenario_ids: list[int]) -> dict[int, list[Continuation]]:
    out: dict[int, list[Continuation]] = {i: [] for i in scenario_ids}
    for c in session.scalars(
        select(Continuation)
        .where(Continuation.agent_id == agent_id, Continuation.scenario_id.in_(scenario_ids))
        .order_by(Continuation.scenario_id, Continuation.index)
    ):
        out[c.scenario_id].append(c)
    return out


def _line(sc: Scenario, rec: Recording, number: int, agent: str, c: Continuation, **extra) -> dict:
    return {
        "scenario": scenario_key(sc),
        "agent": agent,
        "continuation": c.index,
        "level": rec.level,
        "seed": rec.seed,
        "mission": rec.mission,
        "actions": [*rec.actions[: sc.takeover], *c.actions],
        "takeover": sc.takeover,
        "instruction": sc.instruction,
        "category": sc.category,
        "tags": list(sc.tags or []),
        "suite_version": number,
        "length": sc.continuation,
        **extra,
    }


def _references(
    session: Session, suite: Suite, version: SuiteVersion, scenarios: list[Scenario], want: dict[str, int]
) -> list[tuple[Scenario, str, Continuation, str]]:
    """(scenario, agent name, continuation, label) for each reference episode asked for: the
    built-in agent's continuations whose simulator outcome is the label, one per scenario,
    from what is stored, else generated now (and stored, like any of its continuations)."""
    out = []
    order = list(scenarios)
    random.Random(version.id).shuffle(order)  # spread over the suite, the same for a version
    for key, k in want.items():
        if not k:
            continue
        name, label = REFERENCE_KEYS[key]
        agent = builtin_agent(session, suite.owner_id, name)
        session.commit()
        policy = policy_for_agent(session, agent)
        found: list[tuple[Scenario, str, Continuation, str]] = []
        for start in range(0, len(order), max(2 * k, 8)):
            chunk = order[start : start + max(2 * k, 8)]
            generate(session, agent, [(sc, 0) for sc in chunk], 0, policy)  # only what is missing
            stored = _stored(session, agent.id, [sc.id for sc in chunk])
            for sc in chunk:
                first = next((c for c in stored[sc.id] if (c.success_step is not None) == (label == "success")), None)
                if first is not None:
                    found.append((sc, name, first, label))
                if len(found) == k:
                    break
            if len(found) == k:
                break
        if len(found) < k:
            raise InputError(
                f"{k} reference episodes asked for, but only {len(found)} of the version's "
                f"{len(scenarios)} scenarios have a {name} continuation that ends in {label}",
                field=f"reference.{key}",
            )
        out += found
    return out


def build_study(
    session: Session,
    user: User,
    suite: Suite,
    version: SuiteVersion,
    settings: services.StudySettings,
    *,
    agents: object,
    reference: object = None,
    continuations: object = None,
    approve_at: object = None,
    tile: object = None,
    pairs: bool = False,
    control_length: bool = False,
) -> tuple[Study, dict]:
    """The study (a draft, through services.create_study) and a summary of what went in.
    With `pairs`, a side-by-side study (pairs.py): every two agents' matched continuations of
    each scenario, and `reference` {"pairs": k} reference pairs; `control_length` fits its
    ratings controlled for the continuations' lengths (side_by_side.py)."""
    from app.kinds.sts import pairs as side_by_side

    if version.state != "published":
        raise Conflict(
            f"version {version.number} is a draft: a study is built from a published version, "
            "whose scenarios can no longer change",
            field="version",
        )
    if not isinstance(agents, (list, tuple)) or not agents or len(agents) > MAX_AGENTS:
        raise InputError(f"agents must be a list of 1-{MAX_AGENTS} agent ids or built-in names", field="agents")
    if pairs and not 2 <= len(agents) <= side_by_side.MAX_PAIR_AGENTS:
        raise InputError(f"a side-by-side study compares 2-{side_by_side.MAX_PAIR_AGENTS} agents", field="agents")
    chosen = [resolve_agent(session, user, suite, a, field="agents") for a in agents]
    if len({a.id for a in chosen}) != len(chosen):
        raise Conflict("an agent is named twice (by its id and its name)", field="agents")
    if continuations is not None and (
        isinstance(continuations, bool) or not isinstance(continuations, int) or continuations < 1
    ):
        raise InputError("continuations must be a whole number, at least 1", field="continuations")
    want = side_by_side.reference_pairs(reference) if pairs else _reference(reference)
    options = {}
    if approve_at is not None:
        if isinstance(approve_at, bool) or not isinstance(approve_at, (int, float)) or not 0 <= approve_at <= 1:
            raise InputError("approve_at must be a number from 0 to 1", field="approve_at")
        options["approve_at"] = float(approve_at)
    if tile is not None:
        if isinstance(tile, bool) or not isinstance(tile, int) or not 4 <= tile <= 32:
            raise InputError("tile must be a whole number from 4 to 32", field="tile")
        options["tile"] = tile
    if pairs and control_length:
        options["control_length"] = 1
    scenarios = scenarios_of(session, version)
    numbers = {v.id: v.number for v in session.scalars(select(SuiteVersion).where(SuiteVersion.suite_id == suite.id))}
    recs = {
        r.id: r for r in session.scalars(select(Recording).where(Recording.id.in_({s.recording_id for s in scenarios})))
    }
    lines, per_agent = [], {}
    for agent in chosen:
        stored = _stored(session, agent.id, [s.id for s in scenarios])
        fewest = min(len(v) for v in stored.values())
        c = fewest if continuations is None else continuations
        short = [s for s in scenarios if len(stored[s.id]) < max(c, 1)]
        if short:
            raise Conflict(
                f"{agent_label(agent)} has fewer than {max(c, 1)} continuations of {len(short)} of the "
                f"{len(scenarios)} scenarios of version {version.number} (scenario {short[0].id} has "
                f"{len(stored[short[0].id])}): generate them first",
                field="agents",
            )
        label = agent_label(agent)
        for sc in scenarios:
            lines += [
                _line(sc, recs[sc.recording_id], numbers[sc.version_id], label, cont) for cont in stored[sc.id][:c]
            ]
        per_agent[label] = c
    refs = _references(session, suite, version, scenarios, want)
    for sc, name, cont, label in refs:
        lines.append(
            _line(
                sc,
                recs[sc.recording_id],
                numbers[sc.version_id],
                name,
                cont,
                reference=True,
                label=label,
                id=f"reference/{scenario_key(sc)}/{name}/{cont.index}",
            )
        )
    fmt = "continuations"
    if pairs:
        lines, fmt = side_by_side.pair_lines(lines, seed=version.id), side_by_side.MODE
    data = "\n".join(json.dumps(x) for x in lines).encode()
    study = services.create_study(session, user, "sts", settings, data, fmt, options)
    study.kind_settings = {
        **(study.kind_settings or {}),
        "suite": {"id": suite.id, "name": suite.name, "version": version.number},
    }
    session.commit()
    return study, {
        "study": study.id,
        "slug": study.slug,
        "items": len(lines),
        "reference": sum(bool(x.get("reference")) for x in lines) if pairs else len(refs),
        "scenarios": len(scenarios),
        "continuations_per_scenario": per_agent,
    }
