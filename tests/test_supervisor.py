"""hub.supervisor: a child that exits is started again, after pauses that double while it keeps failing."""

from __future__ import annotations

import sys
import time

from hub.supervisor import Supervised


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
