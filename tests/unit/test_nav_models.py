"""Our baseline speaker and listeners, and the batched pragmatic reranking (CPU)."""

from __future__ import annotations

import io
import math
import random

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the model side needs torch==2.13.0 (pip install -e '.[test]')")

from app.kinds.navigation.house import generate_house  # noqa: E402
from app.kinds.navigation.metrics import score_indices  # noqa: E402
from workers.navigation.features import EOS, Vocabulary, World, pad_batch, stack_steps  # noqa: E402
from workers.navigation.listener import Ensemble, Listener  # noqa: E402
from workers.navigation.rerank import Worlds, follow_and_score, ndtw_batch, rerank_loop  # noqa: E402
from workers.navigation.train import (  # noqa: E402
    bleu4, evaluate_listeners, load_model, make_dataset, save_model, speaker_generate, train_listeners,
    train_speaker)


@pytest.fixture(scope="module")
def data():
    return make_dataset(range(100, 103), paths_per_house=8)


@pytest.fixture(scope="module")
def speaker(data):
    return train_speaker(data, epochs=2, hidden=32)


def _rows(data, worlds, vocab, n=10):
    instr, starts, heads, refs = [], [], [], []
    for e in data.examples[:n]:
        idx = worlds.index(e.scan, e.path)
        instr.append(vocab.encode(e.instructions[0], 60))
        starts.append(idx[0])
        heads.append(e.heading)
        refs.append(idx)
    return instr, starts, heads, refs


def test_batched_ndtw_equals_the_metric_definition():
    house = generate_house(41, floors=2)
    world = World.from_house(house)
    d = world.distances
    rng = random.Random(5)
    refs, queries = [], []
    for _ in range(200):
        walk = [rng.randrange(len(d))]
        for _ in range(rng.randrange(0, 9)):
            nb = [int(j) for j in world.neighbours[walk[-1]] if j >= 0]
            walk.append(rng.choice(nb))
        ref = [rng.randrange(len(d))]
        for _ in range(rng.randrange(0, 6)):
            nb = [int(j) for j in world.neighbours[ref[-1]] if j >= 0]
            ref.append(rng.choice([j for j in nb if j != ref[-1]] or nb))
        refs.append(ref)
        queries.append(walk)
    ref_t, ref_m = pad_batch([[i + 1 for i in r] for r in refs])
    q_t, q_m = pad_batch([[i + 1 for i in q] for q in queries])
    got = ndtw_batch(torch.from_numpy(d.astype(np.float64)), ref_t - 1, ref_m.sum(1), (q_t - 1).clamp(min=0),
                     q_m.sum(1))
    for k, (r, q) in enumerate(zip(refs, queries)):
        want = score_indices(d, np.array(r), np.array(q))["ndtw"]
        assert got[k].item() == pytest.approx(want, rel=1e-9, abs=1e-12)


def test_batched_rerank_equals_the_per_candidate_loop(data):
    ens = Ensemble([Listener(Vocabulary.build([t for e in data.examples for t in e.instructions]).words,
                             hidden=32) for _ in range(3)])
    worlds = Worlds(list(data.worlds.values()), torch.device("cpu"))
    instr, starts, heads, refs = _rows(data, worlds, Vocabulary(ens.words))
    batched = follow_and_score(ens, worlds, instr, starts, heads, refs, rollouts=2, greedy=True, max_steps=12)
    loop = rerank_loop(ens, worlds, instr, starts, heads, refs, rollouts=2, greedy=True, max_steps=12)
    assert torch.allclose(batched.scores, loop, atol=1e-6)
    # Each rollout's stored score is the DESIGN metric of its stored path.
    d = worlds.distances.numpy().astype(np.float64)
    for k in range(3):
        for b in range(len(instr)):
            n = int(batched.lengths[k, b, 0])
            m = score_indices(d, np.array(refs[b]), batched.paths[k, b, 0, :n].numpy())
            assert batched.per_rollout[k, b, 0].item() == pytest.approx(m["ndtw"], abs=1e-5)
            assert bool(batched.success[k, b, 0]) == m["success"]


def test_speaker_scores_what_it_samples_and_scripts_to_torchscript(data, speaker):
    world = next(iter(data.worlds.values()))
    exs = [e for e in data.examples if e.scan == world.scan][:4]
    outs = speaker_generate(speaker, world, [(e.path, e.heading) for e in exs], n=3, seed=1)
    assert all(len(o) == 4 for o in outs)
    feats, mask = stack_steps([world.step_features(e.path, e.heading) for e in exs])
    scripted = torch.jit.load(io.BytesIO(_saved(torch.jit.script(speaker))))
    for b, o in enumerate(outs):
        for ids, logp in o:
            assert ids[-1] == EOS and logp < 0
            tokens, tmask = pad_batch([ids])
            eager = speaker.score(feats[b:b + 1], mask[b:b + 1], tokens, tmask).item()
            assert eager == pytest.approx(logp, abs=1e-4)
            assert scripted.score(feats[b:b + 1], mask[b:b + 1], tokens, tmask).item() == pytest.approx(eager, abs=1e-5)
    assert scripted.vocabulary() == speaker.words
    assert scripted.feature_version() == speaker.feature_version()


def _saved(module) -> bytes:
    buf = io.BytesIO()
    torch.jit.save(module, buf)
    return buf.getvalue()


def test_trained_listeners_follow_better_than_untrained_ones(data):
    words = Vocabulary.build([t for e in data.examples for t in e.instructions]).words
    torch.manual_seed(0)
    untrained = Ensemble([Listener(words, hidden=32) for _ in range(2)])
    trained = train_listeners(data, k=2, epochs=10, hidden=32, batch=16, lr=5e-3, seed=0)
    before, after = evaluate_listeners(untrained, data), evaluate_listeners(trained, data)
    assert min(after["ndtw"]) > max(before["ndtw"])
    assert min(after["success_rate"]) > max(before["success_rate"])
    # The members differ: each saw its own 90% of the paths, from its own seed.
    a, b = trained.members()
    assert not torch.equal(a.policy.stop.weight, b.policy.stop.weight)


def test_safetensors_round_trip_and_refusals(tmp_path, speaker, data):
    weights, config = save_model(speaker, tmp_path, "speaker")
    import json

    cfg = json.loads(config.read_text())
    again = load_model(weights.read_bytes(), cfg)
    world = next(iter(data.worlds.values()))
    e = next(e for e in data.examples if e.scan == world.scan)
    feats, mask = stack_steps([world.step_features(e.path, e.heading)])
    tokens, tmask = pad_batch([Vocabulary(speaker.words).encode(e.instructions[0], 60)])
    assert again.score(feats, mask, tokens, tmask).item() == pytest.approx(
        speaker.score(feats, mask, tokens, tmask).item(), abs=1e-6)
    with pytest.raises(ValueError, match="unknown architecture"):
        load_model(weights, {**cfg, "architecture": "transformer-xl"})
    with pytest.raises(ValueError, match="feature_version"):
        load_model(weights, {**cfg, "feature_version": "other/9"})


def test_bleu4_against_hand_counts():
    ref = "turn left and walk into the kitchen".split()
    assert bleu4([ref], [[ref]]) == pytest.approx(1.0)
    hyp = "turn left and walk to the kitchen".split()
    # 1-grams 6/7, 2-grams 4/6, 3-grams 2/5, 4-grams 1/4; same length: no brevity penalty
    want = math.exp((math.log(6 / 7) + math.log(4 / 6) + math.log(2 / 5) + math.log(1 / 4)) / 4)
    assert bleu4([hyp], [[ref]]) == pytest.approx(want)
    assert bleu4(["stop".split()], [[ref]]) == 0.0


def test_the_indexed_fast_path_gives_the_listeners_own_logits(data):
    words = Vocabulary.build([t for e in data.examples for t in e.instructions]).words
    torch.manual_seed(3)
    ens = Ensemble([Listener(words, hidden=32) for _ in range(3)])
    worlds = Worlds(list(data.worlds.values()), torch.device("cpu"))
    instr, starts, heads, _ = _rows(data, worlds, Vocabulary(words), n=6)
    tokens, mask = pad_batch(instr)
    states, h = ens.encode(tokens, mask)
    cur = torch.tensor(starts).unsqueeze(0).expand(3, -1).contiguous()
    head = torch.tensor(heads, dtype=torch.float32).unsqueeze(0).expand(3, -1).contiguous()
    nb, feats, amask = worlds.actions(cur, head)
    slow, h_slow = ens.act(states, mask, h, worlds.nodes[cur], feats, amask)
    _, edges, _ = worlds.edges(cur, head)
    fast, h_fast = ens.act_indexed(states, mask, h, ens.tables(worlds.nodes), cur, nb, edges, amask)
    assert torch.allclose(slow, fast, atol=1e-5) and torch.allclose(h_slow, h_fast, atol=1e-6)
    # and member k of the ensemble is listener k on its own (the TorchScript interface)
    member = ens.members()[1]
    s1, h1 = member.encode(tokens, mask)
    own, _ = member.act(s1, mask, h1, worlds.nodes[cur[1]], feats[1], amask[1])
    assert torch.allclose(own, slow[1], atol=1e-5)
