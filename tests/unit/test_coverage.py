"""Coverage of ``stats.mean_interval``: the simulation test DESIGN.md section 7 asks for.

Every cell of bench/coverage.py's table (the same study generator, fewer studies): binary
scores p = 0.5, 0.9, 0.97, Beta(2, 2), Beta(8, 1) and an F1-like score (60% exactly 1, 40%
Uniform(0.5, 1)), at n = 10, 20, 50, 200 items, without clusters and in clusters of 3-5 items
(intra-cluster correlation 1/4).  Unclustered binary cells are exact (summed over the
binomial), the others simulated with a fixed seed, REPS studies per cell, calling
``mean_interval`` itself on each study (about 5 s in all).

REPS = 2000: the Monte Carlo standard error at 95% is 0.5 points, so a method that truly
covers 95% lands in [93%, 97%] with 4 standard errors to spare on either side (one that covers
94% with 2), while the percentile bootstrap the leaderboards used (exactly 87.6% at n = 20,
p = 0.9, asserted below; 65.0% at n = 10) is 5 points below the floor.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats

from app.leaderboards import stats as S
from bench import coverage as bench
from tests.conftest import untraced

REPS = 2000
SEED = 20261127

# Cells allowed outside [0.93, 0.97], each for a stated reason (measured figures from
# bench/coverage.py, 5,000 studies per cell, in docs/benchmarks.md "Interval coverage").
EXCEPTIONS = {
    # Binary, n = 10, p = 0.5: an interval symmetric under x -> 1 - x covers k in [a, 10 - a]
    # successes, i.e. 1 - 2 P(X < a): 89.1% (a = 2) or 97.9% (a = 1); nothing in between.
    ("binary p=0.5", 10, False): (0.978, 0.979),
    # Binary, n = 10, p = 0.9: covering k = 8..10 gives 92.98%, adding k = 7 gives 98.7%.
    ("binary p=0.9", 10, False): (0.929, 0.930),
    # Binary, n = 20, p = 0.97: covering k = 19, 20 gives 88.0%, adding k = 18 gives 97.9%.
    ("binary p=0.97", 20, False): (0.978, 0.980),
    # Binary, n = 50, p = 0.9: Wilson covers k = 41..49, 97.03% (its coverage oscillates with
    # n and p; 0.03 points over).
    ("binary p=0.9", 50, False): (0.970, 0.971),
    # Clustered binary scores: Student's t on G - 1 degrees of freedom (2-3 clusters at n = 10,
    # 4-6 at n = 20, 10-16 at n = 50) makes the interval conservative: measured 98.8-99.6%,
    # 96.1-98.8% and 95.5-97.9%.  Valid, not tight; 93% stays the floor.  (No single degrees
    # of freedom fits every p: N - 1 brings p = 0.9 to 96% but p = 0.5 at n = 10 to 83%.)
    ("binary p=0.5", 10, True): (0.93, 1.0),
    ("binary p=0.9", 10, True): (0.93, 1.0),
    ("binary p=0.97", 10, True): (0.93, 1.0),
    ("binary p=0.9", 20, True): (0.93, 1.0),
    ("binary p=0.97", 20, True): (0.93, 1.0),
    ("binary p=0.9", 50, True): (0.93, 0.985),
    ("binary p=0.97", 50, True): (0.93, 0.985),
    # Rare failures (3%) in ~50 clusters: the cluster-robust variance is a little low (93.0%).
    ("binary p=0.97", 200, True): (0.92, 0.97),
}

CELLS = [(name, n, clustered) for clustered in (False, True) for name in bench.DISTRIBUTIONS for n in bench.SIZES]


@pytest.fixture(scope="module")
def table():
    rng = np.random.default_rng(SEED)
    with untraced():
        return {cell: bench.coverage(rng, *cell[:2], REPS, cell[2]) for cell in CELLS}


@pytest.mark.parametrize("cell", CELLS, ids=lambda c: f"{c[0]}-n{c[1]}-{'clusters' if c[2] else 'iid'}")
def test_mean_interval_covers(table, cell):
    low, high = EXCEPTIONS.get(cell, (0.93, 0.97))
    assert low <= table[cell] <= high, (cell, table[cell])


def test_the_binary_exceptions_are_forced_by_discreteness():
    pmf = lambda n, p: scipy.stats.binom.pmf(np.arange(n + 1), n, p)  # noqa: E731
    # n = 10, p = 0.5: symmetric windows [a, 10 - a]
    f = pmf(10, 0.5)
    assert [round(f[a : 11 - a].sum(), 4) for a in (2, 3)] == [0.9785, 0.8906]
    # n = 10, p = 0.9: windows ending at 10 (an interval covering 0.9 at k = 7 covers it for k > 7)
    f = pmf(10, 0.9)
    assert [round(f[a:].sum(), 4) for a in (7, 8)] == [0.9872, 0.9298]
    # n = 20, p = 0.97
    f = pmf(20, 0.97)
    assert [round(f[a:].sum(), 4) for a in (18, 19)] == [0.979, 0.8802]


def test_the_binary_cells_are_exact_and_wilson():
    # the exact cells are Wilson's interval itself: 9 of 10 gives Wilson's (0.5958, 0.9821)
    assert bench.exact_binary_coverage(S.mean_interval, 10, 0.9) == pytest.approx(
        scipy.stats.binom.pmf([8, 9, 10], 10, 0.9).sum(), rel=1e-12
    )
    assert S.mean_interval([1.0] * 9 + [0.0]).method == "Wilson"


def test_the_percentile_bootstrap_fails_this_test():
    # what the leaderboards used before: 87.6% at n = 20, p = 0.9 (exact over the binomial),
    # and 65.0% at n = 10, far outside [0.93, 0.97]
    percentile = bench.percentile
    assert bench.exact_binary_coverage(percentile, 20, 0.9) == pytest.approx(0.8760, abs=5e-4)
    assert bench.exact_binary_coverage(percentile, 10, 0.9) < 0.66


# --- paired differences: paired_effect's interval ---------------------------------------------

PAIR_REPS = 1000
PAIR_CELLS = [(name, n) for name in bench.PAIRS for n in (10, 20, 50)]


@pytest.fixture(scope="module")
def pair_table():
    rng = np.random.default_rng(SEED + 1)
    with untraced():
        return {cell: bench.paired_coverage(rng, *cell, PAIR_REPS) for cell in PAIR_CELLS}


@pytest.mark.parametrize("cell", PAIR_CELLS, ids=lambda c: f"{c[0]}-n{c[1]}")
def test_paired_effect_covers(pair_table, cell):
    # Bonett-Price (binary) is conservative when discordant pairs are rare (up to 100% at
    # n <= 20), so only the floor is asserted for binary pairs; t for continuous scores is tight.
    high = 0.97 if cell[0].startswith("Beta") else 1.0
    assert 0.93 <= pair_table[cell] <= high, (cell, pair_table[cell])


def test_t_on_paired_differences_fails_rare_discordance():
    # why binary pairs do not use t: 0.9 vs 0.8 with b <= a, n = 20 - t covers about 88%
    rng = np.random.default_rng(SEED + 2)
    with untraced():
        cover = bench.paired_coverage(rng, "binary 0.9 vs 0.8, b <= a", 20, PAIR_REPS, bench.t_on_differences)
    assert cover < 0.91


def test_the_bench_the_readme_names_prints_its_table():
    """`bench/coverage.py` (README, docs/benchmarks.md) runs and prints a coverage cell per n;
    figures are the bench's business, not this test's."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    with untraced():
        out = subprocess.run(
            [sys.executable, str(root / "bench" / "coverage.py"), "--reps", "50"],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=root,
        )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "| n = 10 | n = 20 | n = 50 | n = 200 |" in out.stdout and "binary p=0.9" in out.stdout
