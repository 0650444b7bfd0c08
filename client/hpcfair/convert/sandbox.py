"""Run conversion work in a sandboxed subprocess: no network, a private /tmp, the hub's data hidden,
read-only everywhere except its own work directory, with memory, CPU-time and wall-clock limits.

Isolation uses bubblewrap (``bwrap``, Debian package ``bubblewrap``) when it is installed; without it
only the resource limits apply and the result says so (``sandbox.isolation: "rlimits"``).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hpcfair.convert.errors import ConversionError

LOG_PREFIX = "hpcfair: "


@dataclass
class Limits:
    memory_mb: int = 8192  # address space (RLIMIT_AS); TensorFlow alone maps ~2 GB
    cpu_seconds: int = 1800
    wall_seconds: int = 900
    threads: int = 2
    file_mb: int = 16384  # largest file the child may write


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


def isolation_prefix(workdir: Path, hide: list[Path] = ()) -> list[str]:
    """The bwrap argv that wraps a command; [] when bwrap is not installed."""
    bwrap = bwrap_path()
    if not bwrap:
        return []
    private = ("/tmp", "/var/tmp", "/dev/shm")
    argv = [bwrap, "--die-with-parent", "--new-session", "--unshare-net", "--unshare-pid", "--unshare-ipc",
            "--unshare-uts", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for directory in private:
        argv += ["--tmpfs", directory]
    # Python itself and the code it imports may live under /tmp (a checkout there): show them read-only.
    needed = {sys.prefix, sys.base_prefix, str(Path(sys.executable).parent), *sys.path}
    for path in sorted(needed):
        real = os.path.realpath(path) if path else ""
        if real and os.path.isdir(real) and any(real == d or real.startswith(d + "/") for d in private):
            argv += ["--ro-bind", real, real]
    for path in hide:
        if Path(path).is_dir() and not Path(workdir).resolve().is_relative_to(Path(path).resolve()):
            argv += ["--tmpfs", str(Path(path).resolve())]
    work = str(Path(workdir).resolve())
    return argv + ["--bind", work, work, "--chdir", work]


def _set_limits(limits: Limits) -> Callable[[], None]:
    def apply() -> None:
        memory = limits.memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 5))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_mb * 1024 * 1024,) * 2)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply


def child_env(workdir: Path, threads: int) -> dict[str, str]:
    """A clean environment: no proxies, no credentials, no GPU, offline model hubs."""
    keep = {key: os.environ[key] for key in ("PATH", "LANG", "LC_ALL", "PYTHONPATH") if key in os.environ}
    return {**keep, "HOME": str(workdir), "TMPDIR": str(workdir), "OMP_NUM_THREADS": str(threads),
            "TF_NUM_INTRAOP_THREADS": str(threads), "TF_NUM_INTEROP_THREADS": "1", "TF_CPP_MIN_LOG_LEVEL": "2",
            "CUDA_VISIBLE_DEVICES": "", "KERAS_BACKEND": "tensorflow", "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1", "PYTHONDONTWRITEBYTECODE": "1", "MPLCONFIGDIR": str(workdir)}


def run(request: dict[str, Any], workdir: Path, limits: Limits | None = None, *, hide: list[Path] = (),
        on_line: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run ``python -m hpcfair.convert.child`` on ``request`` in ``workdir``; returns the child's result.

    Paths in ``request`` are relative to ``workdir``. A coded failure in the child, a limit reached or a
    crash raises ``ConversionError``.
    """
    limits = limits or Limits()
    workdir = Path(workdir)
    (workdir / "request.json").write_text(json.dumps(request))
    result_path = workdir / "result.json"
    result_path.unlink(missing_ok=True)
    prefix = isolation_prefix(workdir, list(hide))
    argv = prefix + [sys.executable, "-m", "hpcfair.convert.child", "request.json"]
    started = time.monotonic()
    with open(workdir / "child.log", "w") as log:
        process = subprocess.Popen(argv, cwd=workdir, env=child_env(workdir, limits.threads), stdout=subprocess.PIPE,
                                   stderr=log, stdin=subprocess.DEVNULL, text=True, preexec_fn=_set_limits(limits),
                                   start_new_session=True)
        timer = threading.Timer(limits.wall_seconds, _kill_group, args=(process,))
        timer.start()
        try:
            for line in process.stdout:
                if line.startswith(LOG_PREFIX) and on_line:
                    on_line(line[len(LOG_PREFIX):].rstrip())
            process.wait()
        finally:
            timer.cancel()
            _kill_group(process)
    elapsed = time.monotonic() - started
    if elapsed >= limits.wall_seconds:
        raise ConversionError("time_limit", f"The conversion ran longer than its limit of {limits.wall_seconds} s "
                                            "and was stopped. Ask for a longer limit or convert a smaller model.")
    memory_error = ConversionError("memory_limit", f"The conversion needed more than its memory limit of "
                                                   f"{limits.memory_mb} MB and was stopped. Ask for a larger limit "
                                                   "or convert a smaller model.")
    if result_path.exists():
        result = json.loads(result_path.read_text())
        if result.get("code") == "memory_limit":
            raise memory_error
        if not result.get("ok"):
            raise ConversionError(result.get("code", "conversion_failed"), result.get("detail", "unknown failure"))
        result["sandbox"] = {"isolation": "bubblewrap" if prefix else "rlimits", "limits": asdict(limits),
                             "seconds": round(elapsed, 2)}
        return result
    tail = (workdir / "child.log").read_text(errors="replace").splitlines()[-20:]
    text = "\n".join(tail).lower()
    if process.returncode in (-signal.SIGXCPU, -signal.SIGKILL) and "memory" not in text:
        raise ConversionError("time_limit", f"The conversion used more than {limits.cpu_seconds} s of CPU time "
                                            "and was stopped.")
    if "memory" in text or "bad_alloc" in text or process.returncode in (-signal.SIGSEGV, -signal.SIGABRT):
        raise memory_error
    raise ConversionError("conversion_crashed", f"The conversion process ended with status {process.returncode} "
                                                "without a result; the model file may be damaged.")


def _kill_group(process: subprocess.Popen) -> None:
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
