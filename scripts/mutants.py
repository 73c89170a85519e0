"""`make mutants`: mutation testing of the modules where a silent bug publishes a wrong number
or loses an answer (docs/testing.md). Not part of CI: it takes tens of minutes.

1. mutmut (configured in pyproject.toml, extended here by the kinds' leaderboard sections:
   SECTIONS, SECTION_TESTS) mutates the modules and runs, for each mutant, the tests that
   reach the mutated function, on SQLite.
2. The engine's survivors are run again against PostgreSQL with the concurrency tests: the
   row locks (FOR UPDATE, SKIP LOCKED) and the retry loop do nothing on SQLite, so only
   PostgreSQL can kill their mutants.
3. Prints killed / survived per module, and the survivors not listed as equivalent in
   docs/testing.md.

    python scripts/mutants.py [--skip-run] [--no-postgres] [MUTANT-GLOB ...]
    python scripts/mutants.py --sample N [--seed S] [--no-postgres]   (N mutants per module)
    python scripts/mutants.py --mutmut results | show NAME   (mutmut with the same configuration)
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import random
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The leaderboard sections (issue 25): every kind's own section (navigation, A3DS, Hexagons,
# STS) and the generic leaderboard that Common-ToM's page leads with (the page's assembly, its
# rows, the rank intervals, the Rogan-Gladen correction). Mutated beside the modules
# pyproject.toml's [tool.mutmut] lists, with the tests that check their figures by hand added to
# its test selection.
SECTIONS = {
    "app.kinds.navigation.leaderboard": "app/kinds/navigation/leaderboard.py",
    "app.kinds.a3ds.leaderboard": "app/kinds/a3ds/leaderboard.py",
    "app.kinds.hexagons.leaderboard": "app/kinds/hexagons/leaderboard.py",
    "app.kinds.sts.leaderboard": "app/kinds/sts/leaderboard.py",
    "app.leaderboards.service": "app/leaderboards/service.py",
    "app.leaderboards.rows": "app/leaderboards/rows.py",
    "app.leaderboards.ranks": "app/leaderboards/ranks.py",
    "app.leaderboards.correction": "app/leaderboards/correction.py",
    # The judged table (PPI++) the STS, navigation and A3DS sections share, and the offline
    # scorers' people-and-judge figures: added after the first sample, sampled with seed 31.
    "app.leaderboards.judged": "app/leaderboards/judged.py",
}
SECTION_TESTS = [
    "tests/integration/test_sections_certified.py",
    "tests/integration/test_navigation_leaderboard.py",
    "tests/integration/test_a3ds_kind.py",
    "tests/integration/test_hex_leaderboard.py",
    "tests/integration/test_sections_shapes.py",
    "tests/unit/test_hex_leaderboard_math.py",
    "tests/integration/test_sts_certified.py",
    "tests/unit/test_sts_score.py",
    "tests/unit/test_correction.py",
    "tests/integration/test_leaderboard_reading.py",
    "tests/integration/test_leaderboard_lead.py",
    "tests/integration/test_leaderboard_totals.py",
    "tests/integration/test_tom_leaderboard.py",
    "tests/integration/test_sts_ppi.py",
    # The STS section's side-by-side tables (pair_section) and the failure-types table an
    # admin's classifications fill: added after the seed-25 sample (docs/testing.md).
    "tests/integration/test_sts_pairs.py",
    "tests/integration/test_sts_analysis.py",
    # The generic table's rank units (ranks.py), written for the seed-25 sample's survivors.
    "tests/integration/test_ranks_units.py",
    # Written for the survivors of the sample (docs/testing.md).
    "tests/integration/test_sections_sampled.py",
    "tests/unit/test_rows_cells.py",
    # The offline scorers and the judged tables' own tests (`proctor navigation judged`,
    # `proctor hexagons score --judge`, `proctor a3ds score --judge`, the kinds' judged and
    # learned-judge tables): they reach judged.py and the STS section but were not in the
    # selection of the seed-31 sample, where no selected test reached `judged_summary`.
    "tests/unit/test_nav_judged.py",
    "tests/unit/test_hex_score_judge.py",
    "tests/unit/test_a3ds.py",
    "tests/integration/test_nav_judge.py",
    "tests/integration/test_hex_judge.py",
    "tests/integration/test_a3ds_judge.py",
    "tests/integration/test_sts_learned_judge.py",
    "tests/integration/test_sts_people.py",
    # Navigation's side-by-side tables (pair_section, followed_table): no selected test reached
    # them in the seed-47 sample (docs/testing.md).
    "tests/integration/test_nav_pairs.py",
    # Every table's title, note, column labels and helps, and its cells' words, on each kind's
    # page against the committed text: prose mutants (a label upper-cased, a note in `XX`) are
    # regressions a reader sees, and survived every sample to seed 47 (docs/testing.md).
    "tests/integration/test_sections_prose.py",
    # 9! orderings through scipy per seed: past the 60 s limit under mutmut's tracing. It checks
    # stats.spearman, which `make mutants` mutates with test_stats.py.
    "--deselect",
    "tests/integration/test_leaderboard_reading.py::test_spearman_p_is_the_exact_enumeration_up_to_nine",
]
MODULES = {
    "app.kinds.navigation.metrics": "app/kinds/navigation/metrics.py",
    "app.kinds.tom.rules": "app/kinds/tom/rules.py",
    "app.leaderboards.stats": "app/leaderboards/stats.py",
    "app.studies.assignment": "app/studies/assignment.py",
    **SECTIONS,
}
# mutmut itself, its configuration read from pyproject.toml and then extended: SECTIONS' files
# added to only_mutate and SECTION_TESTS to the test selection (workers are forked from this
# process, so they see the same configuration).
MUTMUT = """
import json, sys
from mutmut import configuration
extra = json.loads(sys.argv[1])
read = configuration._config_reader
def extended():
    get = read()
    def value(key, default):
        got = get(key, default)
        return got + [x for x in extra[key] if x not in got] if key in extra else got
    return value
configuration._config_reader = extended
if sys.argv[2:] == ["generate"]:  # only write the mutants (and their .meta files), run nothing
    from os import makedirs
    from mutmut.__main__ import copy_also_copy_files, copy_src_dir, create_mutants, setup_source_paths
    from mutmut.mutation.trampoline import set_mutant_under_test
    set_mutant_under_test("mutant_generation")
    makedirs("mutants", exist_ok=True)
    copy_src_dir()
    copy_also_copy_files()
    setup_source_paths()
    create_mutants(2)
    sys.exit(0)
from mutmut.__main__ import cli
sys.argv = ["mutmut", *sys.argv[2:]]
cli()
"""


def mutmut(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`mutmut ARGS` in ROOT with the configuration extended by SECTIONS and SECTION_TESTS."""
    extra = {"only_mutate": list(SECTIONS.values()), "pytest_add_cli_args_test_selection": SECTION_TESTS}
    return subprocess.run([sys.executable, "-c", MUTMUT, json.dumps(extra), *args], cwd=ROOT, env=env)


ENGINE = "app.studies.assignment"
# Tests that reach the engine on PostgreSQL: the contract, the engine tests and 110 workers
# racing for items (which fails when SKIP LOCKED or the retry is gone).
POSTGRES_TESTS = [
    "tests/integration/test_concurrency.py",
    "tests/integration/test_engine_contract.py",
    "tests/integration/test_engine.py",
    "-k",
    "not sqlite",
]
KILLED, SURVIVED = {1, 3}, {0}
SAMPLE_FILE = ROOT / "mutants" / "sample.json"
TIMEOUT = {36, 24, -24, 152, 255}


def results() -> dict[str, dict[str, int | None]]:
    """Exit code per mutant, per module, from mutmut's result files."""
    out = {}
    for module, path in MODULES.items():
        meta = ROOT / "mutants" / (path + ".meta")
        out[module] = json.loads(meta.read_text())["exit_code_by_key"] if meta.exists() else {}
    return out


def equivalent_listed() -> set[str]:
    """Mutant names docs/testing.md explains as equivalent: each `x_function__mutmut_N` or
    `module.x_function__mutmut_N` in backticks, and the `_M` shorthands after it
    (`x_dtw__mutmut_15`, `_16`), outside the sections headed "Not killed". A short name (no
    module) counts only for the modules pyproject.toml lists (their function names are
    distinct); the sections' mutants are named in full, since their functions share names
    (`x_section` in four of them)."""
    names, function, listing = set(), None, True
    for line in (ROOT / "docs" / "testing.md").read_text().splitlines():
        if line.startswith("#"):
            listing = "not killed" not in line.lower()
            continue
        for token in re.findall(r"`([^`]+)`", line):
            full = re.fullmatch(r"((?:[a-z0-9_]+\.)*x_[A-Za-z0-9_ǁ]+?__mutmut)_(\d+)", token)
            if full:
                function = full.group(1)
                if listing:
                    names.add(token)
            elif function and re.fullmatch(r"_\d+", token) and listing:
                names.add(function + token)
    return names


def is_listed(key: str, module: str, equivalent: set[str]) -> bool:
    """Whether mutant `key` (module.x_function__mutmut_N) is explained as equivalent."""
    return key in equivalent or (module not in SECTIONS and key.rsplit(".", 1)[1] in equivalent)


def wilson(killed: int, n: int) -> tuple[float, float]:
    """The 95% Wilson interval of killed / n (statsmodels' proportion_confint)."""
    from statsmodels.stats.proportion import proportion_confint

    low, high = proportion_confint(killed, n, alpha=0.05, method="wilson")
    return float(low), float(high)


def draw_sample(n: int, seed: int, globs: list[str]) -> list[str]:
    """Generate the mutants, then draw `n` mutant names per module (fewer where a module has
    fewer), uniformly at random with `seed`, among those matching `globs` (all when none)."""
    gen = mutmut("generate", env=dict(os.environ, PROCTOR_TEST_BACKENDS="sqlite"))
    if gen.returncode != 0:
        raise SystemExit(f"generating the mutants failed with exit code {gen.returncode}")
    rng = random.Random(seed)
    sample = []
    for keys in results().values():
        pool = sorted(k for k in keys if not globs or any(fnmatch.fnmatch(k, g) for g in globs))
        if pool:
            sample += sorted(rng.sample(pool, min(n, len(pool))))
    return sample


def _postgres_tests(mutant: str) -> subprocess.CompletedProcess:
    """The engine's PostgreSQL tests in mutants/ with `mutant` active ("" for none)."""
    env = dict(os.environ, PROCTOR_TEST_BACKENDS="postgresql", MUTANT_UNDER_TEST=mutant)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "no:cov", *POSTGRES_TESTS],
        cwd=ROOT / "mutants",
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def postgres_pass(survivors: list[str]) -> dict[str, int]:
    """Run each engine survivor against PostgreSQL; returns pytest's exit code per mutant."""
    clean = _postgres_tests("")
    if clean.returncode != 0:  # a kill only means something when the unmutated code passes
        raise SystemExit(f"the PostgreSQL tests fail without a mutant:\n{clean.stdout[-3000:]}")
    codes = {}
    for i, name in enumerate(survivors, 1):
        codes[name] = code = _postgres_tests(name).returncode
        verdict = "killed" if code == 1 else ("survived" if code == 0 else f"exit {code}")
        print(f"  [{i}/{len(survivors)}] {name}: {verdict}", flush=True)
    return codes


def classify(code: int | None) -> str:
    return (
        "killed"
        if code in KILLED
        else "survived"
        if code in SURVIVED
        else "timeout"
        if code in TIMEOUT
        else "not run"
        if code is None
        else "other"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--skip-run", action="store_true", help="only report the stored results")
    ap.add_argument("--no-postgres", action="store_true", help="skip the PostgreSQL pass")
    ap.add_argument(
        "--sample",
        type=int,
        metavar="N",
        help="run a fixed-seed random sample of N mutants per module (among GLOBS if given) "
        "instead of all; with --skip-run, report the last sample drawn",
    )
    ap.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0)")
    ap.add_argument(
        "--mutmut",
        action="store_true",
        help="first argument only: run mutmut with this configuration and the arguments "
        "after it (results, show NAME, browse)",
    )
    ap.add_argument("globs", nargs="*", help="mutant names or globs, e.g. 'app.leaderboards.stats*'")
    if sys.argv[1:2] == ["--mutmut"]:
        return mutmut(*sys.argv[2:], env=dict(os.environ, PROCTOR_TEST_BACKENDS="sqlite")).returncode
    args = ap.parse_args()
    sample: set[str] | None = None
    names = args.globs
    if args.sample is not None and args.skip_run:
        stored = json.loads(SAMPLE_FILE.read_text())
        sample = set(stored["mutants"])
        print(f"The sample drawn with --sample {stored['n']} --seed {stored['seed']}: {len(sample)} mutants")
    elif args.sample is not None:
        names = draw_sample(args.sample, args.seed, args.globs)
        sample = set(names)
        SAMPLE_FILE.write_text(json.dumps({"n": args.sample, "seed": args.seed, "mutants": names}, indent=1))
        print(f"Sample: {len(names)} mutants ({args.sample} per module, seed {args.seed}), in {SAMPLE_FILE}")
    if not args.skip_run:
        env = dict(os.environ, PROCTOR_TEST_BACKENDS="sqlite")
        run = mutmut("run", *names, env=env)
        if run.returncode not in (0, 1):
            print(f"mutmut run failed with exit code {run.returncode}", file=sys.stderr)
            return run.returncode
    by_module = results()
    if sample is not None:
        by_module = {m: {k: c for k, c in codes.items() if k in sample} for m, codes in by_module.items()}
        by_module = {m: codes for m, codes in by_module.items() if codes}
    pg_file = ROOT / "mutants" / "postgres-pass.json"
    pg = json.loads(pg_file.read_text()) if pg_file.exists() else {}
    if not args.skip_run and not args.no_postgres and ENGINE in by_module:
        survivors = sorted(k for k, c in by_module[ENGINE].items() if c in SURVIVED)
        print(f"PostgreSQL pass: {len(survivors)} engine survivors against {', '.join(POSTGRES_TESTS)}")
        pg = postgres_pass(survivors)
        pg_file.write_text(json.dumps(pg, indent=1))

    equivalent = equivalent_listed()
    unexplained = []
    print(
        f"\n{'module':34} {'mutants':>7} {'killed':>7} {'survived':>8} {'timeout':>7} "
        f"{'not run':>7} {'other':>5} {'equiv.':>6}  killed of the non-equivalent run, 95% Wilson"
    )
    all_caught = all_checked = 0
    for module, codes in by_module.items():
        tally, n_equiv = Counter(), 0
        for key, code in codes.items():
            if module == ENGINE and code in SURVIVED and pg.get(key) == 1:
                code = 1  # killed by the PostgreSQL pass
            tally[classify(code)] += 1
            if code in SURVIVED:
                if is_listed(key, module, equivalent):
                    n_equiv += 1
                else:
                    unexplained.append(key)
        total = sum(tally.values())
        # A mutant that makes the tests hang is caught by the time limit: it counts as killed.
        caught = tally["killed"] + tally["timeout"]
        # Of those run, less the survivors explained as equivalent; "other" (no test reaches
        # the function, or a crash) counts as not killed.
        checked = total - tally["not run"] - n_equiv
        all_caught, all_checked = all_caught + caught, all_checked + checked
        rate = f"{caught}/{checked} = {100 * caught / checked:.1f}%" if checked else "-"
        if checked:
            low, high = wilson(caught, checked)
            rate += f" [{100 * low:.1f}%, {100 * high:.1f}%]"
        print(
            f"{module:34} {total:7} {tally['killed']:7} {tally['survived']:8} {tally['timeout']:7} "
            f"{tally['not run']:7} {tally['other']:5} {n_equiv:6}  {rate}"
        )
    if all_checked:
        low, high = wilson(all_caught, all_checked)
        print(
            f"{'all':34} {'':>52}  {all_caught}/{all_checked} = {100 * all_caught / all_checked:.1f}% "
            f"[{100 * low:.1f}%, {100 * high:.1f}%]"
        )
    if sample is not None:
        print(
            "\nA random sample, not every mutant: the interval is what the sample says about the "
            "kill rate of all the module's mutants (equivalent ones set aside as listed in "
            "docs/testing.md)."
        )
    if unexplained:
        print(f"\n{len(unexplained)} survivors not explained in docs/testing.md (`mutmut show NAME` prints one):")
        for key in sorted(unexplained):
            print("  " + key)
    else:
        print("\nEvery survivor is listed as equivalent in docs/testing.md.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
