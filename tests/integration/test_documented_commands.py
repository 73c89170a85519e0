"""Every `proctor ...` command that README.md and docs/ name exists: each answers `--help` with
status 0 through the installed `proctor`. The docs once sent researchers to a
`proctor nav import-house` that did not exist."""

from __future__ import annotations

import fnmatch
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import click

from tests.conftest import untraced

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]
PROCTOR = Path(sys.executable).parent / "proctor"  # the installed command, as a user runs it
# `proctor` as a command (not proctor_client, proctor-x, proctor.requests), then its words: one
# name, alternatives (`speaker|listener`, `demo | serve`) or a glob (`import-*`).
MENTION = re.compile(r"(?<![\w./-])proctor(?![\w.-])")
WORD = re.compile(r" ?([a-z*][a-z0-9*-]*(?: ?\| ?[a-z*][a-z0-9*-]*)*)(?![\w.-])")


def _sub(group: click.Group, ctx: click.Context, pattern: str) -> list[tuple[str, click.Command]]:
    names = fnmatch.filter(group.list_commands(ctx), pattern) if "*" in pattern else [pattern]
    return [(n, c) for n in names if (c := group.get_command(ctx, n)) is not None]


def named_commands() -> tuple[dict[tuple[str, ...], str], list[str]]:
    """The command paths the documents name (each with where it is first named), and the
    mentions that name no command."""
    from app.cli import main

    ctx = click.Context(main)
    found: dict[tuple[str, ...], str] = {}
    unknown: list[str] = []
    for doc in DOCUMENTS:
        # One line per code block line or paragraph line; a code span may wrap, so runs of
        # whitespace are one space (a backtick or any other character ends the words).
        text = re.sub(r"\s+", " ", doc.read_text(encoding="utf-8"))
        for m in MENTION.finditer(text):
            where = f"{doc.relative_to(ROOT)}: {text[m.start() : m.start() + 60]!r}"
            paths = [((), main)]
            pos = m.end()
            while (w := WORD.match(text, pos)) and all(isinstance(c, click.Group) for _, c in paths):
                pos = w.end()
                deeper = []
                for path, group in paths:
                    for pattern in re.split(r" ?\| ?", w.group(1)):
                        matched = _sub(group, ctx, pattern)
                        if not matched:
                            unknown.append(f"{where}: no command {' '.join((*path, pattern))!r}")
                        deeper += [((*path, n), c) for n, c in matched]
                paths = deeper
            for path, _ in paths:
                if path:
                    found.setdefault(path, where)
    return found, unknown


def test_every_command_the_docs_name_answers_help():
    found, unknown = named_commands()
    assert unknown == []
    # The commands the README's own list names are among those found (the parser reads them).
    assert {
        ("navigation", "import-house"),
        ("remote", "create-study"),
        ("train", "listener"),
        ("demo",),
        ("navigation", "import-graphs"),
        ("navigation", "import-panoramas"),
    } <= set(found)

    def help_of(path: tuple[str, ...]) -> tuple[tuple[str, ...], int, str]:
        ran = subprocess.run([str(PROCTOR), *path, "--help"], capture_output=True, text=True, cwd=ROOT, timeout=120)
        return path, ran.returncode, ran.stdout + ran.stderr

    # Untraced (44 processes: with coverage's tracer 141 s of CPU, without it 76 s): all they
    # lose from the report is the two groups' callbacks (8 lines), which the CLI's own tests
    # run; the commands' definitions are read by this process's import of app.cli above.
    with untraced(), ThreadPoolExecutor(4) as pool:
        results = list(pool.map(help_of, sorted(found)))
    failed = [
        f"proctor {' '.join(p)} --help: status {rc} ({found[p]})\n{out[-300:]}"
        for p, rc, out in results
        if rc != 0 or "Usage: proctor " + " ".join(p) not in out
    ]
    assert failed == []
