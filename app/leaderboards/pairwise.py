"""Ratings from pairwise judgements: Bradley-Terry with ties (Davidson 1970), bootstrap
intervals over items, rank intervals and a win-rate matrix (issue 30; docs/statistics.md).

A judgement is one judge's verdict on two agents' attempts at the same item (a scenario):
``{"judge", "item", "a", "b", "winner": "a" | "b" | "tie"}``. Davidson's model gives each agent
a strength exp(theta) and the pair one tie parameter nu >= 0: with d = theta_a - theta_b,

    P(a wins) = exp(d/2) / D,  P(b wins) = exp(-d/2) / D,  P(tie) = nu / D,
    D = exp(d/2) + exp(-d/2) + nu,

so that, ties aside, P(a beats b) = 1 / (1 + exp(-d)) (Bradley-Terry), and two equally strong
agents tie with probability nu / (2 + nu). Without a tie in the data nu's estimate is 0 and
the model is Bradley-Terry.

The ratings are the maximum of the log-likelihood less ``PENALTY * sum(theta^2)`` (choix's
penalty, ``alpha``, for the same reason: an agent that won every comparison would otherwise
have an infinite rating; the penalty also centres the ratings on their mean, 0), found by
Newton's method with a backtracking line search, in (theta, log nu), where the objective is
convex (a log-sum-exp of linear functions plus linear terms). choix has Bradley-Terry but no
ties; arena-rank counts a tie as half a win of each and pins numpy and jax. The tests check
the fit against scipy.optimize on the likelihood written out and, without ties, against choix.

Intervals resample the items (a scenario's judgements, of every pair and judge, are correlated:
one hard scenario makes every agent fail) with replacement, ``n_boot`` times from
``numpy.random.default_rng(seed)``, and refit: 95% percentile intervals of each rating and of
each difference of two ratings; rank intervals from the refitted ratings with
``stats.rank_intervals``' conventions (``stats.rank_intervals_from_draws``). Under
``stats.MIN_RANK_UNITS`` items there is no interval and every rank interval is (1, k).

Length control (optional, off by default; LMArena's "style control", Li, Angelopoulos and
Chiang 2024): judges may prefer the longer of two attempts whatever its worth. With each
judgement's two lengths, d becomes theta_a - theta_b + gamma x, x being the normalised length
difference (len_a - len_b) / (len_a + len_b) divided by its root mean square over the
judgements (LMArena also centres it; we only scale, so that swapping the sides flips x exactly).
The ratings are then what is left once length is accounted for, and gamma (log-odds per root
mean square of x) says how much the judges favour length. gamma carries the same small penalty
as the ratings and is refitted on every resample.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from app.errors import InputError
from app.leaderboards.stats import MIN_RANK_UNITS, Estimate, rank_intervals_from_draws

__all__ = ["Judgement", "PairwiseRatings", "read_judgements", "pairwise_ratings", "win_matrix", "score"]

WINNERS = ("a", "b", "tie")
#: choix's ``alpha``: the weight of sum(theta^2) subtracted from the log-likelihood.
PENALTY = 1e-6
N_BOOT = 1000
METHOD = "Bradley-Terry with ties (Davidson), maximum penalised likelihood"
INTERVAL_METHOD = "bootstrap over items (percentile)"
TOO_FEW_ITEMS = f"too few items for an interval (under {MIN_RANK_UNITS})"
_MAX_NEWTON = 200
_BATCH = 250  # resamples fitted together (their Hessians: batch x (k+1)^2 floats)


@dataclass(frozen=True, slots=True)
class Judgement:
    """One line of a judgements file: which of agents a and b did better on the item."""

    judge: str
    item: str
    a: str
    b: str
    winner: str  # "a" | "b" | "tie"
    # The two attempts' lengths (an instruction's words, a continuation's steps), for length
    # control; None where the file gives none.
    a_length: float | None = None
    b_length: float | None = None


def _text(value: object, line: int, name: str) -> str:
    """An id as text whatever its JSON type (a number becomes its digits)."""
    if value is None or value == "":
        raise InputError("is missing", line=line, field=name)
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise InputError(f"must be a string or a number, not {type(value).__name__}", line=line, field=name)
    return value if isinstance(value, str) else json.dumps(value)


def _length(value: object, line: int, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise InputError(f"must be a positive number, not {json.dumps(value)}", line=line, field=name)
    return float(value)


def read_judgements(data: bytes | str) -> list[Judgement]:
    """Parse a JSONL judgements file (blank lines skipped, gzip or UTF-8 as every upload).
    InputError names the line and the field of the first bad one."""
    from app.textfiles import jsonl_objects

    out: list[Judgement] = []
    for n, obj in jsonl_objects(data):
        judge = _text(obj.get("judge"), n, "judge")
        item = _text(obj.get("item"), n, "item")
        a = _text(obj.get("a"), n, "a")
        b = _text(obj.get("b"), n, "b")
        if a == b:
            raise InputError(f"is {json.dumps(b)}, the same agent as a", line=n, field="b")
        winner = obj.get("winner")
        if winner not in WINNERS:
            raise InputError(f'must be "a", "b" or "tie", not {json.dumps(winner)}', line=n, field="winner")
        lengths = [_length(obj.get(f), n, f) for f in ("a_length", "b_length")]
        if (lengths[0] is None) != (lengths[1] is None):
            missing = "b_length" if lengths[1] is None else "a_length"
            raise InputError("is missing: give both lengths or neither", line=n, field=missing)
        out.append(Judgement(judge, item, a, b, str(winner), *lengths))
    if not out:
        raise InputError("the file holds no judgements")
    return out


# ---------------------------------------------------------------------------
# the fit


def _objective(
    theta: np.ndarray,
    phi: np.ndarray,
    gamma: np.ndarray,
    slots: tuple[np.ndarray, np.ndarray, np.ndarray],
    counts: np.ndarray,
    penalty: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per resample (rows): the penalised negative log-likelihood and the probabilities of
    the left agent winning, the right winning and a tie for every slot (columns)."""
    left, right, x = slots
    half = 0.5 * (theta[:, left] - theta[:, right] + gamma[:, None] * x[None, :])
    log_d = np.logaddexp(np.logaddexp(half, -half), phi[:, None])
    p_left, p_right = np.exp(half - log_d), np.exp(-half - log_d)
    p_tie = np.exp(phi[:, None] - log_d)
    w_left, w_right, ties = counts[..., 0], counts[..., 1], counts[..., 2]
    tie_term = ties * np.where(np.isfinite(phi), phi, 0.0)[:, None]  # no tie: nu = 0, and 0 log 0 = 0
    n = w_left + w_right + ties
    loglik = (w_left * half - w_right * half + tie_term - n * log_d).sum(axis=1)
    return -loglik + penalty * ((theta**2).sum(axis=1) + gamma**2), p_left, p_right, p_tie


def _scatter(rows: int, width: int, parts: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """A (rows, width) array of zeros plus, for each (columns, values) part, ``values[r, p]``
    added at ``[r, columns[p]]`` (repeated columns add up): np.add.at's sum, by np.bincount."""
    offsets = (np.arange(rows) * width)[:, None]
    index = np.concatenate([(offsets + cols[None, :]).ravel() for cols, _ in parts])
    weights = np.concatenate([values.ravel() for _, values in parts])
    return np.bincount(index, weights=weights, minlength=rows * width).reshape(rows, width)


def _fit(
    counts: np.ndarray, slots: tuple[np.ndarray, np.ndarray, np.ndarray], k: int, penalty: float, covariate: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Davidson's ratings (centred), nu and gamma for each resample: ``counts[r, p]`` holds
    slot p's (left wins, right wins, ties) in resample r, slot p being agents ``left[p] <
    right[p]`` at length covariate ``x[p]`` (all 0, and gamma 0, without length control).
    Damped Newton in (theta, log nu, gamma); nu is 0 where a resample has no tie, and infinite
    (the ratings 0) where it has nothing but ties."""
    left, right, x = slots
    b = counts.shape[0]
    ties = counts[..., 2].sum(axis=1)
    total = counts.sum(axis=(1, 2))
    some_ties = ties > 0
    only_ties = some_ties & (ties == total)
    theta = np.zeros((b, k))
    gamma = np.zeros(b)
    share = np.where(some_ties, ties / np.maximum(total, 1), 0.0)
    # Equal strengths tie with probability nu / (2 + nu): nu's start from the ties' share.
    with np.errstate(divide="ignore"):
        phi = np.where(some_ties & ~only_ties, np.log(2 * share / np.maximum(1 - share, 1e-300)), -np.inf)
    active = ~only_ties
    w_left, w_right, n_tie = counts[..., 0], counts[..., 1], counts[..., 2]
    n_pair = w_left + w_right + n_tie
    g = k + 1  # gamma's place, after the ratings and log nu
    size = k + 1 + int(covariate)
    for _ in range(_MAX_NEWTON):
        rows = np.flatnonzero(active)
        if rows.size == 0:
            break
        th, ph, ga, c = theta[rows], phi[rows], gamma[rows], counts[rows]
        f, pl, pr, pt = _objective(th, ph, ga, slots, c, penalty)
        n = n_pair[rows]
        g_d = 0.5 * (w_left[rows] - w_right[rows]) - 0.5 * n * (pl - pr)  # d loglik / d(theta_l - theta_r)
        q = n * (0.25 * (pl + pr) - 0.25 * (pl - pr) ** 2)  # - d2 loglik / d(theta_l - theta_r)^2
        cross = 0.5 * n * pt * (pl - pr)  # d2 loglik / d(theta_l - theta_r) d log nu
        m = rows.size
        grad = _scatter(m, size, [(left, -g_d), (right, g_d)])
        grad[:, :k] += 2 * penalty * th
        grad[:, k] = -(n_tie[rows] - n * pt).sum(axis=1)
        parts = [
            (left * size + left, q),
            (right * size + right, q),
            (left * size + right, -q),
            (right * size + left, -q),
            (left * size + k, -cross),
            (right * size + k, cross),
            (k * size + left, -cross),
            (k * size + right, cross),
        ]
        if covariate:  # d = theta_l - theta_r + gamma x: gamma's derivatives are x times d's
            parts += [
                (left * size + g, q * x),
                (right * size + g, -q * x),
                (g * size + left, q * x),
                (g * size + right, -q * x),
            ]
        hess = _scatter(m, size * size, parts).reshape(m, size, size)
        hess[:, k, k] = (n * pt * (1 - pt)).sum(axis=1)
        hess[:, k, k] = np.where(some_ties[rows], hess[:, k, k], 1.0)  # no tie: nu stays 0
        if covariate:
            grad[:, g] = -(g_d * x).sum(axis=1) + 2 * penalty * ga
            hess[:, g, g] = (q * x * x).sum(axis=1) + 2 * penalty
            hess[:, g, k] = hess[:, k, g] = np.where(some_ties[rows], -(cross * x).sum(axis=1), 0.0)
        # The likelihood does not see a common shift of the ratings, and the iterates stay
        # centred (where the penalty puts the optimum): adding 1 1^T to the ratings' block
        # leaves the step in the centred directions as it is and makes the system well posed
        # however small the penalty.
        hess[:, :k, :k] += 1.0 + 2 * penalty * np.eye(k)
        step = np.linalg.solve(hess, grad[..., None])[..., 0]
        step_g = step[:, g] if covariate else np.zeros(m)
        decrement = (grad * step).sum(axis=1)
        # Newton's decrement is about twice the distance to the minimum. Within the rounding of
        # the objective (a sum of terms of up to n log-probabilities each: about 1e-16 n), or
        # with a negligible step, the full step is taken (it squares the remaining error) and
        # the resample is done; otherwise a backtracking line search (Armijo) asks for a
        # decrease, and a resample where none is found is at its optimum to rounding.
        done = (decrement < 1e-12 * np.maximum(1.0, total[rows])) | (np.abs(step).max(axis=1) < 1e-12)
        t = np.ones(rows.size)
        accepted = done.copy()
        new_th = np.where(done[:, None], th - step[:, :k], th)
        new_ph = np.where(done & some_ties[rows], ph - step[:, k], ph)
        new_ga = np.where(done, ga - step_g, ga)
        for _ in range(60):
            trying = ~accepted
            if not trying.any():
                break
            cand_th = th - t[:, None] * step[:, :k]
            cand_ph = np.where(some_ties[rows], ph - t * step[:, k], -np.inf)
            cand_ga = ga - t * step_g
            f_new = _objective(cand_th, cand_ph, cand_ga, slots, c, penalty)[0]
            ok = trying & (f_new <= f - 1e-4 * t * decrement) & (f_new < f)
            new_th[ok], new_ph[ok], new_ga[ok] = cand_th[ok], cand_ph[ok], cand_ga[ok]
            accepted |= ok
            t = np.where(accepted, t, 0.5 * t)
        stalled = ~accepted
        theta[rows] = new_th - new_th.mean(axis=1, keepdims=True)
        phi[rows] = new_ph
        gamma[rows] = new_ga
        active[rows[done | stalled]] = False
    nu = np.where(only_ties, np.inf, np.exp(phi))
    return theta, nu, gamma


# ---------------------------------------------------------------------------
# the result


@dataclass
class PairwiseRatings:
    """Davidson ratings of agents from pairwise judgements, with their bootstrap draws."""

    agents: list[str]
    rating: np.ndarray  # (k,), centred on the agents' mean
    nu: float  # the tie parameter (inf: every judgement a tie)
    n: list[int]  # judgements of each agent
    items: int
    judgements: int
    judges: int
    n_boot: int
    seed: int
    draws: np.ndarray | None = None  # (n_boot, k) refitted ratings; None under MIN_RANK_UNITS items
    nu_draws: np.ndarray | None = None
    ranks: list[tuple[int, int]] = field(default_factory=list)  # 95% (best, worst)
    # Length control (module docstring): gamma, its draws, and the root mean square of the
    # normalised length difference that x is divided by; gamma None without it.
    gamma: float | None = None
    gamma_draws: np.ndarray | None = None
    length_scale: float | None = None

    def index(self, agent: str) -> int:
        return self.agents.index(agent)

    def rating_estimate(self, agent: str) -> Estimate:
        j = self.index(agent)
        low, high = self._percentiles(None if self.draws is None else self.draws[:, j])
        return Estimate(self.n[j], float(self.rating[j]), low, high, self._method())

    def difference(self, a: str, b: str) -> Estimate:
        """Rating of a less rating of b (log odds of a beating b, ties aside), with its 95%
        interval from the same resamples; ``n`` counts the items."""
        i, j = self.index(a), self.index(b)
        low, high = self._percentiles(None if self.draws is None else self.draws[:, i] - self.draws[:, j])
        return Estimate(self.items, float(self.rating[i] - self.rating[j]), low, high, self._method())

    def tie_share(self) -> Estimate:
        """nu / (2 + nu): how often two equally strong agents tie."""
        low, high = self._percentiles(None if self.nu_draws is None else _tie_share(self.nu_draws))
        return Estimate(self.judgements, float(_tie_share(np.array([self.nu]))[0]), low, high, self._method())

    def length_effect(self) -> Estimate | None:
        """gamma: the log-odds a judge adds for one root mean square of normalised length
        difference in an attempt's favour; None without length control."""
        if self.gamma is None:
            return None
        low, high = self._percentiles(self.gamma_draws)
        return Estimate(self.judgements, self.gamma, low, high, self._method())

    def _method(self) -> str:
        return TOO_FEW_ITEMS if self.draws is None else INTERVAL_METHOD

    @staticmethod
    def _percentiles(values: np.ndarray | None) -> tuple[float, float]:
        if values is None:
            return math.nan, math.nan
        low, high = np.percentile(values, [2.5, 97.5])
        return float(low), float(high)

    def point_ranks(self) -> list[int]:
        """Rank 1: the highest rating; equal ratings (within 1e-12) share the better rank."""
        tol = 1e-12 * max(1.0, float(np.abs(self.rating).max()))
        return [1 + int((self.rating > r + tol).sum()) for r in self.rating]


def _tie_share(nu: np.ndarray) -> np.ndarray:
    return np.where(np.isinf(nu), 1.0, nu / (2 + np.where(np.isinf(nu), 0.0, nu)))


def _normalised_length(j: Judgement) -> float:
    """(len_a - len_b) / (len_a + len_b), in [-1, 1]; 0 when both are empty (an STS
    continuation may have no step of its own: equal lengths)."""
    assert j.a_length is not None and j.b_length is not None
    total = j.a_length + j.b_length
    return (j.a_length - j.b_length) / total if total else 0.0


def _slot_counts(
    judgements: Sequence[Judgement], scale: float | None
) -> tuple[list[str], list[str], tuple[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
    """Agents (sorted), items (first seen order), the slots (left < right, and with length
    control the covariate x seen from the left agent: one slot per pair and value of x) and
    per item and slot the counts (left wins, right wins, ties)."""
    agents = sorted({j.a for j in judgements} | {j.b for j in judgements})
    col = {a: i for i, a in enumerate(agents)}
    items = list(dict.fromkeys(j.item for j in judgements))
    row = {it: i for i, it in enumerate(items)}

    def slot_of(j: Judgement) -> tuple[int, int, float]:
        a, b = col[j.a], col[j.b]
        x = 0.0 if scale is None else _normalised_length(j) / scale
        return (a, b, x) if a < b else (b, a, -x)

    keys = sorted({slot_of(j) for j in judgements})
    slot = {p: i for i, p in enumerate(keys)}
    counts = np.zeros((len(items), len(keys), 3))
    for j in judgements:
        p = slot[slot_of(j)]
        if j.winner == "tie":
            counts[row[j.item], p, 2] += 1
        else:
            left_won = (j.winner == "a") == (col[j.a] < col[j.b])
            counts[row[j.item], p, 0 if left_won else 1] += 1
    left = np.array([p[0] for p in keys], dtype=np.int64)
    right = np.array([p[1] for p in keys], dtype=np.int64)
    x = np.array([p[2] for p in keys], dtype=float)
    return agents, items, (left, right, x), counts


def _groups(agents: list[str], left: np.ndarray, right: np.ndarray) -> list[list[str]]:
    """The agents in groups linked by comparisons (union-find)."""
    parent = list(range(len(agents)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a, b in zip(left.tolist(), right.tolist()):
        parent[root(a)] = root(b)
    found: dict[int, list[str]] = defaultdict(list)
    for i, name in enumerate(agents):
        found[root(i)].append(name)
    return list(found.values())


def length_scale(judgements: Sequence[Judgement]) -> float:
    """The root mean square of the normalised length differences that length control divides
    them by; InputError where a judgement has no lengths or every pair's are equal."""
    missing = sum(j.a_length is None or j.b_length is None for j in judgements)
    if missing:
        raise InputError(
            f"controlling for length needs both lengths of every judgement; {missing} of {len(judgements)} have none"
        )
    rms = math.sqrt(sum(_normalised_length(j) ** 2 for j in judgements) / len(judgements))
    if rms == 0:
        raise InputError("controlling for length needs lengths that differ: every judged pair's are equal")
    return rms


def pairwise_ratings(
    judgements: Sequence[Judgement],
    *,
    n_boot: int = N_BOOT,
    seed: int = 0,
    penalty: float = PENALTY,
    control_length: bool = False,
) -> PairwiseRatings:
    """Davidson ratings with bootstrap intervals over items (module docstring), controlled for
    the two attempts' lengths with ``control_length``. InputError when no judgement is given,
    the agents fall into groups never compared with each other (their ratings would share no
    scale), or length control lacks lengths."""
    if not judgements:
        raise InputError("no judgements")
    if n_boot < 1:
        raise ValueError("n_boot must be at least 1")
    scale = length_scale(judgements) if control_length else None
    agents, items, slots, per_item = _slot_counts(judgements, scale)
    left, right, _ = slots
    if len(groups := _groups(agents, left, right)) > 1:
        shown = "; ".join(", ".join(g[:5]) + (", ..." if len(g) > 5 else "") for g in groups[:4])
        raise InputError(
            f"the agents fall into {len(groups)} groups that no judgement compares with each other "
            f"({shown}): their ratings would share no scale"
        )
    k = len(agents)
    theta, nu, gamma = _fit(per_item.sum(axis=0)[None], slots, k, penalty, control_length)
    seen = Counter(a for j in judgements for a in (j.a, j.b))
    result = PairwiseRatings(
        agents=agents,
        rating=theta[0],
        nu=float(nu[0]),
        n=[seen[a] for a in agents],
        items=len(items),
        judgements=len(judgements),
        judges=len({j.judge for j in judgements}),
        n_boot=n_boot,
        seed=seed,
        gamma=float(gamma[0]) if control_length else None,
        length_scale=scale,
    )
    if len(items) < MIN_RANK_UNITS:
        result.ranks = [(1, k)] * k
        return result
    rng = np.random.default_rng(seed)
    flat = per_item.reshape(len(items), -1)
    draws, nu_draws, gamma_draws = np.empty((n_boot, k)), np.empty(n_boot), np.empty(n_boot)
    for start in range(0, n_boot, _BATCH):
        stop = min(n_boot, start + _BATCH)
        picks = rng.integers(0, len(items), size=(stop - start, len(items)))
        weights = np.zeros((stop - start, len(items)))
        np.add.at(weights, (np.arange(stop - start)[:, None], picks), 1.0)
        counts = (weights @ flat).reshape(stop - start, left.size, 3)
        draws[start:stop], nu_draws[start:stop], gamma_draws[start:stop] = _fit(
            counts, slots, k, penalty, control_length
        )
    result.draws, result.nu_draws = draws, nu_draws
    if control_length:
        result.gamma_draws = gamma_draws
    result.ranks = rank_intervals_from_draws(result.rating, draws)
    return result


def win_matrix(judgements: Iterable[Judgement]) -> dict[str, dict[str, dict[str, Any]]]:
    """``[a][b]``: a's wins, ties and losses against b, ``n`` judgements of the two and a's
    share ``(wins + ties / 2) / n`` (None where they were never compared)."""
    tally: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0])
    names: set[str] = set()
    for j in judgements:
        names |= {j.a, j.b}
        outcome = {"a": 0, "tie": 1, "b": 2}[j.winner]
        tally[(j.a, j.b)][outcome] += 1
        tally[(j.b, j.a)][2 - outcome] += 1
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for a in sorted(names):
        out[a] = {}
        for b in sorted(names - {a}):
            wins, ties, losses = tally.get((a, b), [0, 0, 0])
            n = wins + ties + losses
            share = (wins + ties / 2) / n if n else None
            out[a][b] = {"share": share, "n": n, "wins": wins, "ties": ties, "losses": losses}
    return out


def _none_if_nan(x: float) -> float | None:
    return None if math.isnan(x) or math.isinf(x) else x


def _length_cell(fit: PairwiseRatings) -> dict[str, Any] | None:
    effect = fit.length_effect()
    if effect is None:
        return None
    return {
        "coefficient": effect.mean,
        "low": _none_if_nan(effect.low),
        "high": _none_if_nan(effect.high),
        "scale": fit.length_scale,
        "covariate": "(len_a - len_b) / (len_a + len_b), divided by scale (its root mean square)",
    }


def score(
    judgements: Sequence[Judgement], *, n_boot: int = N_BOOT, seed: int = 0, control_length: bool = False
) -> dict[str, Any]:
    """What `proctor pairwise score --json` prints: per agent (best first) ``{rating, low,
    high, rank, rank_low, rank_high, n}``, the win-rate matrix, the ties and the counts; with
    ``control_length`` the ratings are controlled for length and ``length`` says by how much
    (None without)."""
    fit = pairwise_ratings(judgements, n_boot=n_boot, seed=seed, control_length=control_length)
    ranks = fit.point_ranks()
    order = sorted(range(len(fit.agents)), key=lambda j: (ranks[j], fit.agents[j]))
    agents: dict[str, dict[str, Any]] = {}
    for j in order:
        name = fit.agents[j]
        e = fit.rating_estimate(name)
        agents[name] = {
            "rating": e.mean,
            "low": _none_if_nan(e.low),
            "high": _none_if_nan(e.high),
            "rank": ranks[j],
            "rank_low": fit.ranks[j][0],
            "rank_high": fit.ranks[j][1],
            "n": fit.n[j],
        }
    tie = fit.tie_share()
    matrix = win_matrix(judgements)
    return {
        "agents": agents,
        "win_matrix": {a: matrix[a] for a in agents},
        "ties": {
            "nu": _none_if_nan(fit.nu),
            "share_if_equal": tie.mean,
            "low": _none_if_nan(tie.low),
            "high": _none_if_nan(tie.high),
            "observed": sum(j.winner == "tie" for j in judgements) / len(judgements),
        },
        "length": _length_cell(fit),
        "judgements": fit.judgements,
        "items": fit.items,
        "judges": fit.judges,
        "method": METHOD,
        "interval": {"method": fit._method(), "n_boot": n_boot, "seed": seed, "unit": "item"},
    }
