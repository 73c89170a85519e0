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
from workers.navigation.speaker import nucleus  # noqa: E402
from workers.navigation.rerank import Worlds, follow_and_score, ndtw_batch, rerank_loop  # noqa: E402
from workers.navigation.train import (  # noqa: E402
    bleu4,
    evaluate_listeners,
    load_model,
    make_dataset,
    speaker_generate,
    train_listeners,
    train_speaker,
)
from workers.training import save_model  # noqa: E402


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
    got = ndtw_batch(
        torch.from_numpy(d.astype(np.float64)), ref_t - 1, ref_m.sum(1), (q_t - 1).clamp(min=0), q_m.sum(1)
    )
    for k, (r, q) in enumerate(zip(refs, queries)):
        want = score_indices(d, np.array(r), np.array(q))["ndtw"]
        assert got[k].item() == pytest.approx(want, rel=1e-9, abs=1e-12)


def test_batched_rerank_equals_the_per_candidate_loop(data):
    ens = Ensemble(
        [
            Listener(Vocabulary.build([t for e in data.examples for t in e.instructions]).words, hidden=32)
            for _ in range(3)
        ]
    )
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
            eager = speaker.score(feats[b : b + 1], mask[b : b + 1], tokens, tmask).item()
            assert eager == pytest.approx(logp, abs=1e-4)
            assert scripted.score(feats[b : b + 1], mask[b : b + 1], tokens, tmask).item() == pytest.approx(
                eager, abs=1e-5
            )
    assert scripted.vocabulary() == speaker.words
    assert scripted.feature_version() == speaker.feature_version()


def test_nucleus_keeps_the_smallest_prefix_that_reaches_p():
    probs = torch.tensor([[0.5, 0.3, 0.15, 0.05], [0.05, 0.15, 0.3, 0.5]])
    # p = 0.8: the first two words reach it (0.5 + 0.3), renormalised; in any word order
    assert torch.allclose(nucleus(probs, 0.8), torch.tensor([[0.625, 0.375, 0, 0], [0, 0, 0.375, 0.625]]))
    assert torch.allclose(nucleus(probs[0], 0.8), torch.tensor([0.625, 0.375, 0, 0]))  # one distribution
    assert torch.allclose(nucleus(probs, 0.81)[0], torch.tensor([0.5, 0.3, 0.15, 0]) / 0.95)
    assert torch.allclose(nucleus(probs, 0.5)[0], torch.tensor([1.0, 0, 0, 0]))  # the top word reaches it
    assert torch.equal(nucleus(probs, 1.0), probs)  # p = 1: every word, untouched
    assert torch.equal(nucleus(probs, 1e-6), torch.tensor([[1.0, 0, 0, 0], [0, 0, 0, 1.0]]))  # the argmax
    # ties are broken by word id; a word the speaker never says stays out
    assert torch.equal(nucleus(torch.tensor([0.25, 0.25, 0.25, 0.25]), 0.5), torch.tensor([0.5, 0.5, 0, 0]))
    assert torch.equal(nucleus(torch.tensor([0.0, 0.6, 0.4]), 0.99), torch.tensor([0.0, 0.6, 0.4]))
    assert torch.equal(torch.jit.script(nucleus)(probs, 0.8), nucleus(probs, 0.8))


def test_nucleus_sampling_draws_only_words_of_each_steps_nucleus(data, speaker):
    world = next(iter(data.worlds.values()))
    exs = [e for e in data.examples if e.scan == world.scan][:6]
    feats, mask = stack_steps([world.step_features(e.path, e.heading) for e in exs])
    scripted = torch.jit.load(io.BytesIO(_saved(torch.jit.script(speaker))))
    with torch.no_grad():
        greedy, greedy_logp = speaker.sample(feats, mask, 30, True, 1.0)
        for model in (speaker, scripted):
            # a tiny p: only the most probable word, i.e. the greedy output, every time
            for seed in range(3):
                torch.manual_seed(seed)
                tokens, logp = model.sample(feats, mask, 30, False, 1.0, 1e-6)
                assert torch.equal(tokens, greedy) and torch.allclose(logp, greedy_logp, atol=1e-5)
            # p = 1 draws what pure sampling draws
            torch.manual_seed(4)
            pure = model.sample(feats, mask, 30, False, 1.0)
            torch.manual_seed(4)
            one = model.sample(feats, mask, 30, False, 1.0, 1.0)
            assert torch.equal(pure[0], one[0]) and torch.equal(pure[1], one[1])
            # p = 0.6: the same draws for the same seed; each word is in its step's nucleus;
            # the log-probabilities are the speaker's own (not the truncated distribution's)
            torch.manual_seed(4)
            tokens, logp = model.sample(feats, mask, 30, False, 1.0, 0.6)
            torch.manual_seed(4)
            again = model.sample(feats, mask, 30, False, 1.0, 0.6)
            assert torch.equal(tokens, again[0]) and torch.equal(logp, again[1])
            said = tokens != 0
            step_probs = speaker.forward(feats, mask, tokens).exp()
            kept = nucleus(step_probs, 0.6)
            assert bool((kept.gather(2, tokens.unsqueeze(-1)).squeeze(-1)[said] > 0).all())
            assert bool(((kept == 0) & (step_probs > 1e-6))[said].any())  # p = 0.6 did cut words
            assert torch.allclose(speaker.score(feats, mask, tokens, said), logp, atol=1e-4)


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
        speaker.score(feats, mask, tokens, tmask).item(), abs=1e-6
    )
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
