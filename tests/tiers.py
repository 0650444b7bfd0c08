"""The tiers' own rules, a pytest plugin loaded before Django reads its settings (``-p tests.tiers`` in
pyproject.toml): every test process gets a var dir of its own; the fast tier holds each test to a time budget;
the tier scripts check that a run leaves no new file in the checkout (docs/developing/tests.md)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

# Each pytest process (each xdist worker too) gets its own HUB_VAR_DIR before hub.settings is read, and the
# processes its tests start inherit it: a hub serving from this checkout (`make run`, var/) and the tests never
# meet each other's sockets, caches and files, and two runs of the suite do not either.
VAR_DIR = tempfile.mkdtemp(prefix="hub-test-var-")
os.environ["HUB_VAR_DIR"] = VAR_DIR

# The fast tier's budget per test (scripts/test-fast.sh sets HUB_TEST_BUDGET_S; unset or 0: none), multiplied by
# the load factor: HUB_TEST_LOAD_FACTOR when set, else the machine's load per core (at least 1), read when the run
# starts and again when each test ends, the higher of the two: a machine whose load rose during the run (other
# sessions' tests) gives each test the time that load takes from it.
BUDGET_S = float(os.environ.get("HUB_TEST_BUDGET_S") or 0)
FIXED_FACTOR = os.environ.get("HUB_TEST_LOAD_FACTOR")


def load_factor() -> float:
    """The machine's load per core now, at least 1 (or HUB_TEST_LOAD_FACTOR, fixed)."""
    if FIXED_FACTOR:
        return float(FIXED_FACTOR)
    return max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))


START_FACTOR = load_factor()
TIER_S = float(os.environ.get("HUB_TEST_TIER_S") or 0)  # the whole tier's wall-time target, printed against
_setup_key = pytest.StashKey[float]()  # a test's own setup time, for its call's report
_shared_s = 0.0  # time the current test's setup spent in fixtures of a wider scope (not charged to it)
_started = time.monotonic()
_before: set[str] | None = None


def cpu_times() -> tuple[int, int]:
    """The machine's (busy, total) CPU time in ticks since boot (``/proc/stat``); (0, 0) where there is none."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle and iowait
    return sum(fields[:8]) - idle, sum(fields[:8])


_cpu_start = cpu_times()


def checkout_entries(root: Path) -> set[str]:
    """The checkout's untracked files (git's view: not the ignored ones) and every name at its root."""
    # test-output/ is the suite's own output folder (the browser tests' screenshots, for people to look at; ignored
    # by git), as the caches are pytest's and ruff's
    names = {f"/{name}" for name in os.listdir(root) if name not in {".pytest_cache", ".ruff_cache", "test-output"}}
    if (root / ".git").exists():
        out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=root,
                             capture_output=True, text=True, timeout=60).stdout
        names |= {line[3:] for line in out.splitlines() if line.startswith("??")}
    return names


def controller(config) -> bool:
    return not hasattr(config, "workerinput")


def pytest_sessionstart(session) -> None:
    global _before
    if os.environ.get("HUB_TEST_CLEAN_CHECKOUT") and controller(session.config):
        _before = checkout_entries(session.config.rootpath)


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef, request):
    global _shared_s
    start = time.perf_counter()
    try:
        return (yield)
    finally:
        if fixturedef.scope != "function":
            _shared_s += time.perf_counter() - start


def pytest_runtest_logstart(nodeid, location) -> None:
    global _shared_s
    _shared_s = 0.0


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if BUDGET_S and report.passed and report.when in ("setup", "call"):
        if report.when == "setup":
            item.stash[_setup_key] = max(0.0, report.duration - _shared_s)
        else:
            setup = item.stash.get(_setup_key, 0.0)
            factor = max(START_FACTOR, load_factor())
            if setup + report.duration > BUDGET_S * factor:
                report.outcome = "failed"
                report.longrepr = (
                    f"{item.nodeid} took {setup + report.duration:.2f} s (setup {setup:.2f} s, call "
                    f"{report.duration:.2f} s): over the fast tier's budget of {BUDGET_S:g} s x load factor "
                    f"{factor:.2f} (the load per core). Mark it slow (and cpu if it uses only its own process's "
                    "CPU), or make it faster: docs/developing/tests.md. HUB_TEST_LOAD_FACTOR sets the factor.")
    return report



def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if not controller(config):
        return
    wall = time.monotonic() - _started
    if TIER_S:
        load = os.getloadavg()[0]
        terminalreporter.write_line(
            f"tier wall time: {wall:.0f} s against a target of {TIER_S:g} s on a quiet machine (load {load:.1f} "
            f"on {os.cpu_count()} cores; per-test budget {BUDGET_S:g} s x the load per core, {START_FACTOR:.2f} at the "
            "start)")
    busy, total = (now - then for now, then in zip(cpu_times(), _cpu_start, strict=True))
    if total and wall > 60:  # is the run bound by the CPUs or by waiting? (all processes)
        terminalreporter.write_line(f"the machine's {os.cpu_count()} CPUs were busy {100 * busy / total:.0f} % of this "
                                    f"run's {wall:.0f} s")
    if getattr(config, "_tiers_new_files", None):
        terminalreporter.write_line(f"the run left new files in the checkout: {', '.join(config._tiers_new_files)} "
                                    "(tests write under tmp_path or HUB_VAR_DIR, never into the checkout)", red=True)


def pytest_sessionfinish(session, exitstatus) -> None:
    if _before is not None:
        session.config._tiers_new_files = sorted(checkout_entries(session.config.rootpath) - _before)
        # HUB_TEST_CLEAN_CHECKOUT=report names the new files without failing the run (docs/developing/tests.md);
        # any other value fails it.
        if session.config._tiers_new_files and exitstatus == 0 and os.environ["HUB_TEST_CLEAN_CHECKOUT"] != "report":
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_unconfigure(config) -> None:
    shutil.rmtree(VAR_DIR, ignore_errors=True)
