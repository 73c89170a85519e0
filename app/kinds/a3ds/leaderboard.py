"""The reference game's leaderboard section: listener accuracy per captioner (overall and per
z: the mean over pairs of each pair's share of listeners right, stats.mean_interval over pairs;
a pair the captioner did not caption counts 0, as the generic table counts an agent's missing
answer; ranks with rank intervals), paired tests between captioners on the pairs both
captioned (effect with interval, Holm-adjusted p), the pragmatic metrics' means per
captioner, and the Spearman correlation (with p) of each metric with the listeners' accuracy
over items: the question the paper leaves open.

Answers are counted per item in SQL; only one row per item comes back (items are pairs, a few
thousand at most)."""

from __future__ import annotations

import math
from collections import defaultdict

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from app.kinds.a3ds.metrics import KEYS, LABELS
from app.agents.models import AgentOutput
from app.leaderboards import stats
from app.leaderboards.judged import judged_row, judged_table
from app.leaderboards.rows import (
    D_Z_HELP,
    effect_size_cell,
    holm_rows,
    p_text,
    rank_cells,
    rank_interval_column,
    too_few_for_a_test,
    with_units,
)
from app.studies.models import Annotation, Item, Study


def _item_answers(session: Session, study: Study) -> list[dict]:
    """Per non-gold item: its reference and its valid answers' count, right and can't-tell."""
    cant = case((Annotation.response["choice"].as_string() == "none", 1), else_=0)
    counts = session.execute(
        select(Annotation.item_id, func.count(), func.sum(Annotation.score), func.sum(cant))
        .where(Annotation.study_id == study.id, Annotation.is_gold.is_(False), Annotation.excluded.is_(False))
        .group_by(Annotation.item_id)
    ).all()
    by_item = {i: (n, int(right or 0), int(c or 0)) for i, n, right, c in counts}
    out = []
    for item_id, cluster, ref, z in session.execute(
        select(Item.id, Item.cluster, Item.reference, Item.category).where(
            Item.study_id == study.id, Item.is_gold.is_(False)
        )
    ):
        n, right, cant_n = by_item.get(item_id, (0, 0, 0))
        out.append({"id": item_id, "pair": cluster, "ref": ref or {}, "z": z, "n": n, "right": right, "cant": cant_n})
    return out


def spearman(a: list[float], b: list[float]) -> dict:
    """rho and p (stats.spearman: exact over every ordering up to 9 items), or None for each
    where one side is constant or there are under 3 items."""
    s = stats.spearman(a, b)
    return {"rho": None if s["rho"] is None else round(float(s["rho"]), 3), "p": s["p"]}


def _metric(ref: dict, key: str):
    m = ref.get("metrics") or {}
    return m.get(key)


def _z(item: dict) -> str:
    return str(_metric(item["ref"], "z"))


def accuracy_figures(items: list[dict]) -> tuple[list[str], dict[str, dict], list]:
    """Per captioner: each pair of the study's share right (the mean over its listeners' answers),
    0 for a pair the captioner did not caption; a captioned pair without answers yet is left out.

    The study's pairs are the pairs with at least one answered caption. Returns the captioners
    (by name), per captioner {pair: (share, z)} over the pairs it has a figure on and a set of
    the pairs it captioned, and the pairs every captioner has a figure on (for the ranks)."""
    names = sorted({it["ref"].get("captioner", "?") for it in items})
    pair_z = {it["pair"]: _z(it) for it in items}
    answered_pairs = sorted({it["pair"] for it in items if it["n"]}, key=str)
    per: dict[str, dict] = {}
    for name in names:
        mine = _by_pair(it for it in items if it["ref"].get("captioner", "?") == name)
        shares = {}
        for pair in answered_pairs:
            got = mine.get(pair)
            if got is None:
                shares[pair] = (0.0, pair_z[pair])  # not captioned: counts as wrong
            elif got[1]:
                shares[pair] = (got[0] / got[1], pair_z[pair])
        per[name] = {"shares": shares, "captioned": set(mine)}
    everyone = [p for p in answered_pairs if all(p in per[n]["shares"] for n in names)]
    return names, per, everyone


def _by_pair(items) -> dict:
    """pair -> (right, answers) over a captioner's captions of it: several captions of one pair
    (the captions import allows them) pool their listeners, none is dropped."""
    out: dict = {}
    for it in items:
        right, n = out.get(it["pair"], (0, 0))
        out[it["pair"]] = (right + it["right"], n + it["n"])
    return out


# Each metric's help (one sentence, shown on the page under each table: app/kinds/base.py).
METRIC_HELP = {
    "discriminative": "Share (0-1) of the captioner's captions that mention a feature in which the two pictures differ.",
    "contrastive_efficiency": "Mean (0-1) over discriminative captions of 1 - (c - 1) / (z - 1), c the differing "
    "features mentioned, z those there are: 1 = names exactly one difference.",
    "relevance": "Mean (0-1) of 1 - (k - c) / (6 - z): one minus the share of the features both pictures "
    "share that the caption mentions (pairs with z = 6 left out: undefined).",
    "optimal": "Share (0-1) of captions that mention exactly one differing feature.",
    "n_mentioned": "Mean number of the scene's 6 features the caption mentions (0-6).",
}
CORRELATION_HELP = (
    "Spearman's rho (-1 to 1) over answered captions (items: one captioner's caption of one "
    "pair) between this metric and the share of the caption's listeners who picked the target, "
    'with its p and n, the number of such captions; "—" where undefined.'
)


def section(session: Session, study: Study) -> dict | None:
    items = _item_answers(session, study)
    if not items:
        return None
    by_captioner: dict[str, list[dict]] = defaultdict(list)
    for it in items:
        by_captioner[it["ref"].get("captioner", "?")].append(it)
    names, per, everyone = accuracy_figures(items)
    study_pairs = {p for it in items if it["n"] for p in [it["pair"]]}

    def accuracy(shares: dict) -> dict:
        """The mean of per-pair shares ({pair: share}), its cell counting pairs ("n = 4 pairs")."""
        return with_units(stats.mean_interval(list(shares.values())).as_dict(), shares, "pair")

    zs = sorted({_z(it) for it in items})
    ranks = rank_cells({name: [per[name]["shares"][p][0] for p in everyone] for name in names}, "pair")
    acc_rows = []
    for name in names:
        group, shares = by_captioner[name], per[name]["shares"]
        row = {
            "captioner": name,
            "items": len(group),
            "answers": sum(i["n"] for i in group),
            "coverage": (len(per[name]["captioned"] & study_pairs) / len(study_pairs)) if study_pairs else None,
            "accuracy": accuracy({p: s for p, (s, _) in shares.items()}),
            "rank": ranks.get(name),
            "cant_tell": sum(i["cant"] for i in group),
        }
        for z in zs:
            row[f"z{z}"] = accuracy({p: s for p, (s, zz) in shares.items() if zz == z})
        acc_rows.append(row)

    metric_rows, corr_rows = [], []
    for name in names + ["all captioners"]:
        group = items if name == "all captioners" else by_captioner[name]
        row = {"captioner": name, "items": len(group)}
        for key in KEYS:
            values = [_metric(i["ref"], key) for i in group]
            values = [v for v in values if v is not None]
            row[key] = sum(values) / len(values) if values else None
        metric_rows.append(row)
        answered = [i for i in group if i["n"]]
        corr = {"captioner": name, "items": len(answered)}
        for key in KEYS:
            pairs = [(_metric(i["ref"], key), i["right"] / i["n"]) for i in answered]
            pairs = [(m, a) for m, a in pairs if m is not None]
            s = spearman([m for m, _ in pairs], [a for _, a in pairs])
            corr[key] = "—" if s["rho"] is None else f"{s['rho']:+.3f} (p {p_text(s['p'])}, n {len(pairs)})"
        corr_rows.append(corr)

    # Paired: two captioners' item shares on the pairs both captioned and listeners answered.
    paired_rows = []
    per_pair = {
        name: {pair: right / n for pair, (right, n) in _by_pair(by_captioner[name]).items() if n} for name in names
    }
    for k, a in enumerate(names):
        for b in names[k + 1 :]:
            shared = sorted(set(per_pair[a]) & set(per_pair[b]), key=str)
            if len(shared) < 2:
                continue
            e = stats.paired_effect([per_pair[a][p] for p in shared], [per_pair[b][p] for p in shared])
            few = too_few_for_a_test(len(shared))
            diff = stats.clipped_difference(e["difference"].as_dict())
            paired_rows.append(
                {
                    "a": a,
                    "b": b,
                    "pairs": len(shared),
                    "diff": with_units(diff, shared, "pair"),
                    "d_z": few or effect_size_cell(e["cohen_dz"], len(shared)),
                    "p": few or (None if math.isnan(e["p"]) else float(e["p"])),
                }
            )
    holm_rows(paired_rows)

    tables = [
        {
            "key": "a3ds_accuracy",
            "title": "Listener accuracy per captioner (share of listeners right, 0-1, averaged over pairs)",
            "note": (
                "Each pair's accuracy is the share of its listeners who picked the target; a captioner's is the "
                "mean over the study's pairs (each pair counts once, however many listeners it had), with a "
                "95% interval over pairs (the unit resampled is the pair; Wilson's interval at the effective "
                "number of pairs), overall and per z (the number of features in which the two pictures differ). "
                "As in the generic table, where an agent's missing answer is wrong, a captioner is scored over "
                "every pair of the study (the pairs with answers): a pair it did not caption counts 0 "
                "(Coverage: the share it captioned); a caption not yet answered is left out. Rank (95%): rank "
                'intervals from 1000 bootstrap resamples of the pairs every captioner has a figure on; "1-2" '
                'where intervals overlap (tied); "—" with fewer than 5 such pairs. Gold pairs and rejected workers\' answers are left out; '
                '"can\'t tell" counts as a miss.'
            ),
            "columns": [
                {
                    "key": "captioner",
                    "label": "Captioner",
                    "help": "The captioner (model or person) whose captions the listeners read.",
                },
                {"key": "items", "label": "Items", "help": "This captioner's captions in the study (items)."},
                {
                    "key": "answers",
                    "label": "Answers",
                    "help": "Listeners' valid answers to these captions (gold and rejected workers' left out).",
                },
                {
                    "key": "coverage",
                    "label": "Coverage",
                    "help": "Share (0-1) of the study's answered pairs this captioner captioned; the rest count 0.",
                },
                rank_interval_column("accuracy", "the pairs"),
                {
                    "key": "accuracy",
                    "label": "Accuracy",
                    "help": "Mean over pairs of the share of listeners who picked the target (0-1), with a "
                    "95% interval resampling pairs.",
                },
                *[
                    {
                        "key": f"z{z}",
                        "label": f"z = {z}",
                        "help": f"Accuracy (0-1) over the pairs whose pictures differ in {z} feature"
                        f"{'' if z == '1' else 's'} only, 95% interval resampling those pairs.",
                    }
                    for z in zs
                ],
                {
                    "key": "cant_tell",
                    "label": "Can't tell",
                    "help": 'Answers "can\'t tell" (a count); each counts as a miss in the accuracy.',
                },
            ],
            "rows": acc_rows,
        },
        {
            "key": "a3ds_metrics",
            "title": "Pragmatic metrics per captioner (means over captions: scores in [0, 1], features "
            "mentioned a count of 0-6)",
            "note": (
                "From the scenes' features, no sampling: each caption's metric is "
                "exact, so no interval. Contrastive efficiency averages the discriminative captions only; "
                "relevance the pairs with z < 6 (undefined at z = 6)."
            ),
            "columns": [
                {
                    "key": "captioner",
                    "label": "Captioner",
                    "help": 'The captioner; "all captioners": every caption of the study.',
                },
                {"key": "items", "label": "Items", "help": "Captions the means are over."},
                *[{"key": k, "label": LABELS[k], "help": METRIC_HELP[k] + " Exact: no interval."} for k in KEYS],
            ],
            "rows": metric_rows,
        },
        {
            "key": "a3ds_correlation",
            "title": "Spearman correlation (rho, -1 to 1) of each metric with listener accuracy",
            "note": (
                "Over the answered captions (items: one captioner's caption of one pair, so a pair captioned "
                'by three captioners counts three times in "all captioners"), each once: the caption\'s metric '
                "against the share of its listeners who picked the target; n in each cell: the captions with "
                "that metric defined; its two-sided p is exact (every ordering of the items) up "
                'to 9 items, the t approximation above. "—" where a side is constant or there are fewer '
                "than 3 items."
            ),
            "columns": [
                {
                    "key": "captioner",
                    "label": "Captioner",
                    "help": 'The captioner; "all captioners": every caption of the study.',
                },
                {"key": "items", "label": "Items", "help": "Captions with at least one listener's answer."},
                *[{"key": k, "label": LABELS[k], "help": CORRELATION_HELP} for k in KEYS],
            ],
            "rows": corr_rows,
        },
    ]
    if paired_rows:
        tables.append(
            {
                "key": "a3ds_paired",
                "title": "Paired differences in listener accuracy between captioners (a minus b, "
                "in [-1, 1], same pairs)",
                "note": (
                    "d_z: the mean paired difference over its standard deviation (Cohen's effect size); Holm p: "
                    "the p-value adjusted for the table's several comparisons (Holm). "
                    "Over the pairs both captioners captioned and listeners answered (the unit is the pair): the "
                    "mean of the pair accuracy differences with a 95% interval (t on the differences, "
                    "Bonett-Price where every share is 0 or 1), Cohen's d_z, the two-sided paired t-test's p, "
                    "and p Holm-adjusted across this table's comparisons. Under 5 pairs the difference has no "
                    'interval, and d_z and p are "—" too (the test is the interval\'s dual).'
                ),
                "columns": [
                    {"key": "a", "label": "a", "help": "The first captioner."},
                    {"key": "b", "label": "b", "help": "The second captioner."},
                    {
                        "key": "pairs",
                        "label": "Pairs",
                        "help": "Pairs both captioned that listeners answered: the paired units.",
                    },
                    {
                        "key": "diff",
                        "label": "Mean difference",
                        "help": "Mean over pairs of a's accuracy minus b's (-1 to 1), with a 95% interval "
                        "(t on the differences; Bonett-Price for 0/1).",
                    },
                    {"key": "d_z", "label": "d_z", "help": D_Z_HELP},
                    {"key": "p", "label": "p", "help": "Two-sided paired t-test p over the pairs."},
                    {"key": "p_holm", "label": "Holm p", "help": "p adjusted by Holm across this table's comparisons."},
                ],
                "rows": paired_rows,
            }
        )
    # Model listeners as an automatic judge beside people (issue 28), where any has picked.
    tables.extend(_judge_tables(session, study, by_captioner))
    return {"tables": tables}


def _judge_tables(session: Session, study: Study, by_captioner: dict[str, list[dict]]) -> list[dict]:
    """People and the model listeners together: a model listener's pick on a caption (an agent's
    output, scored 1 when it is the target) is an automatic judge of it; the judge's value on a
    caption is the mean over the model listeners that picked on it. Per captioner, then per z
    (every captioner's captions pooled) where there are several; nothing where no model
    listener picked."""
    judge = dict(
        session.execute(
            select(AgentOutput.item_id, func.avg(AgentOutput.score))
            .join(Item, Item.id == AgentOutput.item_id)
            .where(Item.study_id == study.id, Item.is_gold.is_(False), AgentOutput.score.is_not(None))
            .group_by(AgentOutput.item_id)
        ).all()
    )
    if not judge:
        return []

    def row(name: str, group: list[dict]) -> dict | None:
        mine = {it["id"]: float(judge[it["id"]]) for it in group if it["id"] in judge}
        human = {it["id"]: it["right"] / it["n"] for it in group if it["n"]}
        return {"agent": name, **judged_row(human, mine, "caption")} if mine else None

    rows = [r for name, group in sorted(by_captioner.items()) if (r := row(name, group)) is not None]
    if not rows:
        return []
    words = {
        "judge": "the model listeners",
        "unit": "caption",
        "measure": "listener accuracy",
        "note": "A model listener's pick on a caption (its imported or generated output, or a listener run's) "
        "is right or wrong as a person's is; the judge's value on a caption is the share of the model "
        "listeners that picked the target. People answer some of the captions; a caption's people's value "
        'is the share of its listeners who picked the target (a "can\'t tell" counts as wrong).',
    }
    tables = [judged_table("a3ds_ppi", rows, agent=("Captioner", "The captioner whose captions were judged."), **words)]
    every = [it for group in by_captioner.values() for it in group]
    zs = sorted({it["z"] for it in every if it["id"] in judge}, key=lambda z: (len(z or ""), z or ""))
    if len(zs) > 1:
        by_z = [r for z in zs if (r := row(f"z = {z}", [it for it in every if it["z"] == z])) is not None]
        tables.append(
            judged_table(
                "a3ds_ppi_by_category",
                by_z,
                per="z",
                agent=("z", "How many features the pair's pictures differ in (every captioner's captions pooled)."),
                **words,
            )
        )
    return tables
