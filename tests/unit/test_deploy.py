"""What can be checked of docker-compose.yml without a Docker engine."""

from pathlib import Path

import yaml
from click.testing import CliRunner

from app.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_compose_services_and_commands_exist():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"postgres", "redis", "minio", "web", "worker", "exports-worker", "migrate"} <= set(services)
    runner = CliRunner()
    for name in ("web", "worker", "exports-worker", "migrate"):
        cmd = services[name]["command"]
        assert cmd[0] == "proctor"
        # Every proctor subcommand used in compose exists and accepts its options.
        result = runner.invoke(main, [cmd[1], "--help"])
        assert result.exit_code == 0, (name, result.output)
        for opt in [c for c in cmd[2:] if c.startswith("--")]:
            assert opt in result.output, (name, opt)
    env = services["web"]["environment"]
    assert env["STORAGE_URL"].startswith("s3://") and "DATABASE_URL" in env and "REDIS_URL" in env
    assert "gpu" in str(services["worker"]["deploy"])
    # Both queues have a worker, and exactly one worker runs the sweeper's schedule.
    queues = [
        services[n]["command"][services[n]["command"].index("--queues") + 1] for n in ("worker", "exports-worker")
    ]
    assert sorted(queues) == ["exports", "models"]
    assert sum("--beat" in s.get("command", []) for s in services.values()) == 1


def test_the_web_server_is_proctor_serve_with_uvicorns_proxy_handling_off(monkeypatch):
    """Docker and compose start `proctor serve`, never uvicorn directly, and `proctor serve`
    runs uvicorn with proxy_headers off: the client's address comes from X-Forwarded-For only
    through the app's TRUSTED_PROXIES, which compose passes on."""
    import uvicorn

    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert compose["services"]["web"]["command"][:2] == ["proctor", "serve"]
    assert "TRUSTED_PROXIES" in compose["services"]["web"]["environment"]
    cmd = [line for line in (ROOT / "Dockerfile").read_text().splitlines() if line.startswith("CMD")]
    assert cmd == ['CMD ["proctor", "serve", "--host", "0.0.0.0"]']

    seen = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: seen.update(kw))
    monkeypatch.setattr("app.jobs.start_inprocess_worker", lambda *a, **k: None)
    result = CliRunner().invoke(main, ["serve", "--port", "8123"])
    assert result.exit_code == 0, result.output
    assert seen["proxy_headers"] is False and seen["port"] == 8123
