"""The reference game's leaderboard section: listener accuracy per captioner (overall and per
z, Wilson intervals), paired tests between captioners on the pairs both captioned, the
pragmatic metrics' means per captioner, and the Spearman correlation (with p) of each metric
with the listeners' accuracy over items: the question the paper leaves open.

Answers are counted per item in SQL; only one row per item comes back (items are pairs, a few
thousand at most)."""

from __future__ import annotations

import math
from collections import defaultdict

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from app.kinds.a3ds.metrics import KEYS, LABELS
from app.leaderboards import stats
from app.studies.models import Annotation, Item, Study


def _item_answers(session: Session, study: Study) -> list[dict]:
    """Per non-gold item: its reference and its valid answers' count, right and can't-tell."""
    cant = case((Annotation.response["choice"].as_string() == "none", 1), else_=0)
    counts = session.execute(
        select(Annotation.item_id, func.count(), func.sum(Annotation.score), func.sum(cant))
        .where(Annotation.study_id == study.id, Annotation.is_gold.is_(False), Annotation.excluded.is_(False))
        .group_by(Annotation.item_id)).all()
    by_item = {i: (n, int(right or 0), int(c or 0)) for i, n, right, c in counts}
    out = []
    for item_id, cluster, ref in session.execute(
            select(Item.id, Item.cluster, Item.reference).where(Item.study_id == study.id, Item.is_gold.is_(False))):
        n, right, cant_n = by_item.get(item_id, (0, 0, 0))
        out.append({"id": item_id, "pair": cluster, "ref": ref or {}, "n": n, "right": right, "cant": cant_n})
    return out


def spearman(a: list[float], b: list[float]) -> dict:
    """rho and p, or None for each where one side is constant or there are under 3 items."""
    if len(a) < 3 or len(set(a)) < 2 or len(set(b)) < 2:
        return {"rho": None, "p": None}
    from scipy.stats import spearmanr

    rho, p = spearmanr(a, b)
    return {"rho": None if math.isnan(rho) else round(float(rho), 3),
            "p": None if math.isnan(p) else float(f"{p:.3g}")}


def _metric(ref: dict, key: str):
    m = ref.get("metrics") or {}
    return m.get(key)


def section(session: Session, study: Study) -> dict | None:
    items = _item_answers(session, study)
    if not items:
        return None
    by_captioner: dict[str, list[dict]] = defaultdict(list)
    for it in items:
        by_captioner[it["ref"].get("captioner", "?")].append(it)
    names = sorted(by_captioner)

    def accuracy(group: list[dict]) -> dict:
        return stats.proportion(sum(i["right"] for i in group), sum(i["n"] for i in group)).as_dict()

    zs = sorted({str(it["ref"].get("metrics", {}).get("z")) for it in items})
    acc_rows = []
    for name in names:
        group = by_captioner[name]
        row = {"captioner": name, "items": len(group), "answers": sum(i["n"] for i in group),
               "accuracy": accuracy(group),
               "cant_tell": sum(i["cant"] for i in group)}
        for z in zs:
            row[f"z{z}"] = accuracy([i for i in group if str(_metric(i["ref"], "z")) == z])
        acc_rows.append(row)

    metric_rows, corr_rows = [], []
    for name in names + ["all captioners"]:
        group = items if name == "all captioners" else by_captioner[name]
        row = {"captioner": name, "items": len(group)}
        for key in KEYS:
            values = [_metric(i["ref"], key) for i in group]
            values = [v for v in values if v is not None]
            row[key] = round(sum(values) / len(values), 3) if values else None
        metric_rows.append(row)
        answered = [i for i in group if i["n"]]
        corr = {"captioner": name, "items": len(answered)}
        for key in KEYS:
            pairs = [(_metric(i["ref"], key), i["right"] / i["n"]) for i in answered]
            pairs = [(m, a) for m, a in pairs if m is not None]
            s = spearman([m for m, _ in pairs], [a for _, a in pairs])
            corr[key] = "-" if s["rho"] is None else f"{s['rho']:+.3f} (p {s['p']:.3g}, n {len(pairs)})"
        corr_rows.append(corr)

    # Paired: two captioners' accuracy on the pairs both captioned and listeners answered.
    paired_rows = []
    per_pair = {name: {i["pair"]: i["right"] / i["n"] for i in by_captioner[name] if i["n"]} for name in names}
    for k, a in enumerate(names):
        for b in names[k + 1:]:
            shared = sorted(set(per_pair[a]) & set(per_pair[b]))
            if len(shared) < 2:
                continue
            t = stats.paired_t_test([per_pair[a][p] for p in shared], [per_pair[b][p] for p in shared])
            paired_rows.append({"a": a, "b": b, "pairs": t["n"],
                                "diff": None if math.isnan(t["mean_diff"]) else round(t["mean_diff"], 3),
                                "p": None if math.isnan(t["p"]) else float(f"{t['p']:.3g}")})

    tables = [
        {"key": "a3ds_accuracy", "title": "Listener accuracy per captioner",
         "note": ("Share of answers that picked the target, with a 95% Wilson interval, overall and per z "
                  "(the number of features in which the two pictures differ). Gold pairs and rejected "
                  "workers' answers are left out; \"can't tell\" counts as a miss."),
         "columns": [{"key": "captioner", "label": "Captioner"}, {"key": "items", "label": "Items"},
                     {"key": "answers", "label": "Answers"}, {"key": "accuracy", "label": "Accuracy"},
                     *[{"key": f"z{z}", "label": f"z = {z}"} for z in zs],
                     {"key": "cant_tell", "label": "Can't tell"}],
         "rows": acc_rows},
        {"key": "a3ds_metrics", "title": "Pragmatic metrics per captioner (means over items)",
         "note": ("From the scenes' features (DESIGN.md section 6). Contrastive efficiency averages the "
                  "discriminative captions only; relevance the pairs with z < 6 (undefined at z = 6)."),
         "columns": [{"key": "captioner", "label": "Captioner"}, {"key": "items", "label": "Items"},
                     *[{"key": k, "label": LABELS[k]} for k in KEYS]],
         "rows": metric_rows},
        {"key": "a3ds_correlation", "title": "Spearman correlation of each metric with listener accuracy",
         "note": ("Over items with answers: the item's metric against the share of its listeners who picked "
                  "the target. '-' where a side is constant or there are fewer than 3 items."),
         "columns": [{"key": "captioner", "label": "Captioner"}, {"key": "items", "label": "Items"},
                     *[{"key": k, "label": LABELS[k]} for k in KEYS]],
         "rows": corr_rows},
    ]
    if paired_rows:
        tables.append({
            "key": "a3ds_paired", "title": "Paired tests between captioners (same pairs)",
            "note": "Two-sided paired t-test over the pairs both captioners captioned: mean of accuracy(a) - accuracy(b).",
            "columns": [{"key": "a", "label": "a"}, {"key": "b", "label": "b"}, {"key": "pairs", "label": "Pairs"},
                        {"key": "diff", "label": "Mean difference"}, {"key": "p", "label": "p"}],
            "rows": paired_rows})
    return {"tables": tables}
