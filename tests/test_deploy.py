"""The deployment description: docker-compose config validates; the images' commands exist."""

from __future__ import annotations

import subprocess

import yaml

from tests.conftest import ROOT
from tests.system_packages import require_program


def test_compose_file_validates():
    result = subprocess.run([require_program("docker-compose"), "-f", str(ROOT / "docker-compose.yml"), "config", "-q"],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr


def test_compose_describes_the_deployment():
    spec = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = spec["services"]
    assert {"postgres", "redis", "minio", "web", "worker-cpu", "worker-gpu"} <= set(services)
    command = services["worker-cpu"]["command"]
    assert command[command.index("-Q") + 1] == "convert,cpu"
    assert services["worker-gpu"]["deploy"]["resources"]["reservations"]["devices"][0]["driver"] == "nvidia"
    env = services["web"]["environment"]
    assert env["HUB_STORAGE"] == "s3" and env["DATABASE_URL"].startswith("postgres://")
    assert (ROOT / services["web"]["build"]["dockerfile"]).exists()


def test_migrations_are_one_step_and_web_replicas_are_probed_for_readiness():
    """Issue 35: every web container ran `migrate` before serving (replicas raced); now one `migrate` step runs
    before any web or worker container, and the web containers' health is /readyz."""
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    assert services["migrate"]["command"][-2:] == ["migrate", "--noinput"]
    for name in ("web", "worker-cpu", "worker-gpu"):
        assert "migrate" not in " ".join(services[name]["command"]), name
        assert services[name]["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}, name
    assert "/readyz" in " ".join(services["web"]["healthcheck"]["test"])
