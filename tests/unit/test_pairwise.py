"""Davidson ratings from pairwise judgements (app/leaderboards/pairwise.py; issue 30): the fit
against closed forms, scipy on the likelihood written out and choix; the win-rate matrix by
hand; recovery of known strengths and the coverage of the bootstrap intervals in simulation;
the judgements file's refusals."""

from __future__ import annotations

import json
import math

import choix
import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.stats import spearmanr

from app.errors import InputError
from app.leaderboards import pairwise, stats
from app.leaderboards.pairwise import PENALTY, Judgement, pairwise_ratings, read_judgements, score, win_matrix
from tests.conftest import untraced


def judgements(*rows: tuple[str, str, str, str]) -> list[Judgement]:
    """(item, a, b, winner) rows, one judge."""
    return [Judgement("j1", item, a, b, winner) for item, a, b, winner in rows]


def davidson_by_scipy(js: list[Judgement], agents: list[str]) -> tuple[np.ndarray, float]:
    """Davidson's penalised maximum likelihood written out in the paper's form, P(i beats j) =
    pi_i / (pi_i + pi_j + nu sqrt(pi_i pi_j)), solved by scipy's BFGS."""
    index = {a: i for i, a in enumerate(agents)}
    k = len(agents)

    def nll(x: np.ndarray) -> float:
        pi, nu = np.exp(x[:k]), math.exp(x[k])
        total = PENALTY * float(np.sum(x[:k] ** 2))
        for j in js:
            pa, pb = pi[index[j.a]], pi[index[j.b]]
            denominator = pa + pb + nu * math.sqrt(pa * pb)
            top = {"a": pa, "b": pb, "tie": nu * math.sqrt(pa * pb)}[j.winner]
            total -= math.log(top / denominator)
        return total

    x = minimize(nll, np.zeros(k + 1), method="BFGS", options={"gtol": 1e-11}).x
    return x[:k] - x[:k].mean(), math.exp(x[k])


# ---------------------------------------------------------------------------
# hand-worked cases


def test_two_agents_have_the_closed_form_of_a_saturated_model():
    # Two agents: the model's three probabilities match the observed shares exactly, so
    # exp(d) = wins / losses and nu = ties / sqrt(wins * losses): 6 wins, 2 losses, 3 ties
    # give d = ln 3 and nu = 3 / sqrt(12).
    rows = [(f"s{i}", "A", "B", "a") for i in range(6)]
    rows += [(f"s{i}", "B", "A", "a") for i in range(6, 8)]  # B listed first, B wins
    rows += [(f"s{i}", "A", "B", "tie") for i in range(8, 11)]
    fit = pairwise_ratings(judgements(*rows), n_boot=50)
    assert fit.agents == ["A", "B"]
    assert fit.rating[0] - fit.rating[1] == pytest.approx(math.log(3), abs=1e-6)
    assert fit.rating.sum() == pytest.approx(0, abs=1e-12)  # centred on the agents' mean
    assert fit.nu == pytest.approx(3 / math.sqrt(12), abs=1e-6)
    assert fit.tie_share().mean == pytest.approx(fit.nu / (2 + fit.nu), abs=1e-12)
    assert fit.n == [11, 11] and fit.items == 11 and fit.judgements == 11 and fit.judges == 1


def test_a_cycle_rates_everyone_equal_and_nu_matches_the_tie_share():
    # A beats B twice and loses once, B the same over C, C the same over A, and 3 ties: by
    # symmetry every rating is 0, and then P(tie) = nu / (2 + nu) = 3 / 12, so nu = 2/3.
    rows = []
    for i, (x, y) in enumerate([("A", "B"), ("B", "C"), ("C", "A")]):
        rows += [(f"{i}-1", x, y, "a"), (f"{i}-2", x, y, "a"), (f"{i}-3", x, y, "b"), (f"{i}-4", x, y, "tie")]
    fit = pairwise_ratings(judgements(*rows), n_boot=50)
    assert np.abs(fit.rating).max() < 1e-9
    assert fit.nu == pytest.approx(2 / 3, abs=1e-9)
    assert fit.point_ranks() == [1, 1, 1]  # equal ratings share the best rank


def test_three_agents_match_scipy_on_the_likelihood_written_out():
    js = judgements(
        ("s1", "A", "B", "a"),
        ("s1", "B", "C", "a"),
        ("s1", "A", "C", "tie"),
        ("s2", "A", "B", "tie"),
        ("s2", "C", "B", "b"),
        ("s2", "C", "A", "a"),
        ("s3", "B", "A", "b"),
        ("s3", "B", "C", "tie"),
        ("s3", "A", "C", "a"),
        ("s4", "A", "B", "b"),
        ("s4", "C", "B", "a"),
    )
    fit = pairwise_ratings(js, n_boot=50)
    want, nu = davidson_by_scipy(js, ["A", "B", "C"])
    assert fit.rating == pytest.approx(want, abs=1e-6)
    assert fit.nu == pytest.approx(nu, abs=1e-6)
    # A beats B 2-1 with a tie, B beats C the same, A and C split 1-1 with a tie: by that
    # symmetry B sits at 0, halfway, and the rest is the maximum of
    # 2 (delta / 2 + ln nu - 4 ln(2 cosh(delta / 2) + nu)) + ln nu - 3 ln(2 cosh(delta) + nu).
    assert fit.rating.tolist() == pytest.approx([0.2792509, 0.0, -0.2792509], abs=1e-6)
    assert fit.nu == pytest.approx(0.7632613, abs=1e-6)


def test_without_ties_it_is_choix_bradley_terry():
    rng = np.random.default_rng(5)
    agents = ["A", "B", "C", "D"]
    rows, data = [], []
    for i in range(40):
        x, y = rng.choice(4, size=2, replace=False)
        won = bool(rng.random() < 1 / (1 + math.exp(-(x - y) / 2)))
        rows.append((f"s{i}", agents[x], agents[y], "a" if won else "b"))
        data.append((x, y) if won else (y, x))
    fit = pairwise_ratings(judgements(*rows), n_boot=50)
    want = choix.opt_pairwise(4, data, alpha=PENALTY)
    assert fit.agents == agents
    assert fit.rating == pytest.approx(want - want.mean(), abs=1e-6)
    assert fit.nu == 0.0 and fit.tie_share().mean == 0.0


def test_an_agent_that_won_everything_gets_a_finite_first_rating():
    rows = [(f"s{i}", "A", other, "a") for i in range(6) for other in ("B", "C")]
    rows += [(f"s{i}", "B", "C", "a" if i % 2 else "b") for i in range(6)]
    out = score(judgements(*rows), n_boot=200)
    a = out["agents"]["A"]
    assert list(out["agents"])[0] == "A" and a["rank"] == 1 and (a["rank_low"], a["rank_high"]) == (1, 1)
    assert math.isfinite(a["rating"]) and a["rating"] > 5  # held by the penalty, not infinite
    assert out["agents"]["B"]["rating"] == pytest.approx(out["agents"]["C"]["rating"], abs=1e-6)


def test_the_win_matrix_counts_ties_as_half():
    js = judgements(
        ("s1", "A", "B", "a"),
        ("s1", "B", "A", "tie"),
        ("s2", "B", "A", "a"),
        ("s2", "A", "C", "b"),
        ("s3", "A", "B", "a"),
    )
    m = win_matrix(js)
    assert m["A"]["B"] == {"share": (2 + 0.5) / 4, "n": 4, "wins": 2, "ties": 1, "losses": 1}
    assert m["B"]["A"] == {"share": (1 + 0.5) / 4, "n": 4, "wins": 1, "ties": 1, "losses": 2}
    assert m["C"]["A"] == {"share": 1.0, "n": 1, "wins": 1, "ties": 0, "losses": 0}
    assert m["B"]["C"] == {"share": None, "n": 0, "wins": 0, "ties": 0, "losses": 0}
    assert sorted(m) == ["A", "B", "C"] and "A" not in m["A"]


def test_the_score_reports_each_agent_best_first_with_its_intervals():
    rng = np.random.default_rng(0)
    rows = []
    strength = {"A": 2.0, "B": 0.0, "C": -2.0}
    for i in range(30):
        for x, y in [("A", "B"), ("B", "C"), ("A", "C")]:
            d = strength[x] - strength[y]
            p = np.array([math.exp(d / 2), math.exp(-d / 2), 0.5])
            rows.append((f"s{i}", x, y, ["a", "b", "tie"][rng.choice(3, p=p / p.sum())]))
    js = judgements(*rows)
    out = score(js, n_boot=300, seed=4)
    fit = pairwise_ratings(js, n_boot=300, seed=4)
    assert list(out["agents"]) == ["A", "B", "C"]
    for name, a in out["agents"].items():
        e = fit.rating_estimate(name)
        assert (a["rating"], a["low"], a["high"], a["n"]) == (e.mean, e.low, e.high, 60)
        assert a["low"] < a["rating"] < a["high"]
    assert [(a["rank"], a["rank_low"], a["rank_high"]) for a in out["agents"].values()] == [
        (1, 1, 1),
        (2, 2, 2),
        (3, 3, 3),
    ]
    assert out["interval"] == {"method": pairwise.INTERVAL_METHOD, "n_boot": 300, "seed": 4, "unit": "item"}
    assert (out["judgements"], out["items"], out["judges"]) == (90, 30, 1)
    assert out["ties"]["observed"] == sum(r[3] == "tie" for r in rows) / 90
    assert out["ties"]["low"] < out["ties"]["share_if_equal"] < out["ties"]["high"]
    assert score(js, n_boot=300, seed=4) == out  # the seed fixes the resamples
    json.dumps(out, allow_nan=False)  # no NaN or infinity reaches the JSON


def test_the_resamples_are_items_not_judgements():
    # Every judgement of an item goes with it: an item judged 10 times the same way moves the
    # ratings as a block. With 5 items (4 of them one-sided) some resamples hold no win of B's,
    # which a bootstrap over single judgements (50 of them) would almost never draw.
    rows = [(f"s{i}", "A", "B", "a") for i in range(4) for _ in range(10)]
    rows += [("s4", "A", "B", "b")] * 10
    fit = pairwise_ratings(judgements(*rows), n_boot=400, seed=1)
    assert fit.draws is not None
    diffs = fit.draws[:, 0] - fit.draws[:, 1]
    # P(s4 not drawn) = (4/5)^5 = 0.328: then B never wins and the penalty alone holds A.
    assert 0.25 < float(np.mean(diffs > 5)) < 0.41


def test_under_five_items_there_is_no_interval():
    js = judgements(("s1", "A", "B", "a"), ("s2", "B", "C", "tie"), ("s3", "A", "C", "a"), ("s4", "A", "B", "b"))
    out = score(js)
    for a in out["agents"].values():
        assert a["low"] is None and a["high"] is None and (a["rank_low"], a["rank_high"]) == (1, 3)
    assert out["interval"]["method"] == pairwise.TOO_FEW_ITEMS
    assert out["ties"]["low"] is None


def test_rank_intervals_from_draws_follow_rank_intervals_conventions():
    draws = np.array([[3.0, 2.0, 1.0]] * 97 + [[1.0, 2.0, 3.0]] * 3)
    assert stats.rank_intervals_from_draws([3.0, 2.0, 1.0], draws) == [(1, 3), (2, 2), (1, 3)]
    # a tie shares every rank of it, and an interval always holds the observed ranks
    assert stats.rank_intervals_from_draws([1.0, 1.0, 0.0], np.array([[2.0, 1.0, 0.0]] * 10)) == [
        (1, 2),
        (1, 2),
        (3, 3),
    ]
    with pytest.raises(ValueError, match="draws must be"):
        stats.rank_intervals_from_draws([1.0, 2.0], np.zeros((5, 3)))
    with pytest.raises(ValueError, match="finite"):
        stats.rank_intervals_from_draws([1.0, 2.0], np.array([[np.inf, 0.0]]))


# ---------------------------------------------------------------------------
# simulation: known strengths


def simulate(rng: np.random.Generator, theta: np.ndarray, nu: float, items: int) -> list[Judgement]:
    """Every pair of agents judged once per item under Davidson's model, sides at random."""
    k = len(theta)
    pairs = np.array([(x, y) for x in range(k) for y in range(x + 1, k)] * items)
    swap = rng.random(len(pairs)) < 0.5
    a, b = np.where(swap, pairs[:, 1], pairs[:, 0]), np.where(swap, pairs[:, 0], pairs[:, 1])
    half = (theta[a] - theta[b]) / 2
    denominator = np.exp(half) + np.exp(-half) + nu
    u = rng.random(len(pairs))
    p_a = np.exp(half) / denominator
    outcome = np.where(u < p_a, "a", np.where(u < p_a + np.exp(-half) / denominator, "b", "tie"))
    per_item = len(pairs) // items
    return [
        Judgement(f"j{(i // per_item) % 3}", f"s{i // per_item}", f"A{x}", f"A{y}", str(w))
        for i, (x, y, w) in enumerate(zip(a, b, outcome))
    ]


THETA = np.array([-1.2, -0.6, -0.2, 0.2, 0.5, 1.3])
NU = 0.6


def test_the_ratings_recover_the_known_order():
    for seed in range(5):
        rng = np.random.default_rng(seed)
        js = simulate(rng, THETA, NU, items=25)
        fit = pairwise_ratings(js, n_boot=100, seed=seed)
        truth = THETA[[int(a[1:]) for a in fit.agents]]
        assert spearmanr(fit.rating, truth).statistic > 0.9
        assert fit.nu == pytest.approx(NU, abs=0.25)


def test_the_intervals_of_rating_differences_cover_the_truth():
    # 120 studies of 6 agents, 20 items, every pair once per item (300 judgements); each
    # study's 15 differences against the truth: 1,800 intervals in all.
    covered, total = 0, 0
    with untraced():  # the fits; their differences are read below, traced
        fits = [
            pairwise_ratings(simulate(np.random.default_rng(1000 + seed), THETA, NU, items=20), n_boot=200, seed=seed)
            for seed in range(120)
        ]
    for fit in fits:
        for x in range(6):
            for y in range(x + 1, 6):
                e = fit.difference(f"A{x}", f"A{y}")
                covered += e.low <= THETA[x] - THETA[y] <= e.high
                total += 1
    assert 0.90 <= covered / total <= 0.99, covered / total


# ---------------------------------------------------------------------------
# the file


def lines(*objs: object) -> str:
    return "\n".join(o if isinstance(o, str) else json.dumps(o) for o in objs) + "\n"


GOOD = {"judge": "w1", "item": "s1", "a": "A", "b": "B", "winner": "a"}


def test_a_judgements_file_reads_ids_as_text():
    got = read_judgements(lines(GOOD, "", {**GOOD, "item": 7, "a": 3, "winner": "tie"}))
    assert got == [Judgement("w1", "s1", "A", "B", "a"), Judgement("w1", "7", "3", "B", "tie")]


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({**GOOD, "winner": "A"}, 'line 2, field \'winner\': must be "a", "b" or "tie", not "A"'),
        ({k: v for k, v in GOOD.items() if k != "judge"}, "line 2, field 'judge': is missing"),
        ({**GOOD, "item": ""}, "line 2, field 'item': is missing"),
        ({**GOOD, "a": ["A"]}, "line 2, field 'a': must be a string or a number, not list"),
        ({**GOOD, "b": True}, "line 2, field 'b': must be a string or a number, not bool"),
        ({**GOOD, "b": "A"}, "line 2, field 'b': is \"A\", the same agent as a"),
        ("[1, 2]", "line 2: each line must be a JSON object"),
        ('{"judge": ', "line 2: not valid JSON"),
    ],
)
def test_a_bad_line_is_named_with_its_field(bad, message):
    with pytest.raises(InputError) as caught:
        read_judgements(lines(GOOD, bad))
    assert str(caught.value).startswith(message)


def test_an_empty_file_and_unlinked_groups_are_refused():
    with pytest.raises(InputError, match="the file holds no judgements"):
        read_judgements("\n\n")
    js = judgements(("s1", "A", "B", "a"), ("s2", "C", "D", "a"), ("s3", "A", "E", "b"))
    with pytest.raises(InputError, match=r"2 groups that no judgement compares .*\(A, B, E; C, D\)"):
        pairwise_ratings(js)


# ---------------------------------------------------------------------------
# length control (LMArena's style control)


def with_lengths(item: str, a: str, b: str, winner: str, a_length: float, b_length: float) -> Judgement:
    return Judgement("j1", item, a, b, winner, a_length, b_length)


def test_length_control_by_hand_on_a_saturated_model():
    # A is longer (30 words against 10: normalised difference +0.5) in 5 judgements, of which
    # it wins 4; shorter (-0.5) in 2, of which it wins 1. The root mean square of +-0.5 is 0.5,
    # so x = +-1, and with two agents and two values of x the model is saturated:
    #   d + gamma = ln(4 / 1),  d - gamma = ln(1 / 1)  =>  d = gamma = ln 2,
    # ratings +-ln(2) / 2. Without control A won 5 of 7: d = ln(5 / 2).
    js = [with_lengths(f"s{i}", "A", "B", w, 30, 10) for i, w in enumerate("aaaab")]
    js += [with_lengths("s5", "B", "A", "a", 30, 10), with_lengths("s6", "A", "B", "a", 10, 30)]
    plain = pairwise_ratings(js, n_boot=50)
    assert plain.rating[0] - plain.rating[1] == pytest.approx(math.log(5 / 2), abs=1e-5)
    assert plain.gamma is None and plain.length_effect() is None
    fit = pairwise_ratings(js, n_boot=50, control_length=True)
    assert fit.length_scale == pytest.approx(0.5)
    assert fit.rating[0] == pytest.approx(math.log(2) / 2, abs=1e-5)
    assert fit.rating[1] == pytest.approx(-math.log(2) / 2, abs=1e-5)
    assert fit.gamma == pytest.approx(math.log(2), abs=1e-5)
    out = score(js, n_boot=50, control_length=True)
    assert out["length"]["coefficient"] == pytest.approx(math.log(2), abs=1e-5)
    assert out["length"]["scale"] == pytest.approx(0.5)
    assert score(js, n_boot=50)["length"] is None
    # A pair of empty attempts (an STS continuation with no step of its own on both sides) is
    # a pair of equal lengths, x = 0: the fit is unchanged but for that judgement's outcome.
    empty = js + [with_lengths("s7", "A", "B", "tie", 0, 0)]
    fit = pairwise_ratings(empty, n_boot=50, control_length=True)
    assert fit.gamma is not None and math.isfinite(fit.gamma)


def test_length_control_with_ties_matches_scipy():
    rng = np.random.default_rng(7)
    names = ["A", "B", "C"]
    js = []
    for i in range(40):
        a, b = rng.choice(3, size=2, replace=False)
        js.append(
            Judgement("j", f"s{i % 8}", names[a], names[b], str(rng.choice(["a", "b", "tie"])), *rng.uniform(5, 50, 2))
        )
    fit = pairwise_ratings(js, n_boot=20, control_length=True)
    scale = fit.length_scale
    index = {a: i for i, a in enumerate(fit.agents)}

    def nll(v: np.ndarray) -> float:
        theta, phi, gamma = v[:3], v[3], v[4]
        total = PENALTY * float(np.sum(theta**2) + gamma**2)
        for j in js:
            x = (j.a_length - j.b_length) / (j.a_length + j.b_length) / scale
            half = 0.5 * (theta[index[j.a]] - theta[index[j.b]] + gamma * x)
            log_d = np.logaddexp(np.logaddexp(half, -half), phi)
            total -= {"a": half, "b": -half, "tie": phi}[j.winner] - log_d
        return total

    v = minimize(nll, np.zeros(5), method="BFGS", options={"gtol": 1e-10}).x
    assert fit.rating == pytest.approx(v[:3] - v[:3].mean(), abs=1e-4)
    assert fit.nu == pytest.approx(math.exp(v[3]), rel=1e-4)
    assert fit.gamma == pytest.approx(v[4], abs=1e-4)


def simulate_length_bias(rng: np.random.Generator, items: int, gamma: float) -> list[Judgement]:
    """Every pair of the six agents once per item; the weaker an agent, the longer it writes
    (mean 40 words for the weakest down to 15 for the strongest, +-40% per attempt), and the
    judge adds gamma times the normalised length difference to the log-odds (no ties)."""
    k = len(THETA)
    mean_length = np.linspace(40, 15, k)
    out = []
    for item in range(items):
        for x in range(k):
            for y in range(x + 1, k):
                a, b = (x, y) if rng.random() < 0.5 else (y, x)
                la, lb = mean_length[[a, b]] * rng.uniform(0.6, 1.4, 2)
                d = THETA[a] - THETA[b] + gamma * (la - lb) / (la + lb)
                winner = "a" if rng.random() < 1 / (1 + math.exp(-d)) else "b"
                out.append(Judgement("j", f"s{item}", f"A{a}", f"A{b}", winner, la, lb))
    return out


def test_a_judge_who_prefers_length_is_corrected_only_with_the_covariate():
    # A strong preference for length (8 log-odds across the whole range of the normalised
    # difference) outweighs the agents' real differences: without control the ranking comes
    # out nearly reversed; with it the known strengths come back, inside their intervals.
    for seed in range(3):
        js = simulate_length_bias(np.random.default_rng(seed), items=60, gamma=8.0)
        plain = pairwise_ratings(js, n_boot=200, seed=seed)
        controlled = pairwise_ratings(js, n_boot=200, seed=seed, control_length=True)
        truth = THETA[[int(a[1:]) for a in controlled.agents]]
        assert spearmanr(plain.rating, truth).statistic < 0
        assert spearmanr(controlled.rating, truth).statistic == pytest.approx(1.0)
        assert np.abs(controlled.rating - truth).max() < 0.4
        assert np.abs(plain.rating - truth).max() > 1.0
        inside = [
            controlled.rating_estimate(a).low <= t <= controlled.rating_estimate(a).high
            for a, t in zip(controlled.agents, truth)
        ]
        assert sum(inside) >= 5
        effect = controlled.length_effect()
        assert effect is not None and effect.low <= 8.0 * controlled.length_scale <= effect.high


def test_length_control_refuses_judgements_without_lengths():
    js = [with_lengths("s1", "A", "B", "a", 10, 20), Judgement("j1", "s2", "A", "B", "b")]
    with pytest.raises(InputError, match="1 of 2 have none"):
        pairwise_ratings(js, control_length=True)
    same = [with_lengths("s1", "A", "B", "a", 10, 10)]
    with pytest.raises(InputError, match="lengths that differ"):
        pairwise_ratings(same, control_length=True)


def test_a_judgements_file_reads_lengths():
    js = read_judgements(lines({**GOOD, "a_length": 12, "b_length": 7.5}, GOOD))
    assert (js[0].a_length, js[0].b_length) == (12.0, 7.5)
    assert js[1].a_length is None
    with pytest.raises(InputError, match="line 1.*b_length"):
        read_judgements(lines({**GOOD, "a_length": 12}))
    with pytest.raises(InputError, match="line 1.*a_length.*positive"):
        read_judgements(lines({**GOOD, "a_length": -1, "b_length": 3}))
