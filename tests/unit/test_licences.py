"""Proctor is Apache-2.0 (LICENSE). Every package it runs with (its dependencies and theirs, and
the model extra) must carry a licence that allows that: permissive, weak copyleft, or GPL-3.0
(Apache-2.0 code may be combined with GPLv3 code; a bundle holding `krippendorff` is then
distributed under GPLv3 as a whole, README "Licence"). A new dependency under another licence
(GPL-2.0-only, AGPL, non-commercial, none declared) fails here, naming it."""

from __future__ import annotations

import importlib.metadata as md
import re

from packaging.requirements import Requirement

# What the licence fields of the packages we use say, mapped to families known to be compatible.
ALLOWED = re.compile(
    r"\b(MIT|BSD|Apache|ISC|PSF|Python Software Foundation|MPL|Mozilla Public|"
    r"LGPL|Lesser General Public|GPL-3\.0-or-later|GPLv3|Unlicense|0BSD|HPND|Zlib|"
    r"CC0|Public Domain)",
    re.I,
)
REFUSED = re.compile(r"AGPL|Affero|GPL-2\.0-only|GPLv2 only|non-?commercial|Proprietary|CC-BY-NC", re.I)


def licence_of(dist: md.Distribution) -> str:
    meta = dist.metadata
    fields = [meta.get("License-Expression") or ""]
    fields += [c for c in (meta.get_all("Classifier") or []) if c.startswith("License ::")]
    if not fields[0] and not fields[1:]:
        fields.append((meta.get("License") or "").splitlines()[0] if meta.get("License") else "")
    if not any(fields):  # no licence in the metadata: the licence file the wheel ships (ppi-python's)
        for f in dist.files or []:
            if f.name.upper().startswith(("LICENSE", "LICENCE", "COPYING")) and ".dist-info" in str(f.parent):
                text = (dist.read_text(f.name) or "").strip()
                fields.append(text.splitlines()[0] if text else "")
                break
    return " | ".join(f for f in fields if f)


def closure(root: str, extras: tuple[str, ...]) -> dict[str, md.Distribution]:
    """The installed distributions `root[extras]` needs, recursively (environment markers
    evaluated for this interpreter)."""
    seen: dict[str, md.Distribution] = {}
    todo = [(root, extras)]
    while todo:
        name, wanted = todo.pop()
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue  # an optional dependency for another platform
        key = dist.metadata["Name"].lower().replace("_", "-")
        first = key not in seen
        seen[key] = dist
        for spec in dist.requires or []:
            req = Requirement(spec)
            if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in ("", *wanted)):
                if req.name.lower().replace("_", "-") not in seen or first:
                    todo.append((req.name, tuple(req.extras)))
    seen.pop("proctor", None)
    return seen


def test_every_package_proctor_runs_with_has_a_compatible_licence():
    deps = closure("proctor", ("models",))
    assert {"fastapi", "sqlalchemy", "krippendorff", "torch"} <= set(deps), sorted(deps)
    bad = {}
    for name, dist in sorted(deps.items()):
        text = licence_of(dist)
        if not text or REFUSED.search(text) or not ALLOWED.search(text):
            bad[name] = text or "(no licence declared)"
    assert not bad, f"packages whose licence Apache-2.0 Proctor cannot ship with: {bad}"


def test_the_check_refuses_what_it_should():
    for text in ("GPL-2.0-only", "AGPL-3.0", "CC-BY-NC-4.0", "Proprietary"):
        assert REFUSED.search(text) or not ALLOWED.search(text), text
    for text in ("MIT", "BSD-3-Clause", "Apache-2.0", "GPL-3.0-or-later", "LGPL-3.0-only", "MPL-2.0"):
        assert ALLOWED.search(text) and not REFUSED.search(text), text


def test_the_project_declares_its_licence():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    assert "Apache License" in (root / "LICENSE").read_text()[:200]
    assert 'license = "Apache-2.0"' in (root / "pyproject.toml").read_text()
