"""Our built-in listener: instruction -> path, one move (or stop) at a time.

At each viewpoint it scores every navigable neighbour and "stop", from its memory of the walk
so far (a GRU over what it saw) and the words of the instruction it attends to. It implements
the listener interface every uploaded TorchScript listener implements too (docs/agents.md):

    feature_version() -> str
    vocabulary() -> List[str]
    encode(tokens [B,L], token_mask [B,L]) -> (states [B,L,H], h0 [B,H])
    act(states, token_mask, h [B,H], node [B,NODE_SIZE], actions [B,A,ACTION_SIZE],
        action_mask [B,A]) -> (logits [B,A+1] (the last one is stop; masked ones -1e9), h')

An ensemble of K listeners runs as one batched computation: their weights are stacked and the
same code is vmapped over the stack (`Ensemble`), so candidates x listeners x rollouts step
together.
"""

from __future__ import annotations

import copy
from typing import Dict, List, Tuple

import torch
from torch import Tensor, nn
from torch.func import functional_call, stack_module_state

from workers.navigation.features import ACTION_SIZE, FEATURES_VERSION, NODE_SIZE, PAD, Agent


class _GRU(nn.Module):
    """A GRU cell written out (so that vmap over stacked weights has only plain ops)."""

    def __init__(self, inputs: int, hidden: int):
        super().__init__()
        self.x = nn.Linear(inputs, 3 * hidden)
        self.h = nn.Linear(hidden, 3 * hidden)

    def forward(self, x: Tensor, h: Tensor) -> Tensor:
        xr, xz, xn = self.x(x).chunk(3, -1)
        hr, hz, hn = self.h(h).chunk(3, -1)
        r = torch.sigmoid(xr + hr)
        z = torch.sigmoid(xz + hz)
        n = torch.tanh(xn + r * hn)
        return (1 - z) * n + z * h


class InstructionEncoder(nn.Module):
    def __init__(self, n_words: int, embed: int, hidden: int):
        super().__init__()
        self.embedding = nn.Embedding(n_words, embed, padding_idx=PAD)
        self.cell = _GRU(embed, hidden)
        self.hidden = hidden

    def forward(self, tokens: Tensor, token_mask: Tensor) -> Tuple[Tensor, Tensor]:
        x = self.embedding(tokens)
        h = torch.zeros(tokens.shape[:-1] + (self.hidden,), device=x.device, dtype=x.dtype)
        states: List[Tensor] = []
        for t in range(tokens.shape[-1]):
            keep = token_mask[..., t].unsqueeze(-1).to(x.dtype)
            h = keep * self.cell(x[..., t, :], h) + (1 - keep) * h  # padding leaves h as it is
            states.append(h)
        return torch.stack(states, -2), h


class Policy(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.see = nn.Sequential(nn.Linear(NODE_SIZE, hidden), nn.Tanh())
        self.cell = _GRU(hidden, hidden)
        self.query = nn.Linear(hidden, hidden)
        self.mix = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.Tanh())
        self.moves = nn.Sequential(nn.Linear(ACTION_SIZE, hidden), nn.Tanh())
        self.stop = nn.Linear(hidden, 1)

    def forward(
        self, states: Tensor, token_mask: Tensor, h: Tensor, node: Tensor, actions: Tensor, action_mask: Tensor
    ) -> Tuple[Tensor, Tensor]:
        h = self.cell(self.see(node), h)
        scores = (states @ self.query(h).unsqueeze(-1)).squeeze(-1)
        scores = scores.masked_fill(~token_mask, -1e9)
        context = (torch.softmax(scores, -1).unsqueeze(-2) @ states).squeeze(-2)
        z = self.mix(torch.cat([h, context], -1))
        move = (self.moves(actions) @ z.unsqueeze(-1)).squeeze(-1)
        move = move.masked_fill(~action_mask, -1e9)
        return torch.cat([move, self.stop(z)], -1), h


class Listener(Agent):
    architecture = "gru-listener"

    def __init__(self, words: List[str], hidden: int = 128, embed: int = 64):
        super().__init__(words)
        self.hidden = hidden
        self.encoder = InstructionEncoder(len(words), embed, hidden)
        self.policy = Policy(hidden)

    def config(self) -> dict:
        return {
            "architecture": self.architecture,
            "hidden": self.hidden,
            "embed": self.encoder.embedding.embedding_dim,
            "words": self.words,
            "feature_version": FEATURES_VERSION,
        }

    @torch.jit.export
    def encode(self, tokens: Tensor, token_mask: Tensor) -> Tuple[Tensor, Tensor]:
        return self.encoder(tokens, token_mask)

    @torch.jit.export
    def act(
        self, states: Tensor, token_mask: Tensor, h: Tensor, node: Tensor, actions: Tensor, action_mask: Tensor
    ) -> Tuple[Tensor, Tensor]:
        return self.policy(states, token_mask, h, node, actions, action_mask)

    def forward(self, tokens: Tensor, token_mask: Tensor) -> Tuple[Tensor, Tensor]:
        return self.encode(tokens, token_mask)


class Ensemble:
    """K listeners of one architecture, run together: every call returns a leading K axis.

    Built from K Listener modules (their weights are stacked, not shared); `members()` gives
    them back. With K = 1 it is just one listener, batched the same way.
    """

    def __init__(self, listeners: List[Listener]):
        if not listeners:
            raise ValueError("an ensemble needs at least one listener")
        words = listeners[0].words
        if any(m.words != words for m in listeners):
            raise ValueError("the listeners of an ensemble share one vocabulary")
        self.template = copy.deepcopy(listeners[0]).to("meta")
        self.words = words
        self.k = len(listeners)
        self.params, self.buffers = stack_module_state(listeners)

    def to(self, device: torch.device | str) -> "Ensemble":
        self.params = {k: v.to(device) for k, v in self.params.items()}
        self.buffers = {k: v.to(device) for k, v in self.buffers.items()}
        return self

    @property
    def device(self) -> torch.device:
        return next(iter(self.params.values())).device

    def _part(self, prefix: str) -> Dict[str, Tensor]:
        n = len(prefix) + 1
        return {k[n:]: v for k, v in {**self.params, **self.buffers}.items() if k.startswith(prefix + ".")}

    def encode(self, tokens: Tensor, token_mask: Tensor) -> Tuple[Tensor, Tensor]:
        """Tokens shared by all members -> states [K, B, L, H], h0 [K, B, H]."""

        def one(p, t, m):
            return functional_call(self.template.encoder, p, (t, m))

        return torch.vmap(one, in_dims=(0, None, None))(self._part("encoder"), tokens, token_mask)

    def act(
        self, states: Tensor, token_mask: Tensor, h: Tensor, node: Tensor, actions: Tensor, action_mask: Tensor
    ) -> Tuple[Tensor, Tensor]:
        """Every argument has a leading K axis but token_mask [B, L], shared by all members:
        states [K,B,L,H], h [K,B,H], node [K,B,F], actions [K,B,A,E], action_mask [K,B,A]
        -> logits [K,B,A+1], h' [K,B,H]."""

        def one(p, s, hh, n, a, am):
            return functional_call(self.template.policy, p, (s, token_mask, hh, n, a, am))

        return torch.vmap(one)(self._part("policy"), states, h, node, actions, action_mask)

    def tables(self, nodes: Tensor) -> Tuple[Tensor, Tensor]:
        """Per member and viewpoint [V, NODE_SIZE]: what the policy's `see` makes of it, and its
        share of a move's first projection; [K, V, H] each. A rollout then gathers rows instead
        of projecting NODE_SIZE features for every move at every step."""
        return torch.vmap(_tables, in_dims=(0, None))(self._part("policy"), nodes)

    def act_indexed(
        self,
        states: Tensor,
        token_mask: Tensor,
        h: Tensor,
        tables: Tuple[Tensor, Tensor],
        cur: Tensor,
        neighbours: Tensor,
        edges: Tensor,
        action_mask: Tensor,
    ) -> Tuple[Tensor, Tensor]:
        """act() for viewpoints given by index: cur [K,B], neighbours [K,B,A] (-1 = padding),
        edges [K,B,A,EDGE_SIZE] (the non-node part of the action features). Same logits as
        act() on the full features (tested), with far less arithmetic."""
        seen_t, move_t = tables

        def one(p, s, hh, st, mt, c, nb, e, am):
            return _step_indexed(p, s, token_mask, hh, st[c], mt[nb.clamp(min=0)], e, am)

        return torch.vmap(one)(self._part("policy"), states, h, seen_t, move_t, cur, neighbours, edges, action_mask)

    def members(self) -> List[Listener]:
        out = []
        for k in range(self.k):
            m = Listener(self.words, self.template.hidden, self.template.encoder.embedding.embedding_dim)
            m.load_state_dict({name: v[k].detach().cpu() for name, v in self.params.items()})
            out.append(m)
        return out


EDGE_SIZE = ACTION_SIZE - NODE_SIZE


# The policy written out over a parameter dict (Policy's names), for the indexed fast path.
def _linear(p: Dict[str, Tensor], name: str, x: Tensor) -> Tensor:
    return torch.nn.functional.linear(x, p[f"{name}.weight"], p[f"{name}.bias"])


def _gru(p: Dict[str, Tensor], name: str, x: Tensor, h: Tensor) -> Tensor:
    xr, xz, xn = _linear(p, f"{name}.x", x).chunk(3, -1)
    hr, hz, hn = _linear(p, f"{name}.h", h).chunk(3, -1)
    r, z = torch.sigmoid(xr + hr), torch.sigmoid(xz + hz)
    return (1 - z) * torch.tanh(xn + r * hn) + z * h


def _tables(p: Dict[str, Tensor], nodes: Tensor) -> Tuple[Tensor, Tensor]:
    seen = torch.tanh(_linear(p, "see.0", nodes))
    return seen, nodes @ p["moves.0.weight"][:, EDGE_SIZE:].T


def _step_indexed(
    p: Dict[str, Tensor],
    states: Tensor,
    token_mask: Tensor,
    h: Tensor,
    seen: Tensor,
    move_nodes: Tensor,
    edges: Tensor,
    action_mask: Tensor,
) -> Tuple[Tensor, Tensor]:
    h = _gru(p, "cell", seen, h)
    scores = (states @ _linear(p, "query", h).unsqueeze(-1)).squeeze(-1).masked_fill(~token_mask, -1e9)
    context = (torch.softmax(scores, -1).unsqueeze(-2) @ states).squeeze(-2)
    z = torch.tanh(_linear(p, "mix.0", torch.cat([h, context], -1)))
    w = p["moves.0.weight"]
    moves = torch.tanh(edges @ w[:, :EDGE_SIZE].T + move_nodes + p["moves.0.bias"])
    move = (moves @ z.unsqueeze(-1)).squeeze(-1).masked_fill(~action_mask, -1e9)
    return torch.cat([move, _linear(p, "stop", z)], -1), h
