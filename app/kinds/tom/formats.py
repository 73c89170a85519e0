"""Common-ToM file formats: the released question CSV and agent answer JSONL.

Question CSV (UTF-8, optionally gzipped), one question per record, columns

    sno,eno,belief_A,belief_B,belief_Q,cg_A,cg_B,order,question,answer,context_type,cid,annotator,context

optionally preceded by one id column headed "" (a pandas index), "id" or "question_id".
`context` is the whole dialogue, one "A: ..." / "B: ..." utterance per line, with " 🛑" ending
line `sno` (1-based). `belief_Q` is the certainty asked about, `eno` the proposition's event
number and `cid` the conversation. The released files write `eno` as a dotted event number such
as `12.4`; it is kept as the text written (see `parse_eno`), never as a number. Answers Yes/No
(yes/no/true/false in any case are accepted).

Question ids: the id column's value where there is one; otherwise derived from the content as
"{cid}:{sno}:{eno}:{chain}:{belief_Q}" (chain like "AB"), so ids do not depend on row order.
Should the same question appear twice without an id column, the later copies get "~2", "~3".

Answer JSONL: one {"question_id": ..., "answer": "Yes"|"No"} per line; blank lines are skipped.

Every refusal is an InputError naming the file line (the header is line 1; a record spanning
several lines is named by its first line) and the field.
"""

from __future__ import annotations

import csv
import io
import re
from typing import Literal

from pydantic import BaseModel

from app.errors import InputError
from app.textfiles import csv_reader, csv_records, jsonl_objects, upload_bytes
from app.kinds.tom.rules import BELIEFS, CERTAINTIES, CG_LABELS, STOP, STOP_VS16, gold_answer, parse_question

COLUMNS = (
    "sno",
    "eno",
    "belief_A",
    "belief_B",
    "belief_Q",
    "cg_A",
    "cg_B",
    "order",
    "question",
    "answer",
    "context_type",
    "cid",
    "annotator",
    "context",
)
ID_HEADERS = ("", "id", "question_id")
# Ids are stored in 255-character columns (item id; cluster "{cid}:{eno}").
MAX_ID_LENGTH = 255
MAX_CID_LENGTH = 200
MAX_ENO_LENGTH = 20
# An event number: "3", or dotted like the released files' "12.4" (digits, no sign or exponent).
_ENO = re.compile(r"[0-9]+(?:\.[0-9]+)*")
_LABEL_SETS = {
    "belief_A": BELIEFS,
    "belief_B": BELIEFS,
    "belief_Q": CERTAINTIES,
    "cg_A": CG_LABELS,
    "cg_B": CG_LABELS,
}
_UTTERANCE = re.compile(r"([AB]):[ \t]?(.*)", re.DOTALL)


class ToMQuestion(BaseModel):
    """One question. Parsed questions about one dialogue share one `utterances` list: do not mutate it."""

    question_id: str
    sno: int  # 1-based utterance the question is about
    eno: str  # proposition (event) number as written, e.g. "12.4" or "3"
    belief_A: str
    belief_B: str
    belief_Q: str  # certainty asked about
    cg_A: str
    cg_B: str
    order: int
    chain: tuple[str, ...]
    proposition: str
    question: str
    answer: Literal["Yes", "No"]
    context_type: str
    cid: str
    annotator: str
    utterances: list[tuple[str, str]]  # (speaker, text), 🛑 removed
    line: int | None = None  # CSV line the record starts on, None when generated

    def rule_answer(self) -> Literal["Yes", "No"]:
        """The answer the rules give from this question's own label columns."""
        yes = gold_answer(
            self.chain,
            self.belief_Q,
            {"A": self.belief_A, "B": self.belief_B},
            {"A": self.cg_A, "B": self.cg_B},
        )
        return "Yes" if yes else "No"

    @property
    def context(self) -> str:
        return "\n".join(
            f"{who}: {text}" + (f" {STOP}" if i == self.sno else "") for i, (who, text) in enumerate(self.utterances, 1)
        )


def derived_id(cid: str, sno: int, eno: str, chain: tuple[str, ...], certainty: str) -> str:
    return f"{cid}:{sno}:{eno}:{''.join(chain)}:{certainty}"


def parse_eno(text: str) -> str | None:
    """The event number `text` (surrounding spaces dropped) if it is one, else None.

    Kept as text, never converted: "12.1", "12.10" and "12.4" are three events of utterance
    12, which a float or a rounding would merge (12.1 == 12.10).
    """
    text = text.strip()
    return text if len(text) <= MAX_ENO_LENGTH and _ENO.fullmatch(text) else None


def eno_problem(value) -> str:
    """The refusal message for an `eno` value that `parse_eno` rejected."""
    return (
        f"{value} is not an event number such as 3 or 12.4 (digits, optionally dotted, "
        f"at most {MAX_ENO_LENGTH} characters)"
    )


def normalise_answer(value) -> str | None:
    """'Yes'/'No' for yes/no/true/false (any case) or JSON booleans; None for anything else."""
    if isinstance(value, bool):
        return "Yes" if value else "No"
    if isinstance(value, str):
        return {"yes": "Yes", "true": "Yes", "no": "No", "false": "No"}.get(value.strip().lower())
    return None


def _records(text: bytes | str):
    """(first line, cells) per CSV record of checked bytes (`upload_bytes`) or a text, skipping
    blank lines."""
    reader = csv_reader(text, strict=True)
    for start, row in csv_records(reader, text):
        if len(row) > 1 or (row and row[0].strip()):  # a blank line is not a record
            yield start, row


def _split_context(text: str, line: int) -> tuple[list[tuple[str, str]], list[int]]:
    """(utterances, numbers of lines ending in a 🛑) of a context with "\n" line ends."""
    utterances, marked = [], []
    for i, raw in enumerate(text.split("\n"), 1):
        raw = raw.rstrip()
        for stop in (STOP_VS16, STOP):
            if raw.endswith(stop):
                raw = raw[: -len(stop)].rstrip()
                marked.append(i)
                break
        m = _UTTERANCE.fullmatch(raw)
        if not m:
            raise InputError(f"context line {i} does not start with 'A:' or 'B:'", line=line, field="context")
        utterances.append((m[1], m[2]))
    return utterances, marked


def _parse_context(context: str, sno: int, line: int, cache: dict) -> list[tuple[str, str]]:
    text = context.replace("\r\n", "\n").replace("\r", "\n").strip("\n")
    # Questions about one dialogue differ only in where the 🛑 is: parse each dialogue once.
    at = text.find(STOP)
    marker_line = text.count("\n", 0, at) + 1 if at >= 0 else None
    if at >= 0:
        end = at + len(STOP) + text.startswith("\ufe0f", at + len(STOP))
        if text[end:].split("\n", 1)[0].strip():
            raise InputError(
                f"the {STOP} marker must end its line (context line {marker_line})", line=line, field="context"
            )
        text = text[:at].rstrip(" \t") + text[end:]
    if text not in cache:
        cache[text] = _split_context(text, line)
    utterances, others = cache[text]
    if not 1 <= sno <= len(utterances):
        raise InputError(f"sno {sno} is outside the context, which has {len(utterances)} lines", line=line, field="sno")
    if marker_line != sno or others:
        marked = sorted(others + [marker_line] if marker_line else others)
        where = f"on context line(s) {', '.join(map(str, marked))}" if marked else "missing"
        raise InputError(
            f"the {STOP} marker should end context line {sno} (sno) but is {where}", line=line, field="context"
        )
    return utterances


def _int(cells: dict, name: str, line: int) -> int:
    try:
        return int(cells[name].strip())
    except ValueError:
        raise InputError(f"{cells[name]!r} is not a whole number", line=line, field=name) from None


def _question(cells: dict, line: int, qid: str | None, cache: dict) -> ToMQuestion:
    for name, allowed in _LABEL_SETS.items():
        cells[name] = cells[name].strip()
        if cells[name] not in allowed:
            raise InputError(f"{cells[name]!r} is not one of {', '.join(allowed)}", line=line, field=name)
    sno, order = (_int(cells, name, line) for name in ("sno", "order"))
    eno = parse_eno(cells["eno"])
    if eno is None:
        raise InputError(eno_problem(repr(cells["eno"])), line=line, field="eno")
    if order not in (1, 2, 3):
        raise InputError(f"order must be 1, 2 or 3, not {order}", line=line, field="order")
    answer = normalise_answer(cells["answer"])
    if answer is None:
        raise InputError(f"{cells['answer']!r} is not Yes or No", line=line, field="answer")
    cid = cells["cid"].strip()
    if not cid:
        raise InputError("the conversation id is empty", line=line, field="cid")
    if len(cid) > MAX_CID_LENGTH:
        raise InputError(f"the conversation id is longer than {MAX_CID_LENGTH} characters", line=line, field="cid")
    try:
        chain, certainty, proposition = parse_question(cells["question"])
    except InputError as exc:
        raise InputError(exc.message, line=line, field="question") from None
    if len(chain) != order:
        raise InputError(f"order is {order} but the question is of order {len(chain)}", line=line, field="order")
    if certainty != cells["belief_Q"]:
        raise InputError(
            f"belief_Q is {cells['belief_Q']} but the question asks about {certainty}", line=line, field="belief_Q"
        )
    utterances = _parse_context(cells["context"], sno, line, cache)
    # Every value is checked above; construct without re-validating (and so share utterances).
    return ToMQuestion.model_construct(
        question_id=qid if qid is not None else derived_id(cid, sno, eno, chain, certainty),
        sno=sno,
        eno=eno,
        order=order,
        chain=chain,
        proposition=proposition,
        question=cells["question"].strip(),
        answer=answer,
        cid=cid,
        context_type=cells["context_type"].strip(),
        annotator=cells["annotator"].strip(),
        utterances=utterances,
        line=line,
        **{name: cells[name] for name in _LABEL_SETS},
    )


def parse_questions_csv(data: bytes | str) -> list[ToMQuestion]:
    """All questions of a Common-ToM CSV, or InputError on the first malformed record.

    Answers that disagree with the rules are kept: `check.py` reports those.
    """
    records = _records(upload_bytes(data))
    first = next(records, None)
    if first is None:
        raise InputError("the file is empty: no header and no questions", line=1)
    header_line, header = first[0], [name.strip() for name in first[1]]
    id_name = header[0] if header[0] in ID_HEADERS else None
    names = header[1:] if id_name is not None else header
    seen = set()
    for name in names:
        if name not in COLUMNS:
            raise InputError(f"unknown column {name!r}; expected {', '.join(COLUMNS)}", line=header_line, field=name)
        if name in seen:
            raise InputError(f"column {name!r} appears twice", line=header_line, field=name)
        seen.add(name)
    for name in COLUMNS:
        if name not in seen:
            raise InputError(f"missing column {name!r}", line=header_line, field=name)

    id_field = id_name or "id"
    questions, ids, cache = [], set(), {}
    for line, row in records:
        if len(row) != len(header):
            field = header[len(row)] if len(row) < len(header) else None
            raise InputError(
                f"malformed CSV: the row has {len(row)} cells, the header {len(header)}", line=line, field=field or None
            )
        cells = dict(zip(header, row))
        qid = None
        if id_name is not None:
            qid = cells[id_name].strip()
            if not qid:
                raise InputError("the question id is empty", line=line, field=id_field)
            if len(qid) > MAX_ID_LENGTH:
                raise InputError(
                    f"the question id is longer than {MAX_ID_LENGTH} characters", line=line, field=id_field
                )
            if qid in ids:
                raise InputError(f"duplicate question id {qid!r}", line=line, field=id_field)
        q = _question(cells, line, qid, cache)
        if id_name is None:
            # Without ids, a repeated question gets a numbered copy id rather than a refusal.
            base, n = q.question_id, 1
            while q.question_id in ids:
                n += 1
                q.question_id = f"{base}~{n}"
        ids.add(q.question_id)
        questions.append(q)
    if not questions:
        raise InputError("the file has a header but no questions", line=header_line + 1)
    return questions


def write_questions_csv(questions) -> bytes:
    """The CSV format above, with a `question_id` first column (parse_questions_csv reads it back)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(("question_id", *COLUMNS))
    for q in questions:
        writer.writerow(
            [
                q.question_id,
                q.sno,
                q.eno,
                q.belief_A,
                q.belief_B,
                q.belief_Q,
                q.cg_A,
                q.cg_B,
                q.order,
                q.question,
                q.answer,
                q.context_type,
                q.cid,
                q.annotator,
                q.context,
            ]
        )
    return out.getvalue().encode("utf-8")


def window(utterances, sno: int, before: int = 5, after: int = 5) -> list[dict]:
    """The target utterance with up to `before`/`after` neighbours, as the paper shows them."""
    if not 1 <= sno <= len(utterances):
        raise ValueError(f"sno {sno} is outside a dialogue of {len(utterances)} utterances")
    lo, hi = max(1, sno - before), min(len(utterances), sno + after)
    return [
        {"index": i, "speaker": utterances[i - 1][0], "text": utterances[i - 1][1], "target": i == sno}
        for i in range(lo, hi + 1)
    ]


def _answer_lines(data: bytes | str, known_ids: set[str], extra: tuple[str, ...] = ()):
    """(line, object, question id, "Yes"/"No") per JSONL line; InputError on the first bad one."""
    for line, obj in jsonl_objects(data):
        for name in ("question_id", "answer", *extra):
            if name not in obj:
                raise InputError(f"missing {name!r}", line=line, field=name)
        qid = obj["question_id"]
        if isinstance(qid, int) and not isinstance(qid, bool):
            qid = str(qid)  # pandas-style numeric ids
        if not isinstance(qid, str) or qid not in known_ids:
            raise InputError(f"unknown question id {obj['question_id']!r}", line=line, field="question_id")
        answer = normalise_answer(obj["answer"])
        if answer is None:
            raise InputError(f"{obj['answer']!r} is not Yes or No", line=line, field="answer")
        yield line, obj, qid, answer


def parse_answers_jsonl(data: bytes | str, known_ids: set[str]) -> dict[str, str]:
    """question_id -> "Yes"/"No" from an agent's JSONL answers; InputError on the first bad line."""
    answers: dict[str, str] = {}
    for line, _, qid, answer in _answer_lines(data, known_ids):
        if qid in answers:
            raise InputError(f"duplicate answer for question {qid!r}", line=line, field="question_id")
        answers[qid] = answer
    return answers


def parse_annotator_answers_jsonl(data: bytes | str, known_ids: set[str]) -> dict[str, dict[str, str]]:
    """People's answers from an earlier study, one JSONL line per answer:
    {"question_id", "answer", "annotator"} -> annotator -> question_id -> "Yes"/"No".
    The annotator id is kept as text; an annotator may answer a question once."""
    out: dict[str, dict[str, str]] = {}
    for line, obj, qid, answer in _answer_lines(data, known_ids, extra=("annotator",)):
        who = obj["annotator"]
        if isinstance(who, bool) or not isinstance(who, (str, int)) or not str(who).strip():
            raise InputError("annotator must be a non-empty id", line=line, field="annotator")
        who = str(who).strip()
        if len(who) > 200:
            raise InputError("annotator ids are at most 200 characters", line=line, field="annotator")
        mine = out.setdefault(who, {})
        if qid in mine:
            raise InputError(f"annotator {who!r} answers question {qid!r} twice", line=line, field="question_id")
        mine[qid] = answer
    return out
