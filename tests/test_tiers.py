"""The tiers' rules (tests/tiers.py): a var dir per test process, the fast tier's budget per test, and the check
that a run leaves no new file in the checkout; the last two through a pytest of their own on a folder of tests."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parent.parent


def test_this_process_reads_and_writes_under_a_var_dir_of_its_own():
    var = Path(os.environ["HUB_VAR_DIR"])
    assert settings.VAR_DIR == var.resolve() and var.is_dir()
    assert var.parent == Path(tempfile.gettempdir()) and var.name.startswith("hub-test-var-")
    checkout_var = str(ROOT / "var")
    pointing_there = {name for name in dir(settings) if name.isupper()
                      and isinstance(value := getattr(settings, name), (str, Path))
                      and str(value).startswith(checkout_var)}
    assert not pointing_there  # nothing a test reads or writes lies in the checkout's var/


def test_the_budget_follows_the_load_per_core_as_it_is_when_a_test_ends(monkeypatch):
    from tests import tiers

    monkeypatch.setattr(tiers, "FIXED_FACTOR", None)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(os, "getloadavg", lambda: (9.0, 3.0, 1.0))  # other sessions' tests started meanwhile
    assert tiers.load_factor() == 4.5
    monkeypatch.setattr(os, "getloadavg", lambda: (0.4, 0.4, 0.4))
    assert tiers.load_factor() == 1.0  # never below the quiet machine's budget
    monkeypatch.setattr(tiers, "FIXED_FACTOR", "3")
    assert tiers.load_factor() == 3.0


SUITE = '''
import time
import pytest

@pytest.fixture(scope="session")
def shared():
    time.sleep(0.6)  # charged to no test: fixtures wider than a test are shared

def test_quick(shared):
    pass

def test_slow():
    time.sleep(0.6)

def test_writes_into_the_checkout():
    open("stray", "w").close()
'''


def run_suite(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    (tmp_path / "test_suite.py").write_text(SUITE)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    tiers = ("HUB_TEST_BUDGET_S", "HUB_TEST_TIER_S", "HUB_TEST_CLEAN_CHECKOUT")  # not the outer run's (make test's)
    environ = {**{k: v for k, v in os.environ.items() if k not in tiers}, "PYTHONPATH": str(ROOT),
               "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "HUB_TEST_LOAD_FACTOR": "1", **env}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.tiers", "-p", "no:cacheprovider", "-rA",
                           "test_suite.py"], cwd=tmp_path, env=environ, capture_output=True, text=True, timeout=60)


@pytest.mark.slow
@pytest.mark.cpu
def test_a_test_over_the_budget_fails_and_says_to_mark_it_slow(tmp_path):
    out = run_suite(tmp_path, HUB_TEST_BUDGET_S="0.3", HUB_TEST_TIER_S="90", HUB_TEST_CLEAN_CHECKOUT="1")
    assert out.returncode == 1, out.stdout
    assert "PASSED test_suite.py::test_quick" in out.stdout
    assert "FAILED test_suite.py::test_slow" in out.stdout
    assert "over the fast tier's budget of 0.3 s x load factor 1.00 (the load per core). Mark it slow" in out.stdout
    assert "tier wall time:" in out.stdout and "against a target of 90 s" in out.stdout
    assert "the run left new files in the checkout: /stray" in out.stdout


@pytest.mark.slow
@pytest.mark.cpu
def test_without_a_budget_only_new_files_fail_the_run(tmp_path):
    out = run_suite(tmp_path)
    assert out.returncode == 0 and "3 passed" in out.stdout, out.stdout  # make test's own runs: no budget
    assert "tier wall time" not in out.stdout
    (tmp_path / "stray").unlink()
    out = run_suite(tmp_path, HUB_TEST_CLEAN_CHECKOUT="1")
    assert out.returncode == 1 and "3 passed" in out.stdout, out.stdout
    assert "the run left new files in the checkout: /stray" in out.stdout
