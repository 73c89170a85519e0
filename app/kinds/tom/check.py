"""`proctor tom check FILE...`: compare stored answers with the rules.

Each question's answer is recomputed from its own label columns (belief_A, belief_B, cg_A,
cg_B, belief_Q) and the speaker chain in its text. Exit status: 0 when all agree, 1 when some
disagree, 2 when a file cannot be read or parsed (nothing is compared then).
"""

from __future__ import annotations

import sys

from app.errors import InputError
from app.kinds.tom.formats import parse_questions_csv


def check_files(paths: list[str], out=sys.stdout) -> int:
    parsed = []
    # Parse everything first so a malformed file fails before any comparison is printed.
    for path in paths:
        try:
            with open(path, "rb") as fh:
                parsed.append((path, parse_questions_csv(fh.read())))
        except OSError as exc:
            print(f"{path}: cannot read: {exc.strerror or exc}", file=out)
            return 2
        except InputError as exc:
            print(f"{path}: {exc}", file=out)
            return 2

    total = disagree = 0
    for path, questions in parsed:
        for q in questions:
            total += 1
            rule = q.rule_answer()
            if rule != q.answer:
                disagree += 1
                print(f"{path}:{q.line}: {q.question_id}: stored {q.answer}, rules say {rule}", file=out)
    print(f"{disagree} of {total} questions disagree with the rules", file=out)
    return 1 if disagree else 0
