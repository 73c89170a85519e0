"""Sum the per-file seconds a run with PROCTOR_TEST_TIMES=FOLDER wrote (tests/conftest.py):
one row a test file, most CPU first, with its wall seconds, its tests, and the totals.

    PROCTOR_TEST_TIMES=var/times bash scripts/test.sh && python scripts/test_times.py var/times
"""

from __future__ import annotations

import sys
from pathlib import Path


def main(folder: str, most: int = 40) -> None:
    files: dict[str, list[float]] = {}
    for tsv in Path(folder).glob("*.tsv"):
        for number, line in enumerate(tsv.read_text().splitlines(), 1):
            try:
                name, wall, cpu, n = line.split("\t")
                row = files.setdefault(name, [0.0, 0.0, 0])
                row[0] += float(wall)
                row[1] += float(cpu)
                row[2] += int(n)
            except ValueError:
                sys.exit(f"{tsv}:{number}: not a row of file, wall, CPU and tests: {line!r}")
    if not files:
        sys.exit(f"{folder}: no *.tsv (run the tests with PROCTOR_TEST_TIMES={folder})")
    rows = sorted(files.items(), key=lambda kv: -kv[1][1])
    wall, cpu = sum(r[0] for _, r in rows), sum(r[1] for _, r in rows)
    print(f"{'CPU s':>8} {'wall s':>8} {'tests':>6}  file")
    for name, (w, c, n) in rows[:most]:
        print(f"{c:8.1f} {w:8.1f} {n:6d}  {name}")
    print(f"{cpu:8.1f} {wall:8.1f} {sum(r[2] for _, r in rows):6d}  all {len(rows)} files")


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: python scripts/test_times.py FOLDER [ROWS]")
    main(sys.argv[1], *(int(a) for a in sys.argv[2:]))
