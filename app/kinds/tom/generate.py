"""Common-ToM question batteries from dialogues annotated for common ground (CG).

Input: one JSON object per dialogue, either a single JSON document (an object, or an array of
objects) or JSONL with one object per line:

    {"cid": "kitchen-1",
     "utterances": [{"speaker": "A", "text": "Are you still smoking?"}, ...],
     "propositions": [
        {"eno": 1, "text": "B is now not smoking",
         "labels": [{"sno": 4, "belief_A": "NB", "belief_B": "CT-", "cg_A": "NA", "cg_B": "NA"},
                    {"sno": 5, "belief_A": "CT-", "belief_B": "CT-", "cg_A": "RT", "cg_B": "RT"}]}]}

- `cid`: a non-empty string, unique in the file;
- `utterances`: speaker "A" or "B" and one line of text each (an utterance may also be
  written as the string "A: text");
- `propositions`: `eno` the event number, unique in the dialogue: a whole number (3), a dotted
  one as in the released files (12.4), or either as a string ("12.4"); it is kept as the text
  written, so a JSON number 12.10 is "12.10", distinct from 12.1 (JSON numbers with a fraction
  are read as their source text, never as floats). `text` is the proposition as it
  reads after "true that ...", and `labels` at the utterances (1-based `sno`, strictly
  increasing) where the beliefs (CT+, PS, CT-, NB) and CG (JA, IN, RT, NA) of both speakers
  are known.

As in the paper, questions are asked where a proposition is introduced (its first label) and
wherever a label changes (a label equal to the previous one of that proposition asks nothing):
18 per point, the six speaker chains times three certainties, answered by `rules.gold_answer`.

Errors are InputErrors naming the line of the JSON object holding the bad value and its path,
e.g. field 'propositions[0].labels[2].cg_A'.
"""

from __future__ import annotations

import json
import json.decoder
import json.scanner
import re
from dataclasses import dataclass

from app import jsonsafe
from app.errors import InputError
from app.textfiles import blank, decode_upload, first_line, numbered_lines, refuse_many_values, upload_bytes
from app.kinds.tom.formats import (
    MAX_CID_LENGTH,
    ToMQuestion,
    derived_id,
    eno_problem,
    parse_eno,
)
from app.kinds.tom.rules import BELIEFS, CERTAINTIES, CG_LABELS, CHAINS, SPEAKERS, STOP, gold_answer, question_text

LABEL_FIELDS = {"belief_A": BELIEFS, "belief_B": BELIEFS, "cg_A": CG_LABELS, "cg_B": CG_LABELS}


@dataclass(frozen=True)
class CGLabel:
    sno: int
    belief_A: str
    belief_B: str
    cg_A: str
    cg_B: str

    def values(self) -> tuple[str, str, str, str]:
        return (self.belief_A, self.belief_B, self.cg_A, self.cg_B)


@dataclass(frozen=True)
class CGProposition:
    eno: str  # as written, e.g. "12.4"
    text: str
    labels: tuple[CGLabel, ...]

    def points(self) -> list[CGLabel]:
        """The labels questions are asked at: the first, then each that differs from the one before."""
        return [lab for i, lab in enumerate(self.labels) if i == 0 or lab.values() != self.labels[i - 1].values()]


@dataclass(frozen=True)
class CGDialogue:
    cid: str
    utterances: tuple[tuple[str, str], ...]  # (speaker, text)
    propositions: tuple[CGProposition, ...]


# --- JSON with line numbers -------------------------------------------------------------
# json gives no positions for values; a pure-Python scanner lets us note where each object
# starts, so an error can name the line of the object holding the bad value.


class _Obj(dict):
    pos = 0


class _Number(str):
    """A JSON number with a fraction or exponent, as its source text (so 12.10 stays "12.10")."""

    def __repr__(self) -> str:
        return str(self)


def _decoder() -> json.JSONDecoder:
    # Integers past 64 bits (and past int()'s 4,300 digits) are refused as every upload's are.
    dec = json.JSONDecoder(object_pairs_hook=_Obj, parse_float=_Number, parse_int=jsonsafe.checked_int)

    def parse_object(s_and_end, *args):
        obj, end = json.decoder.JSONObject(s_and_end, *args)
        obj.pos = s_and_end[1] - 1  # index of the "{"
        return obj, end

    dec.parse_object = parse_object
    dec.scan_once = json.scanner.py_make_scanner(dec)
    return dec


def _load_documents(raw: bytes | str) -> list[tuple[object, str, int]]:
    """(value, source text, line offset) per dialogue: one JSON document, or JSONL lines, from
    the file's checked bytes (`upload_bytes`) or its text. A value read from one line has ""
    for its source (a line holds no "\n" to count): holding each line held it twice."""
    try:
        return _documents(raw)
    except jsonsafe.OutOfRange as exc:
        bad = jsonsafe.bad_number(raw, exc.text)
        raise InputError(bad.msg, line=bad.lineno) from None


_NOT_JSON_SPACE = re.compile(rb"[^ \t\r\n]")  # all the whitespace JSON allows around a value


def _documents(raw: bytes | str) -> list[tuple[object, str, int]]:
    """What parsing the whole text as one document gives, else its lines as JSONL (a document's
    error when its first line is not JSON either). The lines are decoded one at a time
    (`numbered_lines`: not splitlines(), JSON strings may hold U+2028 and friends); the text is
    decoded whole only for a document over several lines, which its parser needs whole."""
    refuse_many_values(raw, lines=False)
    dec = _decoder()
    data = raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogatepass")
    found = first_line(data)
    if found is None:  # parse_cg_dialogues refuses a blank file before
        raise InputError("the file is empty", line=1)
    line, first, start, end = found
    try:
        value = dec.decode(first)
    except json.JSONDecodeError:
        return _document(raw, dec)
    # The first line is a whole value: the file is that document when everything else is JSON's
    # whitespace (parsing the whole text would give the same value), else JSONL (it would fail).
    if _NOT_JSON_SPACE.search(data, 0, start) is None and _NOT_JSON_SPACE.search(data, end) is None:
        return [(d, "", line - 1) for d in (value if isinstance(value, list) else [value])]
    # As lines (each line's first value counts, and each line, blank too, is a string) before any is read.
    refuse_many_values(raw)
    docs = []
    for n, text in numbered_lines(raw):
        if text.strip():
            try:
                docs.append((dec.decode(text), "", n - 1))
            except json.JSONDecodeError as exc:
                raise InputError(f"not valid JSON (JSONL line): {exc.msg}", line=n) from None
    return docs


def _document(raw: bytes | str, dec: json.JSONDecoder) -> list[tuple[object, str, int]]:
    """The dialogues of a file whose first line is not a whole value: a document over several
    lines, decoded whole (`decode_upload`: refused when its text would take more than
    MAX_UPLOAD_BYTES), or its error."""
    text = decode_upload(raw)
    try:
        doc = dec.decode(text)
        return [(d, text, 0) for d in (doc if isinstance(doc, list) else [doc])]
    except json.JSONDecodeError as exc:
        refuse_many_values(raw)  # as lines, as JSONL is refused before its first line is read
        # Not JSONL either: report where the single document went wrong.
        raise InputError(f"not valid JSON: {exc.msg}", line=exc.lineno) from None


class _Reader:
    """Checks one dialogue's values, raising InputError with the object's line and the path."""

    def __init__(self, text: str, offset: int):
        self.text, self.offset = text, offset

    def fail(self, obj, path: str, message: str):
        pos = obj.pos if isinstance(obj, _Obj) else 0
        raise InputError(message, line=self.offset + self.text.count("\n", 0, pos) + 1, field=path or None)

    def obj(self, value, parent, path: str) -> _Obj:
        if not isinstance(value, dict):
            self.fail(parent, path, "must be a JSON object")
        return value

    def get(self, obj, key: str, path: str, kind: type):
        where = f"{path}.{key}" if path else key
        if key not in obj:
            self.fail(obj, where, "is missing")
        value = obj[key]
        if kind is int and (not isinstance(value, int) or isinstance(value, bool)):
            self.fail(obj, where, f"must be a whole number, not {value!r}")
        if kind is str and not (isinstance(value, str) and not isinstance(value, _Number) and value.strip()):
            self.fail(obj, where, f"must be a non-empty string, not {value!r}")
        if kind is list and not isinstance(value, list):
            self.fail(obj, where, "must be a list")
        return value

    def eno(self, obj, path: str) -> str:
        """The event number at obj["eno"]: a JSON number or a string, kept as text."""
        where = f"{path}.eno"
        if "eno" not in obj:
            self.fail(obj, where, "is missing")
        value = obj["eno"]
        text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
        eno = parse_eno(text) if isinstance(text, str) else None
        if eno is None:
            self.fail(obj, where, eno_problem(repr(value)))
        return eno

    def one_line(self, obj, path: str, text: str) -> str:
        if "\n" in text or "\r" in text or STOP in text or not text.strip():
            self.fail(obj, path, f"must be one non-empty line without {STOP}")
        return text.strip()


def _dialogue(doc, reader: _Reader) -> CGDialogue:
    d = reader.obj(doc, None, "")
    cid = reader.one_line(d, "cid", reader.get(d, "cid", "", str))
    if len(cid) > MAX_CID_LENGTH:
        reader.fail(d, "cid", f"a conversation id is at most {MAX_CID_LENGTH} characters")
    utterances = []
    for i, u in enumerate(reader.get(d, "utterances", "", list)):
        path = f"utterances[{i}]"
        if isinstance(u, str) and u[:1] in SPEAKERS and u[1:2] == ":":
            utterances.append((u[0], reader.one_line(d, path, u[2:])))
            continue
        u = reader.obj(u, d, path)
        speaker = reader.get(u, "speaker", path, str)
        if speaker not in SPEAKERS:
            reader.fail(u, f"{path}.speaker", f"must be A or B, not {speaker!r}")
        utterances.append((speaker, reader.one_line(u, f"{path}.text", reader.get(u, "text", path, str))))
    if not utterances:
        reader.fail(d, "utterances", "must not be empty")

    propositions, enos = [], set()
    for i, p in enumerate(reader.get(d, "propositions", "", list)):
        path = f"propositions[{i}]"
        p = reader.obj(p, d, path)
        eno = reader.eno(p, path)
        if eno in enos:
            reader.fail(p, f"{path}.eno", f"proposition {eno} appears twice")
        enos.add(eno)
        text = reader.one_line(p, f"{path}.text", reader.get(p, "text", path, str).rstrip("? "))
        labels = []
        for j, lab in enumerate(reader.get(p, "labels", path, list)):
            lpath = f"{path}.labels[{j}]"
            lab = reader.obj(lab, p, lpath)
            sno = reader.get(lab, "sno", lpath, int)
            if not 1 <= sno <= len(utterances):
                reader.fail(lab, f"{lpath}.sno", f"sno {sno} is outside the {len(utterances)} utterances")
            if labels and sno <= labels[-1].sno:
                reader.fail(lab, f"{lpath}.sno", f"sno {sno} must come after the previous label's {labels[-1].sno}")
            values = {}
            for name, allowed in LABEL_FIELDS.items():
                values[name] = reader.get(lab, name, lpath, str)
                if values[name] not in allowed:
                    reader.fail(lab, f"{lpath}.{name}", f"{values[name]!r} is not one of {', '.join(allowed)}")
            labels.append(CGLabel(sno=sno, **values))
        if not labels:
            reader.fail(p, f"{path}.labels", "must not be empty")
        propositions.append(CGProposition(eno=eno, text=text, labels=tuple(labels)))
    return CGDialogue(cid=cid, utterances=tuple(utterances), propositions=tuple(propositions))


def parse_cg_dialogues(data: bytes | str) -> list[CGDialogue]:
    """Every dialogue of a CG-annotated JSON/JSONL file, or InputError on the first problem."""
    raw = upload_bytes(data)  # checked, and read a line at a time
    if blank(raw):
        raise InputError("the file is empty", line=1)
    if (line := jsonsafe.unstorable_escape_line(raw)) is not None:
        raise InputError("a string holds U+0000 or a lone surrogate, which cannot be stored", line=line)
    dialogues, cids = [], set()
    try:
        docs = _load_documents(raw)
    except RecursionError:
        raise InputError("the JSON is nested too deeply", line=1) from None
    for doc, source, offset in docs:
        reader = _Reader(source, offset)
        dialogue = _dialogue(doc, reader)
        if dialogue.cid in cids:
            reader.fail(doc, "cid", f"conversation {dialogue.cid!r} appears twice")
        cids.add(dialogue.cid)
        dialogues.append(dialogue)
    return dialogues


def generate_battery(dialogues) -> list[ToMQuestion]:
    """18 questions per (proposition, point), answered by the rules, ids "{cid}:{sno}:{eno}:{chain}:{certainty}"."""
    questions = []
    for d in dialogues:
        for p in d.propositions:
            for lab in p.points():
                belief = {"A": lab.belief_A, "B": lab.belief_B}
                cg = {"A": lab.cg_A, "B": lab.cg_B}
                for chain in CHAINS:
                    for certainty in CERTAINTIES:
                        questions.append(
                            ToMQuestion(
                                question_id=derived_id(d.cid, lab.sno, p.eno, chain, certainty),
                                sno=lab.sno,
                                eno=p.eno,
                                belief_Q=certainty,
                                order=len(chain),
                                chain=chain,
                                proposition=p.text,
                                question=question_text(chain, certainty, p.text),
                                answer="Yes" if gold_answer(chain, certainty, belief, cg) else "No",
                                context_type="generated",
                                cid=d.cid,
                                annotator="rules",
                                utterances=list(d.utterances),
                                belief_A=lab.belief_A,
                                belief_B=lab.belief_B,
                                cg_A=lab.cg_A,
                                cg_B=lab.cg_B,
                            )
                        )
    return questions
