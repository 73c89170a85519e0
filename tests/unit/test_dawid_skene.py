"""Dawid-Skene (app/leaderboards/annotators.fit) on a hand-made case: an annotator who always
flips the label is read backwards, so on items where the flipper and one careless annotator
outvote the careful one, Dawid-Skene recovers the truth the majority gets wrong."""

from __future__ import annotations

from collections import Counter

import pandas as pd
import pytest

from app.leaderboards.annotators import N_ITER, TOL, fit

FLIP = {"Yes": "No", "No": "Yes"}


def case():
    """A: always right. B: always right (items 27-40). C: wrong on items 21-32. F: always
    wrong (items 1-26, and item 41 alone). On 21-26 C and F together outvote A."""
    truth = {i: "Yes" if i % 3 else "No" for i in range(1, 42)}
    rows = []
    for i in range(1, 41):
        t = truth[i]
        rows.append((i, "A", t))
        if i <= 26:
            rows += [(i, "F", FLIP[t]), (i, "C", FLIP[t] if i > 20 else t)]
        else:
            rows += [(i, "B", t), (i, "C", FLIP[t] if i <= 32 else t)]
    rows.append((41, "F", FLIP[truth[41]]))  # one answer: still labelled
    return truth, pd.DataFrame(rows, columns=["task", "worker", "label"])


def majority(frame: pd.DataFrame) -> dict:
    out = {}
    for task, labels in frame.groupby("task", sort=True)["label"]:
        votes = Counter(labels)
        out[task] = max(votes, key=lambda v: (votes[v], v == labels.iloc[0]))
    return out


def test_dawid_skene_reads_the_flipper_backwards():
    truth, frame = case()
    ds = fit(frame)
    maj = majority(frame)
    wrong_majority = {i for i in truth if maj[i] != truth[i]}
    assert wrong_majority == {21, 22, 23, 24, 25, 26, 41}
    assert {i for i in truth if ds["labels"][i] != truth[i]} == set()
    assert ds["labels"].keys() == truth.keys()  # item 41, with one answer, is labelled
    assert ds["labels_order"] == ["No", "Yes"]
    # Rows: true label, columns: given label.
    assert sum(ds["confusion"]["F"], []) == pytest.approx([0, 1, 1, 0], abs=1e-6)
    assert sum(ds["confusion"]["A"], []) == pytest.approx([1, 0, 0, 1], abs=1e-6)
    c = ds["confusion"]["C"]  # wrong on 12 of 40
    assert 0.2 < c[0][1] < 0.45 and 0.2 < c[1][0] < 0.45
    assert all(0.5 < ds["posterior"][i] <= 1.0 for i in truth)


def test_same_labels_as_crowd_kit_called_directly():
    from crowdkit.aggregation import DawidSkene

    _, frame = case()
    ours = fit(frame.sample(frac=1.0, random_state=3))  # the input's order does not matter
    direct = DawidSkene(n_iter=N_ITER, tol=TOL).fit(frame.sort_values(["task", "worker"]))
    assert ours["labels"] == {t: str(v) for t, v in direct.labels_.items()}
    for t in ours["labels"]:
        assert ours["posterior"][t] == pytest.approx(direct.probas_.loc[t, direct.labels_[t]])
    assert fit(frame) == ours  # deterministic


def test_categorical_labels_and_single_answers():
    frame = pd.DataFrame(
        [
            (1, "a", "red"),
            (1, "b", "red"),
            (1, "c", "blue"),
            (2, "a", "green"),
            (2, "b", "green"),
            (2, "c", "green"),
            (3, "c", "blue"),
        ],
        columns=["task", "worker", "label"],
    )
    ds = fit(frame)
    assert ds["labels_order"] == ["blue", "green", "red"]
    # Three items say little about each annotator; item 2 is unanimous, item 3 has one answer.
    assert ds["labels"][2] == "green" and set(ds["labels"]) == {1, 2, 3}
    assert all(len(m) == 3 and all(len(r) == 3 for r in m) for m in ds["confusion"].values())
