"""Training our baseline speaker and listeners on generated houses (`proctor train`).

Data: houses from `generate_house(seed)`, R2R-like paths from `sample_paths`, and reference
instructions from the grammar (`describe_path`, 3 per path). Training and held-out houses never
share a seed. The speaker learns S(u | e) by teacher forcing; each listener learns to follow
by imitating the shortest way to the goal from wherever it stands (it walks by its own choices
after the first epoch, so that it also learns to recover). An ensemble is K listeners, each
trained on its own random 90% of the paths from its own seed, in one batched run.

Quality figures (`evaluate_*`) are measured on held-out houses: listener success rate with
greedy following, speaker BLEU-4 of greedy instructions against the three references.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file

from app.kinds.navigation.grammar import describe_path
from app.kinds.navigation.house import generate_house, sample_paths
from workers.navigation.features import FEATURES_VERSION, Vocabulary, World, pad_batch, stack_steps, tokenize
from workers.navigation.listener import Ensemble, Listener
from workers.navigation.rerank import Worlds, follow_and_score, pick_device
from workers.navigation.speaker import Speaker
from workers.training import Adam, descend, seed_all

MAX_WORDS = 60  # instruction length cap (the grammar's longest is about 45 words)
Progress = Callable[[float, str], None]


@dataclass
class Example:
    scan: str
    path: list[str]
    heading: float
    instructions: list[str]


@dataclass
class Dataset:
    examples: list[Example]
    worlds: dict[str, World]


def make_dataset(seeds: Sequence[int], paths_per_house: int = 20, progress: Progress | None = None) -> Dataset:
    """Houses of one or two floors (by seed), their paths and three grammar instructions each."""
    examples: list[Example] = []
    worlds: dict[str, World] = {}
    for n, seed in enumerate(seeds):
        house = generate_house(seed, floors=1 + (seed % 3 == 0))
        worlds[house.scan] = World.from_house(house)
        for k, p in enumerate(sample_paths(house, paths_per_house, rng=seed)):
            texts = describe_path(house, p, rng=seed * 1000 + k, n=3)
            examples.append(Example(house.scan, list(p.path), p.heading, texts))
        if progress:
            progress((n + 1) / len(seeds), f"house {house.scan}: {len(examples)} paths so far")
    return Dataset(examples, worlds)


def _log(progress: Progress | None, fraction: float, message: str) -> None:
    if progress:
        progress(fraction, message)


# -- speaker ----------------------------------------------------------------------------------


def train_speaker(
    data: Dataset,
    epochs: int = 20,
    hidden: int = 128,
    batch: int = 64,
    lr: float = 2e-3,
    seed: int = 0,
    device: str | None = None,
    progress: Progress | None = None,
) -> Speaker:
    seed_all(seed)
    dev = pick_device(device)
    vocab = Vocabulary.build([t for e in data.examples for t in e.instructions])
    model = Speaker(vocab.words, hidden=hidden).to(dev)
    steps = [data.worlds[e.scan].step_features(e.path, e.heading) for e in data.examples]
    pairs = [(i, vocab.encode(t, MAX_WORDS)) for i, e in enumerate(data.examples) for t in e.instructions]
    opt = Adam(model.parameters(), lr=lr)
    rng = random.Random(seed)
    for epoch in range(epochs):
        rng.shuffle(pairs)
        total, count = 0.0, 0
        for start in range(0, len(pairs), batch):
            chunk = pairs[start : start + batch]
            feats, fmask = stack_steps([steps[i] for i, _ in chunk])
            tokens, tmask = pad_batch([t for _, t in chunk])
            feats, fmask, tokens, tmask = feats.to(dev), fmask.to(dev), tokens.to(dev), tmask.to(dev)
            logp = model(feats, fmask, tokens)
            nll = -(logp.gather(2, tokens.unsqueeze(-1)).squeeze(-1) * tmask).sum() / tmask.sum()
            total += descend(opt, nll, model.parameters()) * len(chunk)
            count += len(chunk)
        _log(progress, (epoch + 1) / epochs, f"speaker epoch {epoch + 1}/{epochs}: loss {total / count:.3f}")
    return model.eval().cpu()


def speaker_generate(
    model: Speaker,
    world: World,
    paths: Sequence[tuple[Sequence[str], float]],
    n: int = 0,
    greedy: bool = True,
    max_len: int = MAX_WORDS,
    temperature: float = 1.0,
    seed: int = 0,
) -> list[list[tuple[list[int], float]]]:
    """Per path: the greedy instruction (when greedy) then n samples, each (token ids up to and
    with <eos>, log-probability under the speaker)."""
    torch.manual_seed(seed)
    feats, fmask = stack_steps([world.step_features(p, h) for p, h in paths])
    out: list[list[tuple[list[int], float]]] = [[] for _ in paths]
    with torch.no_grad():
        runs = ([True] if greedy else []) + [False] * n
        for g in runs:
            tokens, logp = model.sample(feats, fmask, max_len, g, temperature)
            for b in range(len(paths)):
                ids = [int(t) for t in tokens[b] if int(t) != 0]
                out[b].append((ids, float(logp[b])))
    return out


def bleu4(hypotheses: Sequence[Sequence[str]], references: Sequence[Sequence[Sequence[str]]]) -> float:
    """Corpus BLEU-4 (Papineni et al. 2002): clipped n-gram precisions for n = 1..4, their
    geometric mean, and the brevity penalty against the closest reference length."""
    matched = [0] * 4
    possible = [0] * 4
    hyp_len = ref_len = 0
    for hyp, refs in zip(hypotheses, references):
        hyp_len += len(hyp)
        ref_len += min((len(r) for r in refs), key=lambda L: (abs(L - len(hyp)), L))
        for n in range(1, 5):
            grams = Counter(tuple(hyp[i : i + n]) for i in range(len(hyp) - n + 1))
            most: Counter = Counter()
            for r in refs:
                for g, c in Counter(tuple(r[i : i + n]) for i in range(len(r) - n + 1)).items():
                    most[g] = max(most[g], c)
            matched[n - 1] += sum(min(c, most[g]) for g, c in grams.items())
            possible[n - 1] += max(len(hyp) - n + 1, 0)
    if min(matched) == 0:
        return 0.0
    log_p = sum(math.log(m / p) for m, p in zip(matched, possible)) / 4
    bp = 1.0 if hyp_len > ref_len else math.exp(1 - ref_len / max(hyp_len, 1))
    return bp * math.exp(log_p)


def evaluate_speaker(model: Speaker, data: Dataset) -> dict:
    vocab = Vocabulary(model.words)
    hyps, refs = [], []
    by_scan: dict[str, list[Example]] = {}
    for e in data.examples:
        by_scan.setdefault(e.scan, []).append(e)
    for scan, exs in by_scan.items():
        outs = speaker_generate(model, data.worlds[scan], [(e.path, e.heading) for e in exs])
        for e, o in zip(exs, outs):
            hyps.append(tokenize(vocab.decode(o[0][0])))
            refs.append([tokenize(t) for t in e.instructions])
    return {"bleu4": bleu4(hyps, refs), "paths": len(hyps)}


# -- listeners --------------------------------------------------------------------------------


def _next_hops(worlds: Worlds, data: Dataset) -> torch.Tensor:
    """[V, V] global index of the next viewpoint on a shortest way from cur (column) to goal
    (row); the goal itself where cur is the goal."""
    total = worlds.nodes.shape[0]
    hops = torch.arange(total).unsqueeze(0).repeat(total, 1)
    for scan, off in worlds.offsets.items():
        g = data.worlds[scan].graph
        pred = torch.from_numpy(g.predecessors.astype(np.int64))
        n = len(g)
        block = torch.where(pred >= 0, pred + off, torch.arange(off, off + n).unsqueeze(0).expand(n, n))
        hops[off : off + n, off : off + n] = block  # pred[goal, cur]: the step after cur towards goal
    return hops.to(worlds.device)


def train_listeners(
    data: Dataset,
    k: int = 1,
    epochs: int = 20,
    hidden: int = 128,
    batch: int = 64,
    lr: float = 2e-3,
    share: float = 0.9,
    seed: int = 0,
    device: str | None = None,
    progress: Progress | None = None,
) -> Ensemble:
    """K listeners trained together; member j sees its own random `share` of the paths."""
    dev = pick_device(device)
    vocab = Vocabulary.build([t for e in data.examples for t in e.instructions])
    members = []
    for j in range(k):
        torch.manual_seed(seed + 7919 * j)
        members.append(Listener(vocab.words, hidden=hidden))
    ens = Ensemble(members).to(dev)
    params = {name: torch.nn.Parameter(v.detach().clone()) for name, v in ens.params.items()}
    ens.params = params
    opt = Adam(params.values(), lr=lr)
    worlds = Worlds(list(data.worlds.values()), dev)
    hops = _next_hops(worlds, data)
    rows = [(i, t) for i, e in enumerate(data.examples) for t in range(len(e.instructions))]
    rng = np.random.default_rng(seed)
    # which paths each member trains on
    keep = torch.from_numpy(rng.random((k, len(data.examples))) < share).to(dev)
    r = random.Random(seed)
    for epoch in range(epochs):
        r.shuffle(rows)
        student = epoch > 0
        total = 0.0
        for start in range(0, len(rows), batch):
            chunk = rows[start : start + batch]
            exs = [data.examples[i] for i, _ in chunk]
            tokens, tmask = pad_batch([vocab.encode(e.instructions[t], MAX_WORDS) for e, (_, t) in zip(exs, chunk)])
            tokens, tmask = tokens.to(dev), tmask.to(dev)
            goal = torch.tensor([worlds.index(e.scan, e.path[-1:])[0] for e in exs], device=dev)
            starts = torch.tensor([worlds.index(e.scan, e.path[:1])[0] for e in exs], device=dev)
            heading = torch.tensor([e.heading for e in exs], device=dev, dtype=torch.float32)
            weight = keep[:, [i for i, _ in chunk]].float()  # [K, B]
            steps = max(len(e.path) for e in exs) + 3
            loss = _imitation_loss(ens, worlds, hops, (tokens, tmask, starts, heading, goal, weight), steps, student)
            total += descend(opt, loss, params.values(), 1.0 * k) * len(chunk)
        _log(progress, (epoch + 1) / epochs, f"listeners epoch {epoch + 1}/{epochs}: loss {total / len(rows):.3f}")
    ens.params = {name: v.detach() for name, v in params.items()}
    return ens


def _imitation_loss(
    ens: Ensemble, worlds: Worlds, hops: torch.Tensor, batch: tuple[torch.Tensor, ...], max_steps: int, student: bool
) -> torch.Tensor:
    """The batch's (instruction tokens and mask, start viewpoints and headings, goals, each
    member's weight on each path) imitation loss along the expert's next hops; as a student
    (`student`), each member walks where it chose, not where the expert would."""
    tokens, tmask, starts, heading, goal, weight = batch
    states, h = ens.encode(tokens, tmask)
    k, b = h.shape[0], h.shape[1]
    cur = starts.unsqueeze(0).expand(k, b).contiguous()
    head = heading.unsqueeze(0).expand(k, b).contiguous()
    active = torch.ones((k, b), dtype=torch.bool, device=cur.device)
    losses = torch.zeros((k, b), device=cur.device)
    tables = ens.tables(worlds.nodes)  # from the current weights: gradients flow through them
    for _ in range(max_steps):
        nb, edges, amask = worlds.edges(cur, head)
        logits, h = ens.act_indexed(states, tmask, h, tables, cur, nb, edges, amask)
        a = nb.shape[-1]
        want = hops[goal.unsqueeze(0).expand(k, b), cur]  # the expert's next viewpoint
        at_goal = want == cur
        target = torch.where(at_goal, torch.full_like(cur, a), (nb == want.unsqueeze(-1)).float().argmax(-1))
        ce = torch.nn.functional.cross_entropy(logits.reshape(-1, a + 1), target.reshape(-1), reduction="none").reshape(
            k, b
        )
        losses = losses + ce * active
        if student:
            with torch.no_grad():
                choice = torch.multinomial(torch.softmax(logits.detach(), -1).reshape(-1, a + 1), 1).reshape(k, b)
        else:
            choice = target
        stop = choice == a
        picked = choice.clamp(max=a - 1).unsqueeze(-1)
        head = torch.where(stop, head, worlds.headings[cur].gather(-1, picked).squeeze(-1))
        cur = torch.where(stop, cur, nb.gather(-1, picked).squeeze(-1))
        active = active & ~stop
        if not bool(active.any()):
            break
    return (losses * weight).sum() / weight.sum().clamp(min=1)


def evaluate_listeners(ens: Ensemble, data: Dataset, vocab_words: Sequence[str] | None = None) -> dict:
    """Greedy following of every reference instruction: success rate and nDTW per member."""
    vocab = Vocabulary(list(vocab_words or ens.words))
    worlds = Worlds(list(data.worlds.values()), ens.device)
    instr, starts, heads, refs = [], [], [], []
    for e in data.examples:
        idx = worlds.index(e.scan, e.path)
        for t in e.instructions:
            instr.append(vocab.encode(t, MAX_WORDS))
            starts.append(idx[0])
            heads.append(e.heading)
            refs.append(idx)
    r = follow_and_score(ens, worlds, instr, starts, heads, refs, rollouts=1, greedy=True)
    sr = r.success.float().mean(dim=(1, 2))
    ndtw = r.per_rollout.mean(dim=(1, 2))
    return {
        "success_rate": [round(float(x), 4) for x in sr],
        "ndtw": [round(float(x), 4) for x in ndtw],
        "instructions": len(instr),
    }


# -- files ------------------------------------------------------------------------------------


def load_model(weights: str | Path | bytes, config: dict) -> torch.nn.Module:
    """A built-in speaker or listener from safetensors weights and its config (never a pickle)."""
    from safetensors.torch import load as load_bytes

    arch = config.get("architecture")
    if config.get("feature_version") != FEATURES_VERSION:
        raise ValueError(f"feature_version must be {FEATURES_VERSION!r}")
    words = config.get("words")
    if arch == Speaker.architecture:
        model: torch.nn.Module = Speaker(words, hidden=int(config["hidden"]), embed=int(config["embed"]))
    elif arch == Listener.architecture:
        model = Listener(words, hidden=int(config["hidden"]), embed=int(config["embed"]))
    else:
        raise ValueError(f"unknown architecture {arch!r}: use {Speaker.architecture} or {Listener.architecture}")
    state = load_bytes(weights) if isinstance(weights, bytes) else load_file(str(weights))
    model.load_state_dict(state)
    return model.eval()
