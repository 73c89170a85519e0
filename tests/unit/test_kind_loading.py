"""The kinds are imported once per process, however many requests ask for them first."""

from __future__ import annotations

import threading
import time

import app.kinds as kinds


def test_concurrent_first_calls_import_the_kinds_once(monkeypatch):
    real, calls = kinds._discover, []

    def slow_discover():
        calls.append(threading.get_ident())
        time.sleep(0.2)  # importing torch and minigrid takes seconds
        return real()

    monkeypatch.setattr(kinds, "_discover", slow_discover)
    monkeypatch.setattr(kinds, "_registry", {})
    gate, seen = threading.Barrier(8), []

    def first_request():
        gate.wait()
        seen.append(kinds.get_kind("tom").name)

    threads = [threading.Thread(target=first_request) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and seen == ["tom"] * 8
