"""The bounded pragmatic speaker's choice (the paper's eq. 13), batched as tensors.

For each path, each candidate instruction is followed M times by each of K listeners in the
simulator (the building's graph); each rollout is scored by nDTW (or SDTW) against the intended
path, and the candidate with the best mean wins. All candidates x listeners x rollouts of a
batch of paths step together: one encode of the instructions, then at most `max_steps` batched
moves, then one batched DTW. `rerank_loop` does the same one candidate at a time (the
reference the benchmark compares against). The device is CUDA when available, else the CPU.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from app.kinds.navigation.architectures import vocabulary_of
from app.kinds.navigation.metrics import SUCCESS_DISTANCE
from workers.navigation.features import World, pad_batch
from workers.navigation.listener import Ensemble


def pick_device(prefer: str | None = None) -> torch.device:
    if prefer:
        return torch.device(prefer)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Worlds:
    """Several buildings as one table of viewpoints (each building's ids offset), on a device."""

    def __init__(self, worlds: Sequence[World], device: torch.device):
        self.device = device
        self.offsets: dict[str, int] = {}
        total = 0
        for w in worlds:
            self.offsets[w.scan] = total
            total += len(w.graph)
        width = max(w.neighbours.shape[1] for w in worlds)
        nodes, nbrs, heads, climbs, lengths = [], [], [], [], []
        dist = np.full((total, total), np.inf, dtype=np.float32)
        for w in worlds:
            off, n = self.offsets[w.scan], len(w.graph)
            pad = width - w.neighbours.shape[1]
            nb = np.where(w.neighbours >= 0, w.neighbours + off, -1)
            nbrs.append(np.pad(nb, ((0, 0), (0, pad)), constant_values=-1))
            heads.append(np.pad(w.headings, ((0, 0), (0, pad))))
            climbs.append(np.pad(w.climbs, ((0, 0), (0, pad))))
            lengths.append(np.pad(w.lengths, ((0, 0), (0, pad))))
            nodes.append(w.nodes)
            dist[off : off + n, off : off + n] = w.distances
        as_t = lambda a: torch.from_numpy(np.concatenate(a)).to(device)  # noqa: E731
        self.nodes, self.neighbours = as_t(nodes), as_t(nbrs)
        self.headings, self.climbs, self.lengths = as_t(heads), as_t(climbs), as_t(lengths)
        self.distances = torch.from_numpy(dist).to(device)
        self.by_scan = {w.scan: w for w in worlds}

    def index(self, scan: str, viewpoints: Sequence[str]) -> list[int]:
        w, off = self.by_scan[scan], self.offsets[scan]
        return [off + w.graph.index[v] for v in viewpoints]

    def actions(self, cur: Tensor, heading: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """For current viewpoints cur [...] and headings: (neighbours [...,A], their action
        features [...,A,ACTION_SIZE], mask [...,A])."""
        nb, edges, mask = self.edges(cur, heading)
        return nb, torch.cat([edges, self.nodes[nb.clamp(min=0)]], -1), mask

    def edges(self, cur: Tensor, heading: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The action features without the neighbour's node features: (neighbours [...,A],
        [...,A,EDGE_SIZE], mask [...,A])."""
        nb = self.neighbours[cur]
        rel = self.headings[cur] - heading.unsqueeze(-1)
        climb = self.climbs[cur]
        edges = torch.stack(
            [torch.sin(rel), torch.cos(rel), (climb > 0).float(), (climb < 0).float(), self.lengths[cur] / 3.0], -1
        )
        return nb, edges, nb >= 0


@dataclass
class Rollouts:
    paths: Tensor  # [K, N, T+1] viewpoint indices (the last one repeated after stopping)
    lengths: Tensor  # [K, N] viewpoints visited (1 + moves)


def rollout(
    ensemble: Ensemble,
    worlds: Worlds,
    tokens: Tensor,
    token_mask: Tensor,
    start: Tensor,
    heading: Tensor,
    rollouts: int,
    max_steps: int,
    greedy: bool = False,
    generator: torch.Generator | None = None,
) -> Rollouts:
    """Each of K listeners follows each of B instructions `rollouts` times (rows are ordered
    instruction-major: row b * rollouts + m)."""
    m = rollouts
    with torch.no_grad():
        states, h = ensemble.encode(tokens, token_mask)
        states = states.repeat_interleave(m, 1)
        h = h.repeat_interleave(m, 1)
        tmask = token_mask.repeat_interleave(m, 0)
        k, n = h.shape[0], h.shape[1]
        cur = start.repeat_interleave(m).unsqueeze(0).expand(k, n).contiguous()
        head = heading.repeat_interleave(m).unsqueeze(0).expand(k, n).contiguous()
        done = torch.zeros((k, n), dtype=torch.bool, device=cur.device)
        moves = torch.zeros((k, n), dtype=torch.long, device=cur.device)
        steps = [cur]
        tables = ensemble.tables(worlds.nodes)  # per-viewpoint projections, once per batch
        for t in range(max_steps):
            nb, edges, amask = worlds.edges(cur, head)
            if t == max_steps - 1:
                amask = torch.zeros_like(amask)  # out of steps: only stop is left
            logits, h_new = ensemble.act_indexed(states, tmask, h, tables, cur, nb, edges, amask)
            if greedy:
                choice = logits.argmax(-1)
            else:
                probs = torch.softmax(logits, -1).reshape(-1, logits.shape[-1])
                choice = torch.multinomial(probs, 1, generator=generator).reshape(k, n)
            a = nb.shape[-1]
            stop = done | (choice == a)
            picked = choice.clamp(max=a - 1).unsqueeze(-1)
            nxt = nb.gather(-1, picked).squeeze(-1)
            new_head = worlds.headings[cur].gather(-1, picked).squeeze(-1)
            cur = torch.where(stop, cur, nxt)
            head = torch.where(stop, head, new_head)
            h = torch.where(done.unsqueeze(-1), h, h_new)
            moves = moves + (~stop).long()
            done = stop
            steps.append(cur)
            if bool(done.all()):
                break
        return Rollouts(torch.stack(steps, -1), moves + 1)


def ndtw_batch(distances: Tensor, reference: Tensor, reference_len: Tensor, query: Tensor, query_len: Tensor) -> Tensor:
    """nDTW of query paths against reference paths (DESIGN section 6), all rows at once.

    reference [N, R] and query [N, Q] are viewpoint indices, padded past their lengths.
    Row i of the DTW table is S + cummin(prev - S), with S the running sum of row i's costs:
    the min over "came from the left" unrolled, so each row is a few vector operations."""
    n, r_max = reference.shape
    q_max = query.shape[1]
    inf = torch.tensor(math.inf, device=query.device, dtype=distances.dtype)
    prev = torch.full((n, q_max + 1), math.inf, device=query.device, dtype=distances.dtype)
    prev[:, 0] = 0.0
    out = torch.zeros(n, device=query.device, dtype=distances.dtype)
    for i in range(r_max):
        cost = distances[reference[:, i].unsqueeze(1), query]  # [N, Q]
        best_prev = torch.minimum(prev[:, 1:], prev[:, :-1])
        running = cost.cumsum(1)
        shifted = torch.cat([torch.zeros_like(running[:, :1]), running[:, :-1]], 1)
        row = running + torch.cummin(best_prev - shifted, 1).values
        prev = torch.cat([torch.full_like(row[:, :1], inf), row], 1)
        last = reference_len == i + 1
        if bool(last.any()):
            out = torch.where(last, prev.gather(1, query_len.unsqueeze(1)).squeeze(1), out)
    return torch.exp(-out / (reference_len.to(out.dtype) * SUCCESS_DISTANCE))


@dataclass
class Reranked:
    scores: Tensor  # [B] mean score per instruction (over K listeners x M rollouts)
    per_rollout: Tensor  # [K, B, M] nDTW or SDTW of each rollout
    success: Tensor  # [K, B, M]
    paths: Tensor  # [K, B, M, T+1]
    lengths: Tensor  # [K, B, M]


def follow_and_score(
    ensemble: Ensemble,
    worlds: Worlds,
    instructions: Sequence[list[int]],
    starts: Sequence[int],
    headings: Sequence[float],
    references: Sequence[Sequence[int]],
    rollouts: int = 3,
    metric: str = "ndtw",
    max_steps: int | None = None,
    greedy: bool = False,
    generator: torch.Generator | None = None,
) -> Reranked:
    """Listeners follow each instruction (token ids) from its start; every rollout is scored
    against that instruction's intended path (viewpoint indices in `worlds`)."""
    if metric not in ("ndtw", "sdtw"):
        raise ValueError("metric is ndtw or sdtw")
    dev = worlds.device
    b = len(instructions)
    tokens, mask = pad_batch(instructions)
    refs, ref_mask = pad_batch([[i + 1 for i in r] for r in references])  # +1: 0 is padding here
    ref = (refs - 1).clamp(min=0).to(dev)
    ref_len = ref_mask.sum(1).to(dev)
    steps = max_steps or int(ref_len.max()) * 2 + 2
    ro = rollout(
        ensemble,
        worlds,
        tokens.to(dev),
        mask.to(dev),
        torch.tensor(list(starts), device=dev),
        torch.tensor(list(headings), device=dev, dtype=torch.float32),
        rollouts,
        steps,
        greedy=greedy,
        generator=generator,
    )
    k, n, width = ro.paths.shape
    flat = ro.paths.reshape(k * n, width)
    flat_len = ro.lengths.reshape(k * n)
    rows = torch.arange(b, device=dev).repeat_interleave(rollouts).repeat(k)  # instruction of each row
    ndtw = ndtw_batch(worlds.distances, ref[rows], ref_len[rows], flat, flat_len)
    goal = ref[rows, ref_len[rows] - 1]
    final = flat.gather(1, (flat_len - 1).unsqueeze(1)).squeeze(1)
    success = worlds.distances[final, goal] <= SUCCESS_DISTANCE
    score = ndtw if metric == "ndtw" else ndtw * success
    per = score.reshape(k, b, rollouts)
    return Reranked(
        per.mean(dim=(0, 2)),
        per,
        success.reshape(k, b, rollouts),
        ro.paths.reshape(k, b, rollouts, width),
        ro.lengths.reshape(k, b, rollouts),
    )


def rerank_loop(ensemble: Ensemble, worlds: Worlds, *inputs: Sequence[Any], **options: Any) -> Tensor:
    """The same scores, one candidate at a time (the per-candidate loop the benchmark compares
    with; `inputs`, the instructions, starts, headings and references, and `options` as
    follow_and_score's): [B] mean score per instruction."""
    return torch.cat(
        [follow_and_score(ensemble, worlds, *([x] for x in row), **options).scores for row in zip(*inputs)]
    )


class ScriptedListener:
    """An uploaded TorchScript listener behind the batched interface `rollout` uses (K = 1):
    it gets the full action features and answers through its own encode()/act() (the listener
    interface, docs/agents.md), so reranking works with listeners of any architecture."""

    k = 1

    def __init__(self, module: torch.nn.Module):
        self.module = module
        self.words = vocabulary_of(module, "listener")

    def to(self, device: torch.device | str) -> "ScriptedListener":
        self.module = self.module.to(device)
        return self

    def encode(self, tokens: Tensor, token_mask: Tensor) -> tuple[Tensor, Tensor]:
        states, h = self.module.encode(tokens, token_mask)
        return states.unsqueeze(0), h.unsqueeze(0)

    def tables(self, nodes: Tensor) -> tuple[Tensor]:
        return (nodes,)  # nothing to precompute: the module sees the full features

    def act_indexed(
        self,
        states: Tensor,
        token_mask: Tensor,
        h: Tensor,
        tables: tuple[Tensor],
        cur: Tensor,
        neighbours: Tensor,
        edges: Tensor,
        action_mask: Tensor,
    ) -> tuple[Tensor, Tensor]:
        nodes = tables[0]
        actions = torch.cat([edges[0], nodes[neighbours[0].clamp(min=0)]], -1)
        logits, h2 = self.module.act(states[0], token_mask, h[0], nodes[cur[0]], actions, action_mask[0])
        return logits.unsqueeze(0), h2.unsqueeze(0)


def stack_listeners(parts: Sequence[Reranked]) -> Reranked:
    """Results of several listener groups on the same instructions as one (listeners along the
    first axis, in order); paths are padded with their last viewpoint to one width."""
    width = max(p.paths.shape[-1] for p in parts)
    paths = [
        torch.cat([p.paths, p.paths[..., -1:].expand(*p.paths.shape[:-1], width - p.paths.shape[-1])], -1)
        for p in parts
    ]
    per = torch.cat([p.per_rollout for p in parts])
    return Reranked(
        per.mean(dim=(0, 2)),
        per,
        torch.cat([p.success for p in parts]),
        torch.cat(paths),
        torch.cat([p.lengths for p in parts]),
    )
