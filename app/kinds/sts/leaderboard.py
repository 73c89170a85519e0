"""The STS leaderboard section: agents by the share of their continuations people marked a
success (score.py's definitions), beside what the simulator says and the share corrected by
the annotators' measured sensitivity and specificity; and the annotators on reference
episodes. Reads one row per valid annotation (rejected workers' are excluded)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sqlalchemy import and_, select
from sqlalchemy.orm import Session

from app.auth.models import User
from app.leaderboards.plot import PALETTE, cdf_svg, estimates_svg
from app.kinds.sts.mining import UNKNOWN, tags_now
from app.kinds.sts.score import Marker, outcome, score, share
from app.leaderboards import stats
from app.leaderboards.judged import judged_row, judged_table, learned_row, learned_table
from app.leaderboards.rows import rank_cells, rank_interval_column, with_units
from app.studies.models import Annotation, Item, Study

# The first column of the agents' tables: who a row is (the judged tables take its label and help).
AGENT_COLUMN = {"key": "agent", "label": "Agent", "help": "The agent that played on from the takeover point."}


def markers(session: Session, study: Study) -> tuple[list[Marker], dict[tuple, dict], dict[str, list[int]]]:
    """The study's valid annotations as markers; each continuation's item reference; and per
    annotator the marker-step errors on reference episodes they labelled right."""
    valid = and_(Annotation.study_id == study.id, Annotation.excluded.is_(False))
    out, refs, step_errors = [], {}, {}
    for is_gold, category, reference, takeover, response, scores, who in session.execute(
        select(
            Annotation.is_gold,
            Item.category,
            Item.reference,
            Item.payload["takeover"],
            Annotation.response,
            Annotation.scores,
            User.pseudonym,
        )
        .join(Item, Item.id == Annotation.item_id)
        .join(User, User.id == Annotation.worker_id)
        .where(valid)
        .order_by(Annotation.id)
    ):
        reference, response = reference or {}, response or {}
        if response.get("marker") not in ("success", "failure"):
            continue
        who = who or "?"
        m = Marker(
            annotator=who,
            marker=response["marker"],
            reference=bool(is_gold),
            agent=str(reference.get("agent", "")),
            scenario=str(reference.get("scenario", "")),
            continuation=str(reference.get("continuation", "")),
            category=category or "",
            step=response.get("step"),
            label=reference.get("label") if is_gold else None,
        )
        out.append(m)
        if not is_gold:
            # The takeover point the item shows (its payload's): what a rule's tag is checked against.
            refs[(m.agent, m.scenario, m.continuation)] = {**reference, "category": m.category, "takeover": takeover}
        elif (scores or {}).get("step_error") is not None:
            step_errors.setdefault(who, []).append(scores["step_error"])
    return out, refs, step_errors


ESTIMATE_KEYS = ("mean", "low", "high", "n", "method", "note")


def estimate(entry: dict) -> dict:
    """The {mean, low, high, n, method} of a score.py share (its "note" when it has one: too few
    continuations to say much). The same numbers `proctor sts score --json` prints."""
    return {k: entry[k] for k in ESTIMATE_KEYS if k in entry}


def corrected_cell(corrected: dict) -> dict | str:
    """The corrected share as a cell: its estimate, or why there is none."""
    if corrected["mean"] is None:
        return f"n/a: {corrected['reason']}"
    return estimate(corrected)


def _corrected_units(cell: dict | str, scenarios: dict) -> dict | str:
    """The corrected share's cell with the scenarios its bootstrap resamples (rows.with_units)."""
    return with_units(cell, scenarios, "scenario") if isinstance(cell, dict) else cell


def ttc_cell(ttc: dict) -> str | None:
    """The interval of the median time to completion, or why there is none."""
    if not ttc["n"]:
        return None
    if ttc["low"] is None:  # worded as every other cell's "too few" (research/_estimates.html)
        return f"n = {ttc['n']}: too few for an interval"  # none below 6 times (score.py)
    return f"[{ttc['low']:g}, {ttc['high']:g}], n = {ttc['n']}"


def section(session: Session, study: Study) -> dict | None:
    marks, refs, step_errors = markers(session, study)
    if not marks:
        return None
    result = score(marks)
    # Pooled over every reference annotation: the annotator pool's rates, for the correction.
    sens, spec = result["reference"]["sensitivity"], result["reference"]["specificity"]
    n_sens, n_spec = result["reference"]["n_success"], result["reference"]["n_failure"]

    by_continuation: dict[tuple, list[str]] = {}
    for m in marks:
        if not m.reference:
            by_continuation.setdefault((m.agent, m.scenario, m.continuation), []).append(m.marker)
    agent_rows = []
    for agent, entry in result["agents"].items():
        mine = [(k, v) for k, v in by_continuation.items() if k[0] == agent]
        simulated = [refs[k].get("simulator") == "success" for k, _ in mine]
        # 1 where people's outcome is the simulator's, 0 where opposite, 1/2 for a tie.
        agree = [1 - abs(outcome(v) - sim) for (_, v), sim in zip(mine, simulated)]
        # What the correction adjusts (score.py): each continuation's share of success markers,
        # averaged, i.e. what one annotator says; the majority's share differs where they disagree.
        marked = [sum(m == "success" for m in v) / len(v) for _, v in mine]
        agent_rows.append(
            {
                "agent": agent,
                "n": entry["n"],
                # n: the continuations; units: the scenarios the interval resamples.
                "success": with_units(estimate(entry), entry["per_scenario"], "scenario"),
                "se": entry["se"],
                "marked": sum(marked) / len(marked),
                "simulator": sum(simulated) / len(simulated),
                "agreement": sum(agree) / len(agree),
                "corrected": entry["corrected"]["mean"],
                "corrected_share": _corrected_units(corrected_cell(entry["corrected"]), entry["per_scenario"]),
                # One format for the column: a median of steps can be 4.5, so every one is a float.
                "ttc": None if entry["ttc_median"] is None else float(entry["ttc_median"]),
                "ttc_interval": ttc_cell(entry["ttc"]),
            }
        )
    agent_rows.sort(key=lambda r: -r["success"]["mean"])
    # Ranks by the success share over the scenarios every agent played (the unit: the scenario,
    # its share of successes), as far as they can tell the agents apart.
    per_scenario = {a: result["agents"][a]["per_scenario"] for a in result["agents"]}
    shared = sorted(set.intersection(*(set(v) for v in per_scenario.values()))) if per_scenario else []
    ranks = rank_cells({a: [v[sc] for sc in shared] for a, v in per_scenario.items()}, "scenario")
    for r in agent_rows:
        if r["agent"] in ranks:
            r["rank"] = ranks[r["agent"]]
    tables = [
        {
            "key": "sts_agents",
            "title": "Success share per agent",
            "note": (
                "A continuation's outcome is the majority of its markers (a tie is half a success); an "
                "agent's share is the mean over its continuations with standard error sqrt(p(1-p)/n) "
                "and a 95% interval whose unit is the scenario (Wilson's at the effective number of scenarios; "
                'under 5 scenarios: "too few for an interval", its n counting scenarios). Rank (95%): by the share over the '
                f'{len(shared)} scenarios every agent played, "1-2" where the ranks\' intervals overlap '
                f'(fewer than {stats.MIN_RANK_UNITS} scenarios rank nobody: "—"). Simulator: the '
                "share BabyAI itself counts as a success; agreement: the share of continuations where "
                "people's outcome matches it. Success markers: the share of markers that say success (per "
                "continuation, then averaged over the agent's continuations): what one annotator says, "
                "which is below or above the success share where a continuation's markers disagree. "
                "Corrected: that marker share (not the success share) adjusted for the annotators' pooled "
                f"sensitivity ({'n/a' if sens is None else f'{sens:.2f}'}, over {n_sens} marker"
                f"{'' if n_sens == 1 else 's'} on success-labelled reference episodes) and specificity "
                f"({'n/a' if spec is None else f'{spec:.2f}'}, over {n_spec} on failure-labelled ones) "
                "(Rogan-Gladen: (marker share - (1 - specificity)) / (sensitivity + specificity - 1), clipped to "
                "[0, 1], so a share the annotators' misses push above 1 reads 1.000; with sensitivity and specificity "
                "both 1 it equals the marker share), with a 95% bootstrap "
                "interval over the agent's scenarios and the reference episodes. "
                "Time to completion: per successful continuation, the steps from the takeover to its "
                "success marker; the median over them, with a distribution-free 95% interval."
            ),
            "columns": [
                AGENT_COLUMN,
                {"key": "n", "label": "Continuations", "help": "The agent's continuations people marked."},
                *(
                    [rank_interval_column("success share", "the scenarios every agent played")]
                    if len(per_scenario) > 1
                    else []
                ),
                {
                    "key": "success",
                    "label": "Success share",
                    "help": "Share (0-1) of continuations people's markers call a success (a tie is half), with a "
                    "95% interval resampling scenarios.",
                },
                {"key": "se", "label": "SE", "help": "The share's standard error, sqrt(p(1-p)/n) over continuations."},
                {
                    "key": "marked",
                    "label": "Success markers",
                    "help": "Share (0-1) of the markers that say success, per continuation and then averaged "
                    "over the agent's continuations: the share the correction adjusts; no interval.",
                },
                {
                    "key": "corrected_share",
                    "label": "Corrected",
                    "help": "Rogan-Gladen: the success-marker share corrected for the annotators' sensitivity "
                    "and specificity, clipped to [0, 1], 95% bootstrap interval over scenarios and "
                    "reference episodes.",
                },
                {
                    "key": "simulator",
                    "label": "Simulator",
                    "help": "Share (0-1) of the continuations the simulator itself counts as a success.",
                },
                {
                    "key": "agreement",
                    "label": "Agreement",
                    "help": "Share (0-1) of continuations where people's outcome is the simulator's (a tie counts half).",
                },
                {
                    "key": "ttc",
                    "label": "Time to completion (median steps)",
                    "format": "g",
                    "help": "Median over successful continuations of the steps from the takeover to the success "
                    "marker; — where the agent has no successful continuation.",
                },
                {
                    "key": "ttc_interval",
                    "label": "Median's 95% interval",
                    "help": "A distribution-free 95% interval of the median time to completion (order "
                    "statistics), and its n: the successful continuations.",
                },
            ],
            "rows": agent_rows,
        }
    ]
    tables.extend(_ppi_tables(session, study, [r["agent"] for r in agent_rows], by_continuation))
    tables.extend(_learned_tables(session, study, [r["agent"] for r in agent_rows], by_continuation))
    # Consistency (the paper's Figure 9): per scenario, the share of each agent's continuations
    # that succeed; its difficulty is one minus the mean share over the agents.
    agents = [r["agent"] for r in agent_rows]
    scenario_rows = []
    scenarios = sorted({k[1] for k in by_continuation})
    for sc in scenarios:
        shares = {a: result["agents"][a]["per_scenario"].get(sc) for a in agents}
        seen = [v for v in shares.values() if v is not None]
        category = next((m.category for m in marks if not m.reference and m.scenario == sc), "")
        scenario_rows.append(
            {
                "scenario": sc,
                "category": category,
                **{f"a:{a}": v for a, v in shares.items()},
                "difficulty": 1 - sum(seen) / len(seen),
            }
        )
    scenario_rows.sort(key=lambda r: (-r["difficulty"], r["scenario"]))
    tables.append(
        {
            "key": "sts_scenarios",
            "title": "Consistency per scenario",
            "note": (
                "Per scenario, the share of each agent's continuations people marked a success (how "
                'consistently it succeeds, paper Figure 9); "—": the agent did not play that scenario. '
                "Difficulty: one minus the mean share over the agents that played it, hardest first."
            ),
            "columns": [
                {"key": "scenario", "label": "Scenario", "help": "The scenario (a recording and its takeover point)."},
                {"key": "category", "label": "Category", "help": "The scenario's category."},
            ]
            + [
                {
                    "key": f"a:{a}",
                    "label": a,
                    "help": f"Share (0-1) of {a}'s continuations of this scenario marked a success; no interval; "
                    "—: not played.",
                }
                for a in agents
            ]
            + [
                {
                    "key": "difficulty",
                    "label": "Difficulty",
                    "help": "One minus the mean share over the agents (0-1; 1 = no agent succeeds).",
                }
            ],
            "rows": scenario_rows,
        }
    )
    # Against the simulator and every metric the researcher imported (agent_metrics.py), over
    # the agents that have both.
    against = {"simulator success rate": {r["agent"]: r["simulator"] for r in agent_rows}}
    against.update((study.kind_settings or {}).get("agent_metrics") or {})
    correlations = []
    for metric, values in against.items():
        both = [r for r in agent_rows if values.get(r["agent"]) is not None]
        correlations.append(
            {
                "metric": metric,
                "agents": len(both),
                **spearman([r["success"]["mean"] for r in both], [values[r["agent"]] for r in both]),
            }
        )
    tables.append(
        {
            "key": "sts_correlation",
            "title": "Rank correlation with other metrics",
            "note": (
                "Spearman's rho between the agents' success shares marked by people and the simulator's "
                "own success rates, and each per-agent metric imported on the study page, over the agents "
                "that have both, with its two-sided p, exact over every ordering of the agents up to 9 agents "
                '(over 3 agents even rho = 1 has p = 1/3); "—" with fewer than three agents, or when '
                "either ranking is all ties."
            ),
            "columns": [
                {
                    "key": "metric",
                    "label": "Against",
                    "help": "The per-agent figure compared with the agents' success shares.",
                },
                {"key": "agents", "label": "Agents", "help": "Agents that have both figures."},
                {
                    "key": "rho",
                    "label": "Spearman rho",
                    "help": "Spearman's rank correlation (-1 to 1) over those agents; no interval.",
                },
                {
                    "key": "p",
                    "label": "p",
                    "help": "Its two-sided p: exact (the share of every ordering of the agents at least as "
                    "correlated) up to 9 agents, the t approximation above.",
                },
            ],
            "rows": correlations,
        }
    )
    from app.kinds.sts.failures import summary

    failures = summary(session, study)
    if failures:
        tables.append(
            {
                "key": "sts_failure_types",
                "title": "Why continuations failed (paper appendix A.3)",
                "note": (
                    f"{failures['total']} failed continuations classified by an admin, by the source of the "
                    "error and its type; per agent, how many of its own."
                ),
                "columns": [
                    {"key": "source", "label": "Source", "help": "Where the error came from."},
                    {"key": "error_type", "label": "Error type", "help": "The kind of error an admin assigned."},
                    {"key": "description", "label": "What it means", "help": "The error type in words."},
                    {"key": "episodes", "label": "Episodes", "help": "Failed continuations classified so."},
                    {"key": "share", "label": "Share", "help": "Their share (0-1) of the classified failures."},
                ]
                + [
                    {"key": f"a:{a}", "label": a, "help": f"How many of {a}'s failed continuations are of this type."}
                    for a in failures["agents"]
                ],
                "rows": failures["rows"],
            }
        )
    annotator_rows = []
    for who, a in result["annotators"].items():
        if not a["n_reference"]:
            continue
        errs = step_errors.get(who, [])
        annotator_rows.append(
            {
                "annotator": who,
                "n_reference": a["n_reference"],
                "sensitivity": a["sensitivity"],
                "specificity": a["specificity"],
                "balanced_accuracy": a["balanced_accuracy"],
                "step_error": sum(errs) / len(errs) if errs else None,
            }
        )
    if annotator_rows:
        tables.append(
            {
                "key": "sts_annotators",
                "title": "Annotators on reference episodes",
                "note": (
                    "Sensitivity: the share of success-labelled reference episodes marked success; "
                    'specificity: the same for failure; balanced accuracy: their mean. "—": the annotator '
                    "has seen no reference episode of that label (balanced accuracy: until they have seen both); "
                    'marker-step error "—": none labelled right. Marker-step error: the mean distance in steps from the '
                    "labelled moment, over the reference episodes they labelled right."
                ),
                "columns": [
                    {"key": "annotator", "label": "Annotator", "help": "The annotator (pseudonym)."},
                    {
                        "key": "n_reference",
                        "label": "Reference",
                        "help": "Reference episodes (known outcome) they marked.",
                    },
                    {
                        "key": "sensitivity",
                        "label": "Sensitivity",
                        "help": "Share (0-1) of success-labelled reference episodes they marked a success.",
                    },
                    {
                        "key": "specificity",
                        "label": "Specificity",
                        "help": "Share (0-1) of failure-labelled reference episodes they marked a failure.",
                    },
                    {
                        "key": "balanced_accuracy",
                        "label": "Balanced accuracy",
                        "help": "The mean of sensitivity and specificity (0-1; 0.5 = chance).",
                    },
                    {
                        "key": "step_error",
                        "label": "Marker-step error",
                        "help": "Mean distance in steps from the labelled moment, on the episodes they marked right.",
                    },
                ],
                "rows": annotator_rows,
            }
        )
    tables[1:1] = _breakdowns(session, study, agents, by_continuation, refs)
    ttc = {a: [float(t) for t in result["agents"][a]["ttc"]["steps"]] for a in agents}
    colour = {a: PALETTE[i % len(PALETTE)] for i, a in enumerate(agents)}
    figures = [
        {
            "title": "Success share per agent (95% interval)",
            "svg": estimates_svg([(r["agent"], r["success"], colour[r["agent"]]) for r in agent_rows], "success share"),
        }
    ]
    # One interval plot per breakdown: each group's agents side by side.
    for table in tables:
        if table["key"] in BREAKDOWN_PLOTS:
            groups = [c for c in table["columns"] if c["key"].startswith("g:")]
            figures.append(
                {
                    "title": BREAKDOWN_PLOTS[table["key"]],
                    "svg": estimates_svg(
                        [
                            (f"{g['label']} · {r['agent']}", r[g["key"]], colour[r["agent"]])
                            for g in groups
                            for r in table["rows"]
                            if r.get(g["key"])
                        ],
                        "success share",
                    ),
                }
            )
    figures += [
        {
            "title": "Time to completion: steps from the takeover to the success marker (CDF)",
            "svg": cdf_svg({a: ttc.get(a, []) for a in agents}, "steps after the takeover"),
        },
    ]
    return {"tables": tables, "figures": [f for f in figures if f["svg"]]}


BREAKDOWN_PLOTS = {
    "sts_categories": "Success share per category (95% intervals)",
    "sts_versions": "Success share per suite version (95% intervals)",
    "sts_tags": "Success share per tag (95% intervals)",
}


# What the tables of people beside an automatic judge (the simulator, a learned predictor) both
# say: one judged thing, what people give, and who a row is.
JUDGED_WORDS = {"unit": "continuation", "measure": "success share"}
JUDGED_AGENT = (AGENT_COLUMN["label"], AGENT_COLUMN["help"])


def _continuation(ref: dict) -> tuple[str, str, str]:
    """A continuation item's (agent, scenario, continuation) from its reference: the key of
    people's verdicts on it (section's by_continuation)."""
    return str(ref.get("agent", "")), str(ref.get("scenario", "")), str(ref.get("continuation", ""))


def _people_and_judge(
    agents: list[str], by_continuation: dict[tuple, list[str]], judged: dict[tuple[str, str, str], Any]
) -> Iterator[tuple[str, dict, dict]]:
    """Per agent that people marked continuations of which the judge judged too: the agent,
    people's outcome per such continuation, and what the judge has on each of its continuations."""
    for agent in agents:
        human = {k: outcome(v) for k, v in by_continuation.items() if k[0] == agent and k in judged}
        if human:
            yield agent, human, {k: v for k, v in judged.items() if k[0] == agent}


def _ppi_tables(
    session: Session, study: Study, agents: list[str], by_continuation: dict[tuple, list[str]]
) -> list[dict]:
    """People and the simulator together (issue 28): the simulator judges every continuation of
    the study, people a sample of them (app/leaderboards/judged.py); per agent, and per agent and
    category where the study has more than one category."""
    judge: dict[tuple[str, str, str], float] = {}
    category: dict[tuple[str, str, str], str] = {}
    for cat, ref in session.execute(
        select(Item.category, Item.reference).where(Item.study_id == study.id, Item.is_gold.is_(False))
    ):
        ref = ref or {}
        if ref.get("simulator") in ("success", "failure"):
            key = _continuation(ref)
            judge[key] = 1.0 if ref["simulator"] == "success" else 0.0
            category[key] = cat or ""
    rows, by_cat = [], []
    cats = sorted(set(category.values()))
    for agent, human, mine in _people_and_judge(agents, by_continuation, judge):
        rows.append({"agent": agent, **judged_row(human, mine, "continuation")})
        for cat in cats if len(cats) > 1 else []:
            in_cat = {k: v for k, v in mine.items() if category[k] == cat}
            if in_cat:
                seen = {k: v for k, v in human.items() if category[k] == cat}
                by_cat.append({"agent": f"{agent} · {cat or '(none)'}", **judged_row(seen, in_cat, "continuation")})
    words = {
        **JUDGED_WORDS,
        "judge": "the simulator",
        "note": "The simulator judges every continuation of the study (its own outcome); people mark some "
        "of them, and a continuation's people's value is its outcome from their markers.",
    }
    tables = []
    if rows:
        tables.append(judged_table("sts_ppi", rows, agent=JUDGED_AGENT, **words))
    if by_cat:
        tables.append(
            judged_table(
                "sts_ppi_by_category",
                by_cat,
                per="category",
                agent=("Agent · category", "The agent, and the category of the scenarios its continuations played."),
                **words,
            )
        )
    return tables


MIN_LEARNED = 20  # continuations with people's verdicts before the learned judge is shown
FEATURES = (
    "simulator success (1/0)",
    "steps to the simulator's success / the scenario's length (1 where it never succeeds)",
    "the agent's own steps / the scenario's length",
    "the takeover step",
)


def features(reference: dict, takeover: object) -> list[float] | None:
    """What is known of a continuation without people (FEATURES, in order), from its item's
    reference and the takeover its payload shows; None where the import left something out."""
    sim, length, scenario_length = reference.get("simulator"), reference.get("length"), reference.get("scenario_length")
    if sim not in ("success", "failure") or not isinstance(length, int) or not isinstance(scenario_length, int):
        return None
    if scenario_length <= 0 or not isinstance(takeover, int):
        return None
    step = reference.get("success_step")
    reached = step / scenario_length if isinstance(step, int) and sim == "success" else 1.0
    return [1.0 if sim == "success" else 0.0, float(reached), length / scenario_length, float(takeover)]


def _learned_tables(
    session: Session, study: Study, agents: list[str], by_continuation: dict[tuple, list[str]]
) -> list[dict]:
    """People and a success predictor learned from their markers (issue 28, the STS paper's
    "training models to automate the human annotators"): per agent, a logistic regression of
    people's outcome on FEATURES, cross-fitted over the agent's continuations people marked
    (stats.crossppi_mean), judges every continuation; shown once MIN_LEARNED continuations have
    people's verdicts."""
    known: dict[tuple[str, str, str], list[float]] = {}
    for ref, takeover in session.execute(
        select(Item.reference, Item.payload["takeover"])
        .where(Item.study_id == study.id, Item.is_gold.is_(False))
        .order_by(Item.id)
    ):
        ref = ref or {}
        x = features(ref, takeover)
        if x is not None:
            known[_continuation(ref)] = x
    if sum(k in known for k in by_continuation) < MIN_LEARNED:
        return []
    rows = [
        {"agent": agent, **learned_row(human, mine, "continuation")}
        for agent, human, mine in _people_and_judge(agents, by_continuation, known)
    ]
    if not rows:
        return []
    return [
        learned_table(
            "sts_learned_ppi",
            rows,
            judge="a learned predictor",
            note="Per agent, a logistic regression predicts people's outcome of a continuation (the majority "
            f"of its markers) from what is known without people: {'; '.join(FEATURES)}. It is trained on the "
            "agent's continuations people marked and judges every one of them.",
            agent=JUDGED_AGENT,
            **JUDGED_WORDS,
        )
    ]


def _owner_tags(session: Session, study: Study, scenarios: set[str]) -> dict[str, list[str]]:
    """The study owner's personal tags on the suite's scenarios (keys "s<id>"); none for a
    study not built from a suite, whose scenario names are the uploader's own."""
    suite = (study.kind_settings or {}).get("suite")
    if not suite:
        return {}
    from app.kinds.sts.models import Scenario, ScenarioTag

    ids = [int(s[1:]) for s in scenarios if s[:1] == "s" and s[1:].isdigit()]
    tags: dict[str, list[str]] = {}
    for sid, tag in session.execute(
        select(ScenarioTag.scenario_id, ScenarioTag.tag)
        .join(Scenario, Scenario.id == ScenarioTag.scenario_id)
        .where(
            ScenarioTag.user_id == study.owner_id, Scenario.suite_id == suite["id"], ScenarioTag.scenario_id.in_(ids)
        )
        .order_by(ScenarioTag.tag)
    ):
        tags.setdefault(f"s{sid}", []).append(tag)
    return tags


def _recording_success(session: Session, study: Study, scenarios: set[str]) -> dict[str, int | None]:
    """Per suite scenario (key "s<id>"), its recording's success step (None: it never
    succeeds); none for a study not built from a suite."""
    suite = (study.kind_settings or {}).get("suite")
    if not suite:
        return {}
    from app.kinds.sts.models import Recording, Scenario

    ids = [int(s[1:]) for s in scenarios if s[:1] == "s" and s[1:].isdigit()]
    return {
        f"s{sid}": step
        for sid, step in session.execute(
            select(Scenario.id, Recording.success_step)
            .join(Recording, Recording.id == Scenario.recording_id)
            .where(Scenario.suite_id == suite["id"], Scenario.id.in_(ids))
        )
    }


def _group_table(
    key: str,
    title: str,
    note: str,
    agents: list[str],
    groups: list[str],
    members: dict[tuple, list[str]],
    outcomes: dict[tuple, float],
) -> dict:
    """Agents by rows, groups by columns: each cell the agent's success share over its
    continuations in that group, with its interval (blank where it has none)."""
    rows = []
    for a in agents:
        row = {"agent": a}
        for g in groups:
            got = [(k[1], o) for k, o in outcomes.items() if k[0] == a and g in members[k]]
            if got:
                row[f"g:{g}"] = with_units(
                    estimate(share([o for _, o in got], [sc for sc, _ in got])), [sc for sc, _ in got], "scenario"
                )
        rows.append(row)
    note += ' "—": the agent has no continuation there.'
    # A group every continuation is in (one suite version, a tag on every scenario) repeats
    # the overall share: say so rather than leave the reader to wonder.
    whole = [g for g in groups if all(g in members[k] for k in outcomes)]
    if whole:
        note += (
            f" {', '.join(whole)}: every continuation is in {'it' if len(whole) == 1 else 'each'}, "
            "so the column repeats the agent's overall success share."
        )
    return {
        "key": key,
        "title": title,
        "note": note,
        "columns": [{"key": "agent", "label": "Agent", "help": "The agent."}]
        + [
            {
                "key": f"g:{g}",
                "label": g,
                "help": f"Share (0-1) of the agent's continuations in {g} marked a success, 95% interval "
                "resampling scenarios; —: none there.",
            }
            for g in groups
        ],
        "rows": rows,
    }


def _breakdowns(
    session: Session, study: Study, agents: list[str], by_continuation: dict[tuple, list[str]], refs: dict[tuple, dict]
) -> list[dict]:
    """Success share per category, per suite version (a version's score is over the scenarios
    it holds: those added in it or before) and per tag (the suite's tags and the study owner's
    personal ones), each cell with its 95% interval."""
    outcomes = {k: outcome(v) for k, v in by_continuation.items()}
    tables = []
    categories = {k: [refs[k]["category"]] for k in outcomes}
    names = sorted({c for v in categories.values() for c in v if c})
    if names:
        tables.append(
            _group_table(
                "sts_categories",
                "Success share per category",
                "Each agent's success share over its continuations of each category, with its 95% interval.",
                agents,
                names,
                categories,
                outcomes,
            )
        )
    added = {k: refs[k].get("suite_version") for k in outcomes}
    numbers = sorted({v for v in added.values() if isinstance(v, int)})
    if numbers:
        versions = {k: [f"v{n}" for n in numbers if isinstance(v, int) and v <= n] for k, v in added.items()}
        tables.append(
            _group_table(
                "sts_versions",
                "Success share per suite version",
                "Version n's score is over the scenarios version n holds (added in it or before), so an "
                "agent's score on an older version stays what it was.",
                agents,
                [f"v{n}" for n in numbers],
                versions,
                outcomes,
            )
        )
    personal = _owner_tags(session, study, {k[1] for k in outcomes})
    # What is true of the item now: a mining rule's tag counts only where the scenario's
    # takeover point is still one the rule gives (a takeover moved after mining keeps its tag).
    success = _recording_success(session, study, {k[1] for k in outcomes})
    tagged = {
        k: [
            t
            for t in tags_now(refs[k].get("tags"), refs[k].get("takeover"), success.get(k[1], UNKNOWN))
            if isinstance(t, str)
        ]
        + [f"mine: {t}" for t in personal.get(k[1], [])]
        for k in outcomes
    }
    tags = sorted({t for v in tagged.values() for t in v})
    if tags:
        tables.append(
            _group_table(
                "sts_tags",
                "Success share per tag",
                "The suite's tags on each scenario, and (\"mine: ...\") the study owner's personal tags.",
                agents,
                tags,
                tagged,
                outcomes,
            )
        )
    return tables


def spearman(a: list[float], b: list[float]) -> dict:
    """Spearman's rho and its two-sided p between two per-agent figures (stats.spearman: exact
    over every ordering of a few agents); None where it is undefined. The page prints p as every
    figure, to three places ("<0.001" below 0.0005: research/_estimates.html num)."""
    s = stats.spearman(a, b)
    return {"rho": s["rho"], "p": s["p"]}


# --- side by side (pairs.py) -------------------------------------------------------------------


def single_study(session: Session, study: Study) -> Study | None:
    """The newest single-continuation study of the same suite version and owner, where the
    pair study came from a suite and one exists: its ranking is shown beside the pairwise one."""
    from app.leaderboards.side_by_side import single_study as newest

    suite = (study.kind_settings or {}).get("suite")
    if not suite:
        return None

    def same_version(other: Study) -> bool:
        mine = (other.kind_settings or {}).get("suite") or {}
        return (mine.get("id"), mine.get("version")) == (suite.get("id"), suite.get("version"))

    return newest(session, study, same_version)


def _single_shares(session: Session, study: Study) -> dict[str, dict]:
    """Per agent of a single-continuation study: its success share's estimate and rank cell."""
    marks, _, _ = markers(session, study)
    if not marks:
        return {}
    result = score(marks)
    per_scenario = {a: result["agents"][a]["per_scenario"] for a in result["agents"]}
    shared = sorted(set.intersection(*(set(v) for v in per_scenario.values()))) if per_scenario else []
    ranks = rank_cells({a: [v[sc] for sc in shared] for a, v in per_scenario.items()}, "scenario")
    return {
        a: {
            "success": with_units(estimate(entry), entry["per_scenario"], "scenario"),
            "rank": ranks.get(a),
        }
        for a, entry in result["agents"].items()
    }


def pair_section(session: Session, study: Study) -> dict | None:
    """A side-by-side study's tables (app/leaderboards/side_by_side.py), with the success
    shares of the newest single-continuation study of the same suite version beside them."""
    from app.kinds.sts.pairs import PAIRING
    from app.leaderboards.side_by_side import SingleRanking, section

    single = single_study(session, study)
    shares = _single_shares(session, single) if single is not None else {}
    beside = None
    if single is not None and shares:
        beside = SingleRanking(
            study_id=single.id,
            measure="success share",
            key="single_success",
            label="Single success share",
            help=f"Share (0-1) of the agent's continuations people marked a success in study {single.id}, "
            "with a 95% interval resampling scenarios.",
            rows={a: {"rank": v["rank"], "value": v["success"]} for a, v in shares.items()},
        )
    return section(session, study, PAIRING, beside)
