"""The core names no kind, and nothing imports in a circle (issue 9).

The core is `app/` outside `app/kinds/<kind>/` and `workers/` outside `workers/<kind>/`, plus the
core templates. It may know `app.kinds` (the registry and the `TaskKind` interface), never a
kind: no import of a kind's package, no string equal to a kind's name, no template comparing
`kind == "..."`. Every import statement counts, those inside functions too.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

from tests.conftest import ROOT

BUILT_IN = sorted(p.name for p in (ROOT / "app" / "kinds").iterdir() if (p / "__init__.py").exists())
WORKER_KINDS = sorted(p.name for p in (ROOT / "workers").iterdir() if (p / "__init__.py").exists())


def _modules() -> dict[str, Path]:
    out = {}
    for folder in ("app", "workers"):
        for path in (ROOT / folder).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = path
    return out


MODULES = _modules()


def _is_core(module: str) -> bool:
    parts = module.split(".")
    if parts[:2] == ["app", "kinds"] and len(parts) >= 3 and parts[2] in BUILT_IN:
        return False
    if parts[0] == "workers" and len(parts) >= 2 and parts[1] in WORKER_KINDS:
        return False
    return True


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, imported name) of every import statement, nested ones included. `from p import m`
    counts as importing the module p.m when there is one (a sibling, not the package p)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                out.append((node.lineno, sub if sub in MODULES else node.module))
    return out


def _names_a_kind(imported: str) -> bool:
    parts = imported.split(".")
    return (parts[:2] == ["app", "kinds"] and len(parts) >= 3 and parts[2] in BUILT_IN) or (
        parts[0] == "workers" and len(parts) >= 2 and parts[1] in WORKER_KINDS
    )


def test_the_kinds_are_where_the_scan_looks():
    # The scan must see the built-in kinds, or it would pass by finding nothing.
    assert {"tom", "navigation"} <= set(BUILT_IN)
    assert "navigation" in WORKER_KINDS
    assert sum(_is_core(m) for m in MODULES) > 20


def test_the_core_imports_no_kind():
    offenders = [
        f"{MODULES[m].relative_to(ROOT)}:{line} imports {name}"
        for m in MODULES
        if _is_core(m)
        for line, name in _imports(MODULES[m])
        if _names_a_kind(name)
    ]
    assert not offenders, "\n".join(offenders)


def test_the_core_spells_no_kind_name():
    """No string literal equal to a kind's name (`study.kind == "navigation"`), and no kind's
    job, module or template path ("workers.navigation...", "kinds/tom/...") in the core."""
    pattern = re.compile(
        r"^(?:%s)$|(?:app\.kinds|workers|kinds/)[./](?:%s)\b" % ("|".join(BUILT_IN), "|".join(BUILT_IN + WORKER_KINDS))
    )
    offenders = []
    for m, path in MODULES.items():
        if not _is_core(m):
            continue
        tree = ast.parse(path.read_text("utf-8"))
        docstrings = {
            id(n.body[0].value)
            for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and n.body
            and isinstance(n.body[0], ast.Expr)
            and isinstance(n.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docstrings
                and pattern.search(node.value)
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value!r}")
    assert not offenders, "\n".join(offenders)


def test_core_templates_name_no_kind():
    pattern = re.compile(
        r"""kind(?:\.name)?\s*[!=]=\s*["'](%s)["']|kinds/(%s)/""" % ("|".join(BUILT_IN), "|".join(BUILT_IN))
    )
    offenders = []
    for path in (ROOT / "templates").rglob("*.html"):
        for n, line in enumerate(path.read_text("utf-8").splitlines(), 1):
            if pattern.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{n} {line.strip()}")
    assert not offenders, "\n".join(offenders)
    assert not (ROOT / "templates" / "kinds").exists(), "kind templates live in the kind's package"


def test_the_scan_catches_what_it_is_for(tmp_path):
    """The checks above fail on the mistakes they exist for (so a passing run means something)."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from app.kinds.navigation.views import router\n"
        "def f(study):\n    import workers.navigation.generate\n"
        '    return study.kind == "navigation"\n'
    )
    assert [n for _, n in _imports(bad) if _names_a_kind(n)] == [
        "app.kinds.navigation.views",
        "workers.navigation.generate",
    ]


def _import_graph() -> dict[str, set[str]]:
    def resolve(name: str) -> str | None:
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = defaultdict(set)
    for m, path in MODULES.items():
        for _, name in _imports(path):
            target = resolve(name)
            if target and target != m:
                graph[m].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out = []
    counter = 0
    for root in sorted(MODULES):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def test_no_module_imports_in_a_circle():
    """Tables are collected through the kind registry (app.models.load_models), so app.db, the
    lowest module, imports no model, and no loop runs through it (or anywhere else)."""
    cycles = _cycles(_import_graph())
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_the_cycle_finder_finds_a_cycle():
    graph = defaultdict(set, {"app.db": {"app.models"}, "app.models": {"app.jobs"}, "app.jobs": {"app.db"}})
    assert _cycles(graph) == [["app.db", "app.jobs", "app.models"]]
