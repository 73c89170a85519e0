"""Per-agent metrics a researcher imports to compare with the STS score (paper 004, section 4.2
compares STS rankings with other evaluations): a CSV with an `agent` column and one column per
metric. They are kept in the study's kind settings, and the leaderboard gives Spearman's rank
correlation of the agents' success shares with each of them."""

from __future__ import annotations

import csv
import math

from app.errors import InputError
from app.textfiles import csv_reader, csv_rows, head, upload_bytes

MAX_METRICS = 20
MAX_NAME = 64


def parse_metrics(data: bytes) -> dict[str, dict[str, float]]:
    """{metric: {agent: value}} from CSV (UTF-8, optionally gzipped). A blank cell is a value
    the agent does not have; anything else must be a finite number. Errors name the line
    and the column."""
    text = upload_bytes(data)  # checked; its lines decoded as they are read
    try:
        dialect = csv.Sniffer().sniff(head(text, 4096), delimiters=",;\t")
    except csv.Error:
        dialect = csv.excel
    # Lines end at "\n" only, as io.StringIO(text) read them; a cell over the csv limit: a 422.
    rows = csv_rows(csv_reader(text, dialect, newline="\n"), text)
    header = next(rows, None)
    if not header or header[0].strip().lower() != "agent":
        raise InputError('the first column must be headed "agent"', line=1, field="agent")
    names = [h.strip() for h in header[1:]]
    if not names:
        raise InputError('add at least one metric column after "agent"', line=1)
    if len(names) > MAX_METRICS:
        raise InputError(f"at most {MAX_METRICS} metric columns", line=1)
    for name in names:
        if not name or len(name) > MAX_NAME:
            raise InputError(f"each metric column needs a name of 1 to {MAX_NAME} characters", line=1)
    if len(set(names)) != len(names):
        raise InputError("two metric columns have the same name", line=1)
    out: dict[str, dict[str, float]] = {n: {} for n in names}
    seen: set[str] = set()
    for line, row in enumerate(rows, start=2):
        if not any(c.strip() for c in row):
            continue
        agent = row[0].strip()
        if not agent:
            raise InputError("is missing", line=line, field="agent")
        if agent in seen:
            raise InputError(f"{agent!r} has a row already", line=line, field="agent")
        seen.add(agent)
        if len(row) > len(header):
            raise InputError(f"{len(row)} cells for {len(header)} columns", line=line)
        for name, cell in zip(names, row[1:]):
            cell = cell.strip()
            if not cell:
                continue
            try:
                value = float(cell)
            except ValueError:
                value = math.nan
            if not math.isfinite(value):
                raise InputError(f"must be a number, not {cell!r}", line=line, field=name)
            out[name][agent] = value
    if not seen:
        raise InputError("the file has a header but no agents", line=2, field="agent")
    return out
