"""The learned STS judge on the leaderboard (issue 28, the STS paper's "training models to
automate the human annotators"): per agent, a logistic regression of people's outcome on what
a continuation shows without people, cross-fitted over the continuations people marked, and
cross-prediction-powered inference from both. Every figure recomputed here from the stored
rows with scikit-learn, ppi-python and statsmodels directly."""

from __future__ import annotations

import numpy as np
import pytest
from ppi_py import classical_mean_ci, crossppi_mean_ci, crossppi_mean_pointestimate
from sklearn.linear_model import LogisticRegression
from sqlalchemy import select
from statsmodels.stats.proportion import proportion_confint

from app.kinds import get_kind
from app.studies.models import Annotation, Item
from tests.integration.test_sts_ppi import _mark, _study

pytestmark = pytest.mark.backend_agnostic("the section's arithmetic over stored rows")


def _x(item: Item) -> list[float]:
    ref = item.reference
    sim = ref["simulator"] == "success"
    reached = ref["success_step"] / ref["scenario_length"] if sim else 1.0
    return [float(sim), reached, ref["length"] / ref["scenario_length"], float(item.payload["takeover"])]


def _crossfit(x: np.ndarray, y: np.ndarray, x_u: np.ndarray, folds: int = 5, seed: int = 0):
    fold = np.empty(len(y), dtype=int)
    fold[np.random.default_rng(seed).permutation(len(y))] = np.arange(len(y)) % folds
    yhat, yhat_u = np.empty(len(y)), np.empty((len(x_u), folds))
    for k in range(folds):
        tr = fold != k
        if y[tr].min() == y[tr].max():
            yhat[~tr], yhat_u[:, k] = y[tr].mean(), y[tr].mean()
            continue
        mu, sd = x[tr].mean(axis=0), x[tr].std(axis=0)
        sd[sd == 0] = 1.0
        m = LogisticRegression().fit(
            (np.r_[x[tr], x[tr]] - mu) / sd,
            np.r_[np.ones(tr.sum()), np.zeros(tr.sum())],
            sample_weight=np.r_[y[tr], 1 - y[tr]],
        )
        yhat[~tr] = m.predict_proba((x[~tr] - mu) / sd)[:, 1]
        yhat_u[:, k] = m.predict_proba((x_u - mu) / sd)[:, 1]
    return yhat, yhat_u


def _section(session, study) -> dict:
    session.expire_all()
    return get_kind("sts").extra_leaderboard(session, study)


def test_the_learned_judge_beside_people_recomputed(session, monkeypatch):
    study = _study(session, copies=2)
    _mark(session, study, limit=40)
    table = next(t for t in _section(session, study)["tables"] if t["key"] == "sts_learned_ppi")
    assert [c["key"] for c in table["columns"]] == ["agent", "people", "judged", "judge", "agreement", "ppi", "worth"]
    # Each column's help describes this table's estimate, cross-prediction, not the PPI++ of
    # the simulator's table it is built from (each column keeps just its key, label and help).
    helps = {c["key"]: c["help"] for c in table["columns"]}
    assert all(set(c) == {"key", "label", "help"} for c in table["columns"])
    for key in ("ppi", "worth"):
        assert "cross-prediction" in helps[key] and "PPI++" not in helps[key], helps[key]
    assert "predicted" in helps["judge"] and ">= 0.5" in helps["agreement"]
    rows = {r["agent"]: r for r in table["rows"]}
    marked = {
        a.item_id: a.response["marker"]
        for a in session.scalars(select(Annotation).where(Annotation.study_id == study.id))
    }
    items = session.scalars(
        select(Item).where(Item.study_id == study.id, Item.is_gold.is_(False)).order_by(Item.id)
    ).all()
    assert set(rows) == {i.reference["agent"] for i in items if i.id in marked}
    for agent, row in rows.items():
        mine = [i for i in items if i.reference["agent"] == agent]
        seen, unseen = [i for i in mine if i.id in marked], [i for i in mine if i.id not in marked]
        y = np.array([1.0 if marked[i.id] == "success" else 0.0 for i in seen])
        x, x_u = np.array([_x(i) for i in seen]), np.array([_x(i) for i in unseen])
        assert row["judged"] == len(mine) and row["people"]["n"] == len(seen)
        yhat, yhat_u = _crossfit(x, y, x_u)
        assert row["judge"] == pytest.approx((yhat.sum() + yhat_u.mean(axis=1).sum()) / len(mine), abs=1e-6)
        hits = int(((yhat >= 0.5) == (y > 0.5)).sum())
        low, high = proportion_confint(hits, len(y), alpha=0.05, method="wilson")
        assert row["agreement"]["mean"] == pytest.approx(hits / len(y))
        assert (row["agreement"]["low"], row["agreement"]["high"]) == pytest.approx((low, high), abs=1e-6)
        if y.min() == y.max() and yhat.min() == yhat.max() == y[0]:
            assert row["ppi"]["text"] == "—" and row["worth"] is None  # no spread: no interval
            continue
        mean = float(np.ravel(crossppi_mean_pointestimate(y, yhat, yhat_u))[0])
        low, high = (float(np.ravel(v)[0]) for v in crossppi_mean_ci(y, yhat, yhat_u, alpha=0.05))
        assert row["ppi"]["mean"] == pytest.approx(mean, abs=1e-6) and row["ppi"]["n"] == len(mine)
        assert row["ppi"]["low"] == pytest.approx(max(low, 0), abs=1e-6)
        assert row["ppi"]["high"] == pytest.approx(min(high, 1), abs=1e-6)
        c_low, c_high = classical_mean_ci(y, alpha=0.05)
        assert row["worth"] == pytest.approx(round(len(y) * ((c_high - c_low) / (high - low)) ** 2, 1))
    # People call some of the random policy's failures a success where the simulator does not:
    # the predictor, trained on held-out people, still agrees with them mostly.
    assert rows["random"]["agreement"]["mean"] > 0.5 and rows["random"]["ppi"]["low"] is not None
    # Shown from MIN_LEARNED continuations with people's verdicts on.
    monkeypatch.setattr("app.kinds.sts.leaderboard.MIN_LEARNED", len(marked) + 1)
    assert "sts_learned_ppi" not in {t["key"] for t in _section(session, study)["tables"]}
