"""Keep a child process running: start it again when it exits, after a pause that doubles with each quick
failure (``hub_serve`` supervises its Celery worker and its web server this way, so that a killed worker
does not take the site down, and a worker that keeps crashing does not spin)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence


class Supervised:
    """One supervised child. Call ``poll()`` often; it restarts the child when due and reports it to ``say``."""

    def __init__(self, name: str, command: Sequence[str], env: Mapping[str, str], say: Callable[[str], None],
                 first_pause_s: float = 1.0, max_pause_s: float = 30.0, stable_s: float = 60.0) -> None:
        self.name, self.command, self.env, self.say = name, list(command), dict(env), say
        self.first_pause_s, self.max_pause_s, self.stable_s = first_pause_s, max_pause_s, stable_s
        self.proc: subprocess.Popen | None = None
        self.started_at = 0.0
        self.failures = 0  # quick exits in a row
        self.restart_at: float | None = None
        self.restarts = 0
        self.stopped = False

    def start(self) -> None:
        # Its own process group: a Ctrl-C in the terminal reaches only the supervisor, which stops each child
        # once (a second signal left a granian worker hanging), and a kill takes the child's own children too.
        self.proc = subprocess.Popen(self.command, env=self.env, start_new_session=True)
        self.started_at = time.monotonic()
        self.restart_at = None

    def poll(self) -> None:
        if self.stopped:
            return
        now = time.monotonic()
        if self.restart_at is not None:
            if now >= self.restart_at:
                self.restarts += 1
                self.start()
                self.say(f"{self.name} restarted (pid {self.proc.pid}, restart {self.restarts})")
            return
        if self.proc is None or self.proc.poll() is None:
            return
        ran = now - self.started_at
        self.failures = 1 if ran >= self.stable_s else self.failures + 1
        pause = min(self.max_pause_s, self.first_pause_s * 2 ** (self.failures - 1))
        self.say(f"{self.name} (pid {self.proc.pid}) exited with {describe(self.proc.returncode)} after "
                 f"{ran:.1f} s; restarting in {pause:g} s")
        self.restart_at = now + pause

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout``; by PID, only the process this object started."""
        stop_all([self], timeout)

    def terminate(self) -> None:
        """Ask the child to stop (SIGTERM) and never start it again."""
        self.stopped, self.restart_at = True, None
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL the child's process group (the child and what it started: web workers, engines), and reap
        the child."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the group the child leads (start_new_session)
        except ProcessLookupError:
            pass
        self.proc.wait()


def stop_all(children: Sequence[Supervised], timeout: float, hurry: Callable[[], bool] = lambda: False) -> None:
    """Stop ``children`` together: SIGTERM to each at once, then SIGKILL to those still running after
    ``timeout`` (or as soon as ``hurry()`` says so: a second Ctrl-C). Stopping them one after another added
    their shutdowns up (issue 41, point 14: Ctrl-C on ``make run`` took 25 s)."""
    for child in children:
        child.terminate()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not hurry():
        if all(child.proc is None or child.proc.poll() is not None for child in children):
            return
        time.sleep(0.05)
    for child in children:
        child.kill()


def describe(returncode: int) -> str:
    if returncode < 0:
        return f"signal {signal.Signals(-returncode).name}"
    return f"status {returncode}"
