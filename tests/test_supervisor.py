"""hub.supervisor: a child that exits is started again, after pauses that double while it keeps failing."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from hub.supervisor import Supervised, stop_all


def run_until_restarted(child: Supervised, times: int, said: list) -> None:
    """Start ``child`` and poll it (as hub_serve does) until it was restarted ``times`` times (30 s at most)."""
    child.start()
    deadline = time.monotonic() + 30
    while child.restarts < times:
        assert time.monotonic() < deadline, said
        child.poll()
        time.sleep(0.02)


def test_a_crashing_child_is_restarted_with_growing_pauses_and_stopped_by_pid():
    said: list[tuple[float, str]] = []
    child = Supervised("the crasher", [sys.executable, "-c", "raise SystemExit(3)"], {},
                       lambda message: said.append((time.monotonic(), message)), first_pause_s=0.2, max_pause_s=0.8)
    run_until_restarted(child, 4, said)
    exits = [(when, text) for when, text in said if "exited with status 3" in text]
    assert [text.rsplit("restarting in ", 1)[1] for _, text in exits[:4]] == ["0.2 s", "0.4 s", "0.8 s", "0.8 s"]
    restarts = [when for when, text in said if "restarted" in text][:4]
    gaps = [later - earlier for (earlier, _), later in zip(exits[:4], restarts, strict=True)]
    assert all(gap >= pause - 0.01 for gap, pause in zip(gaps, (0.2, 0.4, 0.8, 0.8), strict=True)), gaps
    child.stop()


def test_a_child_that_ran_long_enough_starts_again_from_the_first_pause():
    said: list[str] = []
    child = Supervised("the sleeper", [sys.executable, "-c", "import time; time.sleep(0.3)"], {}, said.append,
                       first_pause_s=0.1, max_pause_s=5, stable_s=0.2)
    run_until_restarted(child, 3, said)
    assert all(text.endswith("restarting in 0.1 s") for text in said if "exited" in text)
    child.stop()
    assert child.proc.poll() is not None and child.restart_at is None  # stopped, and not started again
    time.sleep(0.3)
    child.poll()
    assert child.restarts == 3 and child.restart_at is None


@pytest.mark.slow
@pytest.mark.cpu  # waits out a child that ignores SIGTERM
def test_children_stop_together_and_one_that_ignores_sigterm_is_killed_at_the_deadline():
    """Issue 41, point 14: hub_serve stopped its children one after another, so their shutdowns added up."""
    slow_exit = "import signal, sys, time\nsignal.signal(signal.SIGTERM, lambda *a: (time.sleep(0.8), sys.exit(0)))\n" \
                "print('ready', flush=True)\ntime.sleep(60)"
    stubborn = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(60)"
    children = [Supervised(f"slow {n}", [sys.executable, "-c", slow_exit], {}, print) for n in range(3)]
    for child in children:
        child.start()
    time.sleep(1.0)  # the handlers are set
    started = time.monotonic()
    stop_all(children, timeout=10)
    took = time.monotonic() - started
    assert all(child.proc.returncode == 0 for child in children)  # each finished its own shutdown
    assert took < 0.8 * 2, took  # together (one after another: 2.4 s)
    ignoring = Supervised("stubborn", [sys.executable, "-c", stubborn], {}, print)
    ignoring.start()
    time.sleep(1.0)
    started = time.monotonic()
    stop_all([ignoring], timeout=0.5)
    assert ignoring.proc.returncode == -9 and time.monotonic() - started < 2
    again = Supervised("stubborn", [sys.executable, "-c", stubborn], {}, print)
    again.start()
    time.sleep(1.0)
    started = time.monotonic()
    stop_all([again], timeout=30, hurry=lambda: True)  # a second Ctrl-C
    assert again.proc.returncode == -9 and time.monotonic() - started < 2


def test_a_kill_at_the_deadline_takes_the_childs_own_children_too(tmp_path):
    """A web server killed at the deadline left one of its worker processes running, orphaned."""
    pid_file = tmp_path / "grandchild.pid"
    parent = ("import signal, subprocess, sys, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
              "child = subprocess.Popen([sys.executable, '-c', 'import signal, time; "
              "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)'])\n"
              f"open({str(pid_file)!r}, 'w').write(str(child.pid))\ntime.sleep(60)")
    child = Supervised("parent", [sys.executable, "-c", parent], {}, print)
    child.start()
    deadline = time.monotonic() + 20
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    grandchild = int(pid_file.read_text())
    stop_all([child], timeout=0.5)
    assert child.proc.returncode == -9
    time.sleep(0.3)
    try:  # gone, or a zombie that init has not reaped yet
        state = Path(f"/proc/{grandchild}/stat").read_text().split(")")[1].split()[0]
    except FileNotFoundError:
        state = "gone"
    assert state in {"Z", "gone"}, state
