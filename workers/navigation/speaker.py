"""Our built-in speaker: path -> instruction, an encoder-decoder with attention.

The encoder is a GRU over the path's step features (features.py); the decoder a GRU over
words that attends to the steps. It implements the speaker interface every uploaded
TorchScript speaker implements too (docs/agents.md):

    feature_version() -> str
    vocabulary() -> List[str]
    score(steps [B,T,F], step_mask [B,T], tokens [B,L], token_mask [B,L]) -> [B]
        log S(u | e): the sum of the words' log-probabilities (with <eos>, without <bos>)
    sample(steps, step_mask, max_len: int, greedy: bool, temperature: float, top_p: float = 1.0)
        -> (tokens [B,L] (padded with 0 after <eos>), log-probabilities [B])

`top_p` is optional in the interface (uploaded speakers scripted before it existed take five
arguments): below 1 each sampled word is drawn from the nucleus (`nucleus`, Holtzman et al.
2020); at 1 sampling is pure ancestral sampling, the very same draws as without the argument.
The returned log-probabilities are always the speaker's own, log S(u | e), not the truncated
distribution's.
"""

from __future__ import annotations

from typing import List, Tuple

import torch
from torch import Tensor, nn

from workers.navigation.features import BOS, EOS, FEATURES_VERSION, PAD, STEP_SIZE, Agent


def nucleus(probs: Tensor, top_p: float) -> Tensor:
    """Nucleus (top-p) truncation of distributions over the last dimension: keep the smallest
    set of most probable words whose mass reaches `top_p` (never fewer than the most probable
    one), zero the rest and renormalise. `top_p >= 1` returns `probs` itself (pure sampling).
    Ties are broken by word id (a stable sort), so the result is deterministic."""
    if top_p >= 1.0:
        return probs
    ranked, order = torch.sort(probs, dim=-1, descending=True, stable=True)
    # The mass of the words ranked above each word: a word is kept while that is below top_p,
    # which keeps exactly the smallest prefix whose cumulative mass reaches top_p.
    above = torch.cat([torch.zeros_like(ranked[..., :1]), ranked.cumsum(-1)[..., :-1]], -1)
    keep_ranked = above < top_p
    keep_ranked[..., 0] = True
    keep = torch.zeros_like(keep_ranked).scatter(-1, order, keep_ranked)
    kept = probs.masked_fill(~keep, 0.0)
    return kept / kept.sum(-1, keepdim=True)


class Speaker(Agent):
    architecture = "gru-speaker"

    def __init__(self, words: List[str], hidden: int = 128, embed: int = 64, step_size: int = STEP_SIZE):
        super().__init__(words)
        self.step_size = step_size
        self.hidden = hidden
        self.bos, self.eos, self.pad = BOS, EOS, PAD  # attributes: TorchScript reads no globals
        self.project = nn.Sequential(nn.Linear(step_size, hidden), nn.Tanh())
        # Two one-way GRUs rather than a bidirectional one: each path's backward pass starts at
        # its own last step, so padding in a batch never changes a path's encoding.
        self.forwards = nn.GRU(hidden, hidden, batch_first=True)
        self.backwards = nn.GRU(hidden, hidden, batch_first=True)
        self.bridge = nn.Linear(2 * hidden, hidden)
        self.keys = nn.Linear(2 * hidden, hidden)
        self.embedding = nn.Embedding(len(words), embed, padding_idx=PAD)
        self.decoder = nn.GRU(embed + 2 * hidden, hidden, batch_first=True)
        self.out = nn.Linear(hidden + 2 * hidden, len(words))
        silent = torch.zeros(len(words), dtype=torch.bool)
        silent[PAD] = silent[BOS] = True
        self.register_buffer("silent", silent, persistent=False)

    def config(self) -> dict:
        return {
            "architecture": self.architecture,
            "hidden": self.hidden,
            "embed": self.embedding.embedding_dim,
            "step_size": self.step_size,
            "words": self.words,
            "feature_version": FEATURES_VERSION,
        }

    def _encode(self, steps: Tensor, step_mask: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        x = self.project(steps)
        ahead, _ = self.forwards(x)
        lengths = step_mask.sum(1, keepdim=True)
        t = torch.arange(steps.shape[1], device=steps.device).unsqueeze(0)
        flip = torch.where(t < lengths, lengths - 1 - t, t).unsqueeze(-1).expand(-1, -1, x.shape[-1])
        back, _ = self.backwards(x.gather(1, flip))
        states = torch.cat([ahead, back.gather(1, flip)], -1)
        states = states * step_mask.unsqueeze(-1).to(states.dtype)
        mean = states.sum(1) / step_mask.sum(1, keepdim=True).clamp(min=1).to(states.dtype)
        h0 = torch.tanh(self.bridge(mean)).unsqueeze(0)
        return states, self.keys(states), h0

    def _attend(self, query: Tensor, states: Tensor, keys: Tensor, step_mask: Tensor) -> Tensor:
        # query [B, L, H], keys [B, T, H] -> contexts [B, L, 2H]
        scores = torch.bmm(query, keys.transpose(1, 2))
        scores = scores.masked_fill(~step_mask.unsqueeze(1), -1e9)
        return torch.bmm(torch.softmax(scores, -1), states)

    def _step(
        self, word: Tensor, context: Tensor, h: Tensor, states: Tensor, keys: Tensor, step_mask: Tensor
    ) -> Tuple[Tensor, Tensor, Tensor]:
        # One decoder step for words [B]: -> (log-probs [B, V], new context, new h)
        x = torch.cat([self.embedding(word).unsqueeze(1), context], -1)
        y, h = self.decoder(x, h)
        context = self._attend(y, states, keys, step_mask)
        logits = self.out(torch.cat([y, context], -1)).squeeze(1)
        # <pad> and <bos> are never said: a sampled one would vanish from the instruction
        logits = logits.masked_fill(self.silent, -1e9)
        return torch.log_softmax(logits, -1), context, h

    def forward(self, steps: Tensor, step_mask: Tensor, tokens: Tensor) -> Tensor:
        """Teacher-forced log-probabilities [B, L, V] of tokens (which end with <eos>)."""
        states, keys, h = self._encode(steps, step_mask)
        b, length = tokens.shape
        word = torch.full((b,), self.bos, dtype=torch.long, device=tokens.device)
        context = torch.zeros((b, 1, states.shape[-1]), device=steps.device)
        out: List[Tensor] = []
        for t in range(length):
            logp, context, h = self._step(word, context, h, states, keys, step_mask)
            out.append(logp)
            word = tokens[:, t]
        return torch.stack(out, 1)

    @torch.jit.export
    def score(self, steps: Tensor, step_mask: Tensor, tokens: Tensor, token_mask: Tensor) -> Tensor:
        logp = self.forward(steps, step_mask, tokens)
        picked = logp.gather(2, tokens.unsqueeze(-1)).squeeze(-1)
        return (picked * token_mask.to(picked.dtype)).sum(1)

    @torch.jit.export
    def sample(
        self, steps: Tensor, step_mask: Tensor, max_len: int, greedy: bool, temperature: float, top_p: float = 1.0
    ) -> Tuple[Tensor, Tensor]:
        states, keys, h = self._encode(steps, step_mask)
        b = steps.shape[0]
        word = torch.full((b,), self.bos, dtype=torch.long, device=steps.device)
        context = torch.zeros((b, 1, states.shape[-1]), device=steps.device)
        done = torch.zeros((b,), dtype=torch.bool, device=steps.device)
        total = torch.zeros((b,), device=steps.device)
        out: List[Tensor] = []
        for _ in range(max_len):
            logp, context, h = self._step(word, context, h, states, keys, step_mask)
            if greedy:
                word = logp.argmax(-1)
            else:
                probs = torch.softmax(logp / temperature, -1)
                if top_p < 1.0:  # at 1: exactly the draws of pure ancestral sampling
                    probs = nucleus(probs, top_p)
                word = torch.multinomial(probs, 1).squeeze(1)
            if len(out) == max_len - 1:
                word = torch.where(done, word, torch.full_like(word, self.eos))  # always end
            gained = logp.gather(1, word.unsqueeze(1)).squeeze(1)
            total = total + torch.where(done, torch.zeros_like(gained), gained)
            out.append(torch.where(done, torch.full_like(word, self.pad), word))
            done = done | (word == self.eos)
            if bool(done.all()):
                break
        return torch.stack(out, 1), total
