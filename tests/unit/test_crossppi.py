"""stats.crossppi_mean (issue 28, the learned judge): cross-prediction-powered inference
(Zrnic and Candès 2024) with a cross-fitted logistic regression. A hand-worked case, the same
numbers ppi-python gives from independently fitted fold models, and the interval's coverage
in simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from ppi_py import crossppi_mean_ci, crossppi_mean_pointestimate
from sklearn.linear_model import LogisticRegression

from app.leaderboards import stats
from tests.conftest import untraced


def test_a_featureless_predictor_by_hand():
    # Features that say nothing: each fold model predicts its training folds' mean. Ten labels,
    # six of them 1, five folds of two: fold k's model predicts (6 - s_k) / 8 (s_k: its own
    # ones), so the unlabelled units' mean over the models is sum_k (6 - s_k) / 40 = 24/40 = 0.6,
    # people's units' mean prediction 2 sum_k (6 - s_k) / 8 / 10 = 0.6 too: the estimate is
    # 0.6 + (0.6 - 0.6) = 0.6. Its variance: the unlabelled predictions are all equal (0), plus
    # var(yhat - y) / 10.
    y = [1.0] * 6 + [0.0] * 4
    x = [[0.0]] * 10
    out = stats.crossppi_mean(x, y, [[0.0]] * 30, folds=5, seed=3)
    assert out["mean"] == pytest.approx(0.6, abs=1e-4)
    fold, yhat, yhat_u = stats.cross_fit(x, y, [[0.0]] * 30, folds=5, seed=3)
    assert sorted(np.bincount(fold).tolist()) == [2] * 5
    ones = {k: sum(y[i] for i in range(10) if fold[i] == k) for k in range(5)}
    want = [(6 - ones[fold[i]]) / 8 for i in range(10)]
    assert yhat.tolist() == pytest.approx(want, abs=1e-4)
    assert out["predictions"] == pytest.approx(want, abs=1e-4)
    assert yhat_u.shape == (30, 5) and out["unlabelled"] == pytest.approx([0.6] * 30, abs=1e-4)
    half = 1.959964 * math.sqrt(np.var(np.array(want) - np.array(y)) / 10)
    assert out["low"] == pytest.approx(0.6 - half, abs=1e-4) and out["high"] == pytest.approx(0.6 + half, abs=1e-4)
    assert out["n"] == 10 and out["n_judge"] == 30 and out["method"] == stats.CROSS_PPI


def test_the_same_numbers_as_ppi_python_with_fold_models_fitted_apart():
    rng = np.random.default_rng(7)
    x = rng.normal(size=(60, 2))
    y = (x[:, 0] + 0.7 * rng.normal(size=60) > 0).astype(float)
    y[:3] = 0.5  # ties: half a success, weighed on both sides
    x_u = rng.normal(size=(240, 2))
    out = stats.crossppi_mean(x.tolist(), y.tolist(), x_u.tolist(), folds=4, seed=11)
    fold = np.empty(60, dtype=int)
    fold[np.random.default_rng(11).permutation(60)] = np.arange(60) % 4
    yhat, yhat_u = np.empty(60), np.empty((240, 4))
    for k in range(4):
        tr = fold != k
        mu, sd = x[tr].mean(axis=0), x[tr].std(axis=0)  # the training units'
        xx = np.concatenate([x[tr], x[tr]])
        yy = np.r_[np.ones(tr.sum()), np.zeros(tr.sum())]
        w = np.r_[y[tr], 1 - y[tr]]
        m = LogisticRegression().fit((xx[w > 0] - mu) / sd, yy[w > 0], sample_weight=w[w > 0])
        yhat[~tr] = m.predict_proba((x[~tr] - mu) / sd)[:, 1]
        yhat_u[:, k] = m.predict_proba((x_u - mu) / sd)[:, 1]
    assert out["predictions"] == pytest.approx(yhat.tolist(), abs=1e-6)
    low, high = crossppi_mean_ci(y, yhat, yhat_u, alpha=0.05)
    assert out["mean"] == pytest.approx(float(np.ravel(crossppi_mean_pointestimate(y, yhat, yhat_u))[0]))
    assert (out["low"], out["high"]) == pytest.approx((float(np.ravel(low)[0]), float(np.ravel(high)[0])))
    # A predictive feature: worth more people than marked.
    assert out["effective_n"] > 60 and out["people"]["n"] == 60


def test_too_few_people_or_nothing_to_add():
    few = stats.crossppi_mean([[1.0]] * 9, [1.0, 0.0] * 4 + [1.0], [[0.0]] * 5)
    assert few["low"] is None and "under 10" in few["reason"] and few["predictions"] is None
    every = stats.crossppi_mean([[float(i)] for i in range(12)], [0.0] * 6 + [1.0] * 6, [])
    assert every["low"] is None and "every unit" in every["reason"] and len(every["predictions"]) == 12
    with pytest.raises(ValueError):
        stats.crossppi_mean([[0.0]] * 12, [2.0] * 12, [[0.0]])
    with pytest.raises(ValueError):
        stats.crossppi_mean([[math.nan]] * 12, [1.0] * 12, [[0.0]])


def test_the_interval_covers_in_simulation():
    # 200 studies: a feature x, people's verdict a coin of probability sigmoid(2 x) (mean 0.5 by
    # symmetry), 30 units judged by people and 120 not. Coverage 0.95 within about 2.5 Monte
    # Carlo standard errors (sqrt(0.95 * 0.05 / 200) = 0.015).
    rng = np.random.default_rng(2024)
    covered = 0
    with untraced():
        for s in range(200):
            x = rng.normal(size=(150, 2))
            y = (rng.random(150) < 1 / (1 + np.exp(-2 * x[:, 0]))).astype(float)
            out = stats.crossppi_mean(x[:30].tolist(), y[:30].tolist(), x[30:].tolist(), seed=s)
            covered += out["low"] <= 0.5 <= out["high"]
    assert 0.91 <= covered / 200 <= 0.99
