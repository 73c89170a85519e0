"""A production install starts its worker (issue 10.2): `pip install .` with no extras (what
the README's production section names), then `proctor worker` against a real Redis. The
worker's Redis transport must come with the install, not with the test extras."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import venv

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.redis


def test_a_plain_install_starts_the_worker(tmp_path, redis_server):
    env_dir = tmp_path / "venv"
    # A bare venv that this pip installs into (`pip --python`): the same resolution as `pip
    # install .` run inside it, without ensurepip's copy of pip and setuptools (~10 s), and
    # without compiling every installed module to bytecode (--no-compile: Python compiles
    # what the worker imports as it imports it).
    venv.EnvBuilder(with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    # (COVERAGE_PROCESS_CONFIG: `make test` would measure this pip; the new venv has no coverage.)
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "VIRTUAL_ENV", "DATABASE_URL", "REDIS_URL", "STORAGE_URL", "COVERAGE_PROCESS_CONFIG")
    }
    install = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-compile", str(ROOT)],
        capture_output=True,
        text=True,
        env=clean,
        cwd=tmp_path,
        timeout=900,
    )
    assert install.returncode == 0, install.stderr[-4000:]
    # Only what a plain install brings: no torch, no test tools.
    for module in ("torch", "pytest"):
        probe = subprocess.run([str(py), "-c", f"import {module}"], capture_output=True, env=clean)
        assert probe.returncode != 0, f"{module} came with a plain install"

    log_path = tmp_path / "worker.log"
    env = {
        **clean,
        "REDIS_URL": redis_server,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'p.db'}",
        "STORAGE_URL": f"file://{tmp_path / 'blobs'}",
        "PYTHONUNBUFFERED": "1",
    }
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [str(env_dir / "bin" / "proctor"), "worker", "--concurrency", "1"],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=tmp_path,
        )
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                text = log_path.read_text(errors="replace")
                if re.search(r"\S+@\S+ ready\.", text):
                    break
                assert proc.poll() is None, f"the worker exited with {proc.returncode}:\n{text[-4000:]}"
                time.sleep(0.5)
            else:
                pytest.fail(f"the worker did not get ready:\n{log_path.read_text(errors='replace')[-4000:]}")
            assert "proctor.run_job" in log_path.read_text(errors="replace")
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
