"""What an STS worker's page gets before they watch must not tell them the answer (issue 24).

A continuation ends at success and otherwise runs on to its scenario's length, so the number
of frames, the strip's width and even its download size once told success from failure: on
the demo, "full length means failure" labelled every item right without watching. Here every
number the page gets (the item's fields, the strip's width, height and bytes, each of its
chunks' lengths, the URL's length), on its own and relative to the largest among the items a worker could group
together (same instruction and takeover), is tried as a one-number rule: the best threshold
on it, in either direction, may do no better than always answering the majority label + 0.1,
on the demo study and on a generated study of 200 continuations."""

from __future__ import annotations

import json
import struct
import sys
from collections import defaultdict

import numpy as np
import pytest
from sqlalchemy import select

from app.images import decode_png
from app.kinds import get_kind
from app.kinds.sts import demo, rollout
from app.kinds.sts.env import get_simulator
from app.kinds.sts.recordings import expert_recording
from app.storage import get_store
from app.studies import services
from app.studies.models import Item
from tests.conftest import make_user

SLACK = 0.1


def best_rule(values: list[float], labels: list[bool]) -> float:
    """The accuracy of the best rule `value <= t` (or `value > t`) means success."""
    x, y = np.asarray(values, dtype=float), np.asarray(labels, dtype=bool)
    best = max(y.mean(), 1 - y.mean())
    for t in np.unique(x):
        hit = ((x <= t) == y).mean()
        best = max(best, hit, 1 - hit)
    return float(best)


def test_best_rule_finds_a_leak_and_not_noise():
    """The rule search itself: a feature equal to the label is found; a constant is not."""
    labels = [True, False] * 10
    assert best_rule([1.0 if s else 2.0 for s in labels], labels) == 1.0
    assert best_rule([5.0] * 20, labels) == 0.5


def chunk_lengths(png: bytes) -> dict[str, int]:
    """The PNG's chunks as a reader of its bytes sees them: how many, and each type's total
    length (the IDAT length is the compressed data's, which a held state would shrink)."""
    out: dict[str, int] = {"chunks": 0}
    pos = 8
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        kind = png[pos + 4 : pos + 8].decode("latin-1")
        out[f"{kind} length"] = out.get(f"{kind} length", 0) + length
        out["chunks"] += 1
        pos += 12 + length
    return out


def what_the_page_gets(client, items: list[Item]) -> tuple[dict[str, list[float]], list[bool]]:
    kind = get_kind("sts")
    rows, labels = [], []
    for item in items:
        public = kind.public_payload(item.payload)  # what the crowd API and the worker page send
        strip = client.get(public["frames_url"])
        assert strip.status_code == 200, public["frames_url"]
        width, height = struct.unpack(">II", strip.content[16:24])
        rows.append(
            {
                "n_frames": public["n_frames"],
                "takeover": public["takeover"],
                "tile": public["tile"],
                "steps after the takeover": public["n_frames"] - public["takeover"],
                "strip width": width,
                "strip height": height,
                "strip bytes": len(strip.content),
                **chunk_lengths(strip.content),
                "URL length": len(public["frames_url"]),
                "group": (public["instruction"], public["takeover"]),
            }
        )
        ref = item.reference
        labels.append((ref.get("label") or ref["simulator"]) == "success")
    features: dict[str, list[float]] = defaultdict(list)
    largest: dict[tuple[str, str], float] = defaultdict(float)
    for row in rows:
        for name, v in row.items():
            if name != "group":
                largest[(row["group"], name)] = max(largest[(row["group"], name)], v)
    for row in rows:
        for name, v in row.items():
            if name != "group":
                features[name].append(v)
                features[f"{name} below the group's largest"].append(largest[(row["group"], name)] - v)
    return features, labels


def assert_at_chance(features: dict[str, list[float]], labels: list[bool]) -> None:
    majority = max(np.mean(labels), 1 - np.mean(labels))
    leaks = {
        name: round(best_rule(v, labels), 3) for name, v in features.items() if best_rule(v, labels) > majority + SLACK
    }
    assert not leaks, f"one-number rules beat the majority ({majority:.3f}) + {SLACK}: {leaks}"


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_the_demo_study_gives_nothing_away_before_watching(client, session, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # the demo without its trained baseline: faster
    owner = make_user(session, "researcher")
    study = demo.build_demo(session, owner, services.StudySettings(title="Demo", bundle_size=6, gold_rate=0.2))
    items = session.scalars(select(Item).where(Item.study_id == study.id).order_by(Item.id)).all()
    features, labels = what_the_page_gets(client, items)
    assert 0 < sum(labels) < len(labels)
    assert_at_chance(features, labels)
    # Every continuation of a scenario shows the suite's length, whatever its outcome.
    by_scenario = defaultdict(set)
    for item in items:
        by_scenario[item.reference["scenario"]].add(item.payload["n_frames"] - item.payload["takeover"] - 1)
    assert set(map(frozenset, by_scenario.values())) == {frozenset({demo.SUITE_LENGTH})}


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_generated_study_of_200_continuations_gives_nothing_away(client, session):
    """20 scenarios (the expert's games on four level families, taken over 2-6 steps before its
    success, 12 steps long), each continued five times by the expert and five by the random
    policy: mostly successes against mostly failures (and some of each otherwise)."""
    sim, rng = get_simulator(), np.random.default_rng(24)
    jobs, scenarios = [], []
    for level in demo.LEVELS:
        for seed in range(5):
            rec = expert_recording(level, seed, simulator=sim)
            takeover = max(0, len(rec.actions) - int(rng.integers(2, 7)))
            scenarios.append((f"{level}:{seed}", rec, takeover))
            jobs += [rollout.Job(rec, takeover, 12, seed * 10 + c) for c in range(5)]
    lines = []
    for agent, policy in (("expert", rollout.expert_policy), ("random", rollout.random_policy())):
        results = rollout.rollout_batched(jobs, policy, sim)
        for i, (_job, c) in enumerate(zip(jobs, results)):
            name, rec, takeover = scenarios[i // 5]
            lines.append(
                {
                    "scenario": name,
                    "agent": agent,
                    "continuation": i % 5,
                    "level": rec.level,
                    "seed": rec.seed,
                    "mission": rec.mission,
                    "length": 12,
                    "takeover": takeover,
                    "actions": [*rec.actions[:takeover], *c.actions],
                }
            )
    assert len(lines) == 200
    owner = make_user(session, "researcher")
    study = services.create_study(
        session,
        owner,
        "sts",
        services.StudySettings(title="Generated", bundle_size=5, gold_rate=0.0),
        "\n".join(map(json.dumps, lines)).encode(),
        "continuations",
    )
    items = session.scalars(select(Item).where(Item.study_id == study.id).order_by(Item.id)).all()
    features, labels = what_the_page_gets(client, items)
    assert 0.25 < np.mean(labels) < 0.75, np.mean(labels)
    assert_at_chance(features, labels)
    # What the worker watches still ends where the simulator said: a success's strip holds the
    # state it succeeded in to the end.
    success = next(i for i in items if i.reference["simulator"] == "success" and i.reference["length"] < 12)
    frames = decode_png(get_store().get(success.payload["frames_key"]))
    h = frames.shape[0]
    last = success.payload["takeover"] + success.reference["success_step"]
    held = [frames[:, k * h : (k + 1) * h] for k in range(last, success.payload["n_frames"])]
    assert len(held) > 1 and all((f == held[0]).all() for f in held)
    assert not (frames[:, (last - 1) * h : last * h] == held[0]).all()


def test_a_scenario_without_a_given_length_shows_its_longest_continuation():
    """Lines that give no `length` take their scenario's longest continuation in the file; a
    line longer than the length its scenario's other lines give is refused on its own line."""
    from app.errors import InputError
    from app.kinds.sts.formats import parse_continuations

    lines = [{k: v for k, v in line.items() if k != "length"} for line in demo.demo_lines()[:4]]
    assert {line["scenario"] for line in lines} == {"GoToLocal-1"}
    own = [len(line["actions"]) - line["takeover"] for line in lines]
    assert len(set(own)) > 1  # the expert's are shorter than random's
    parsed = parse_continuations("\n".join(map(json.dumps, lines)))
    assert [c.scenario_length for c in parsed] == [max(own)] * 4
    shortest = own.index(min(own))
    lines[shortest]["length"] = min(own)
    with pytest.raises(InputError) as refused:
        parse_continuations("\n".join(map(json.dumps, lines)))
    longest = own.index(max(own))
    assert (refused.value.line, refused.value.field) == (longest + 1, "actions")
    assert f"more than its scenario's length {min(own)} (line {shortest + 1})" in str(refused.value)
