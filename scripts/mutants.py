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
    python scripts/mutants.py --mutmut results | show NAME   (mutmut with the same configuration)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The kinds' leaderboard sections (issue 25): what a paper quotes from a navigation, A3DS or
# Hexagons study. Mutated beside the modules pyproject.toml's [tool.mutmut] lists, with the
# tests that check their figures by hand added to its test selection.
SECTIONS = {
    "app.kinds.navigation.leaderboard": "app/kinds/navigation/leaderboard.py",
    "app.kinds.a3ds.leaderboard": "app/kinds/a3ds/leaderboard.py",
    "app.kinds.hexagons.leaderboard": "app/kinds/hexagons/leaderboard.py",
}
SECTION_TESTS = [
    "tests/integration/test_sections_certified.py",
    "tests/integration/test_navigation_leaderboard.py",
    "tests/integration/test_a3ds_kind.py",
    "tests/integration/test_hex_leaderboard.py",
    "tests/integration/test_sections_shapes.py",
    "tests/unit/test_hex_leaderboard_math.py",
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
TIMEOUT = {36, 24, -24, 152, 255}


def results() -> dict[str, dict[str, int | None]]:
    """Exit code per mutant, per module, from mutmut's result files."""
    out = {}
    for module, path in MODULES.items():
        meta = ROOT / "mutants" / (path + ".meta")
        out[module] = json.loads(meta.read_text())["exit_code_by_key"] if meta.exists() else {}
    return out


def equivalent_listed() -> set[str]:
    """Mutant names docs/testing.md explains as equivalent: each `x_function__mutmut_N` in
    backticks, and the `_M` shorthands after it (`x_dtw__mutmut_15`, `_16`), outside the
    sections headed "Not killed"."""
    names, function, listing = set(), None, True
    for line in (ROOT / "docs" / "testing.md").read_text().splitlines():
        if line.startswith("#"):
            listing = "not killed" not in line.lower()
            continue
        for token in re.findall(r"`([^`]+)`", line):
            full = re.fullmatch(r"(x_[A-Za-z0-9_ǁ]+?__mutmut)_(\d+)", token)
            if full:
                function = full.group(1)
                if listing:
                    names.add(token)
            elif function and re.fullmatch(r"_\d+", token) and listing:
                names.add(function + token)
    return names


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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--skip-run", action="store_true", help="only report the stored results")
    ap.add_argument("--no-postgres", action="store_true", help="skip the PostgreSQL pass")
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
    if not args.skip_run:
        env = dict(os.environ, PROCTOR_TEST_BACKENDS="sqlite")
        run = mutmut("run", *args.globs, env=env)
        if run.returncode not in (0, 1):
            print(f"mutmut run failed with exit code {run.returncode}", file=sys.stderr)
            return run.returncode
    by_module = results()
    pg_file = ROOT / "mutants" / "postgres-pass.json"
    pg = json.loads(pg_file.read_text()) if pg_file.exists() else {}
    if not args.skip_run and not args.no_postgres:
        survivors = sorted(k for k, c in by_module[ENGINE].items() if c in SURVIVED)
        print(f"PostgreSQL pass: {len(survivors)} engine survivors against {', '.join(POSTGRES_TESTS)}")
        pg = postgres_pass(survivors)
        pg_file.write_text(json.dumps(pg, indent=1))

    equivalent = equivalent_listed()
    unexplained = []
    print(
        f"\n{'module':34} {'mutants':>7} {'killed':>7} {'survived':>8} {'timeout':>7} "
        f"{'not run':>7} {'other':>5} {'killed %':>8} {'explained':>9}"
    )
    for module, codes in by_module.items():
        tally = Counter()
        for key, code in codes.items():
            if module == ENGINE and code in SURVIVED and pg.get(key) == 1:
                code = 1  # killed by the PostgreSQL pass
            tally[
                "killed"
                if code in KILLED
                else "survived"
                if code in SURVIVED
                else "timeout"
                if code in TIMEOUT
                else "not run"
                if code is None
                else "other"
            ] += 1
            short = key.rsplit(".", 1)[1]
            if code in SURVIVED and short not in equivalent:
                unexplained.append(key)
        total = sum(tally.values())
        checked = total - tally["not run"]
        # A mutant that makes the tests hang is caught by the time limit: it counts as killed.
        caught = tally["killed"] + tally["timeout"]
        share = f"{100 * caught / checked:.1f}%" if checked else "-"  # of those checked
        n_equiv = sum(1 for k, c in codes.items() if c in SURVIVED and k.rsplit(".", 1)[1] in equivalent)
        print(
            f"{module:34} {total:7} {tally['killed']:7} {tally['survived']:8} {tally['timeout']:7} "
            f"{tally['not run']:7} {tally['other']:5} {share:>8} {n_equiv:9}"
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
