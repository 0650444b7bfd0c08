"""Run conversion work in a sandboxed subprocess that sees only what it needs.

With bubblewrap (``bwrap``, Debian package ``bubblewrap``) the child gets an empty root with, read-only,
the system's shared libraries and the Python environment (interpreter, standard library, site-packages,
``hpcfair``), and, writable, its own work folder, which holds the model file; nothing else of the
machine: no /etc/shadow or /etc/passwd, no HOME, no hub data or settings, no other user's files, no
network. A worker running as root hands the child to an unprivileged user (``Limits.uid``, nobody by
default) with ``setpriv``. Memory, CPU-time, file-size and wall-clock limits apply in every case.
Without bubblewrap only the limits apply, and every result says which protections applied
(``sandbox.isolation: "rlimits"``).
"""

from __future__ import annotations

import json
import logging
import os
import re
import resource
import shutil
import signal
import site
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hpcfair.convert.errors import ConversionError

LOG_PREFIX = "hpcfair: "
HPCFAIR_DIR = Path(__file__).resolve().parent.parent  # the package the child imports (not imported here)
STAGE = re.compile(r"^\[(\d{1,3})%\] (.*)$")  # a stage line of the child: "[60%] checking the ONNX model"


def stage_line(fraction: float, what: str) -> str:
    return f"[{round(100 * min(max(fraction, 0.0), 1.0))}%] {what}"


def parse_stage(line: str) -> tuple[float, str] | None:
    """(fraction, what) of a stage line, None for any other line."""
    found = STAGE.match(line)
    return (int(found.group(1)) / 100, found.group(2)) if found else None
NOBODY = 65534
log = logging.getLogger(__name__)


# The address-space limit (RLIMIT_AS) of a conversion: TensorFlow alone maps ~2 GB and converters hold the
# model several times over (framework tensors, the ONNX graph, its serialised copy), so the limit grows with
# the model; it stays below the machine's memory so that a runaway conversion cannot take the machine.
MEMORY_FLOOR_MB = 8192
MEMORY_PER_MODEL_MB = 80  # MB of address space per MB of model file (Keras ResNet50, 98 MB, needs ~16 GB)
MACHINE_SHARE = 0.85


def machine_memory_mb() -> int:
    """Physical memory of this machine in MB (8 GiB where it cannot be read)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2**20
    except (ValueError, OSError, AttributeError):
        return 8192


def memory_ceiling_mb() -> int:
    """The most memory a conversion may be given here: 85% of the machine's."""
    return int(machine_memory_mb() * MACHINE_SHARE)


def model_bytes(path: Path) -> int:
    """Size of a model file, or of every file in a model folder."""
    path = Path(path)
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())
    return path.stat().st_size if path.exists() else 0


def memory_for(size_bytes: int, ceiling_mb: int | None = None) -> int:
    """The memory limit (MB) for converting a model of ``size_bytes``: the floor plus a share per MB of
    model, at most ``ceiling_mb`` (default: 85% of this machine's memory)."""
    ceiling = ceiling_mb or memory_ceiling_mb()
    wanted = MEMORY_FLOOR_MB + MEMORY_PER_MODEL_MB * size_bytes // 2**20
    return max(min(wanted, ceiling), min(MEMORY_FLOOR_MB, ceiling))


@dataclass
class Limits:
    memory_mb: int = 0  # address space (RLIMIT_AS); 0: memory_for(the model's size)
    cpu_seconds: int = 1800
    wall_seconds: int = 900
    threads: int = 2
    file_mb: int = 16384  # largest file the child may write
    uid: int = NOBODY  # who the child runs as when the caller is root
    gid: int = NOBODY


@dataclass
class Isolation:
    """How a child is confined: the command prefix, and what it protects (recorded in every result)."""

    prefix: list[str] = field(default_factory=list)
    protection: dict[str, str] = field(default_factory=dict)
    owner: tuple[int, int] | None = None  # (uid, gid) the work folder must belong to


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


def _python_paths() -> list[str]:
    """The directories the child's Python needs: interpreter, standard library, site-packages, hpcfair."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *site.getsitepackages(),
             str(HPCFAIR_DIR)}
    return sorted(p for p in paths if p and os.path.isdir(p))


def _system_binds() -> list[str]:
    """Shared libraries and the loader's configuration, read-only; /bin, /lib... as the host has them."""
    argv = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    for name in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives",
                 "/sys/devices/system/cpu"):
        if os.path.exists(name):
            argv += ["--ro-bind", name, name]
    return argv


def _binds(paths: Sequence[str]) -> tuple[list[str], list[str]]:
    """--ro-bind each path at its real location and at the name the interpreter uses (a venv may be a
    symlink); returns the arguments and the places bound."""
    pairs: dict[str, str] = {}
    for path in paths:
        real = os.path.realpath(path)
        pairs.setdefault(real, real)
        pairs.setdefault(os.path.abspath(path), real)
    argv, bound = [], []
    for dest in sorted(pairs, key=len):
        src = pairs[dest]
        if any(dest.startswith(d + "/") and src == pairs[d] + dest[len(d):] for d in bound):
            continue  # inside a directory bound already
        argv += ["--ro-bind", src, dest]
        bound.append(dest)
    return argv, bound


def reads_in_place(path: Path) -> bool:
    """Whether ``path`` can be handed to a child read-only where it lies (``run``'s ``read_only``): bwrap
    mounts it so, and the child can read it (a root caller's child runs as nobody: a file anyone may read)."""
    if not bwrap_path():
        return False
    return os.geteuid() != 0 or not shutil.which("setpriv") or bool(os.stat(path).st_mode & stat.S_IROTH)


def isolation(workdir: Path, hide: Sequence[Path] = (), limits: Limits | None = None,
              read_only: Sequence[tuple[Path, str]] = ()) -> Isolation:
    """The confinement for a child working in ``workdir``; ``hide`` is tmpfs'd should it lie inside a
    bound directory; each (file, name) of ``read_only`` is mounted read-only at ``workdir/name`` (bwrap
    only: see ``reads_in_place``). Without bwrap: no prefix, and a protection record that says so."""
    limits = limits or Limits()
    bwrap = bwrap_path()
    root = os.geteuid() == 0
    if not bwrap:
        return Isolation([], {"isolation": "rlimits", "filesystem": "everything the worker can read",
                              "network": "the worker's", "user": _user_label(os.geteuid(), root)})
    work = str(Path(workdir).resolve())
    argv = [bwrap, "--die-with-parent", "--new-session", "--unshare-net", "--unshare-pid", "--unshare-ipc",
            "--unshare-uts", "--unshare-cgroup-try", "--tmpfs", "/tmp", "--dev", "/dev", "--proc", "/proc"]
    argv += _system_binds()
    python, bound = _binds(_python_paths())
    argv += python
    for path in hide:
        hidden = str(Path(path).resolve())
        if any(hidden == d or hidden.startswith(d + "/") for d in bound) and not work.startswith(hidden + "/"):
            argv += ["--tmpfs", hidden]
    argv += ["--bind", work, work, "--chdir", work]
    for path, name in read_only:
        argv += ["--ro-bind", str(Path(path).resolve()), f"{work}/{name}"]
    argv = _open_parents(argv)
    protection = {"isolation": "bubblewrap", "filesystem": "work folder, Python environment (read-only)",
                  "network": "none"}
    setpriv = shutil.which("setpriv")
    if root and setpriv:
        argv += [setpriv, f"--reuid={limits.uid}", f"--regid={limits.gid}", "--clear-groups", "--no-new-privs",
                 "--inh-caps=-all", "--bounding-set=-all"]
        return Isolation(argv, {**protection, "user": _user_label(limits.uid, False)}, (limits.uid, limits.gid))
    return Isolation(argv, {**protection, "user": _user_label(os.geteuid(), root)})


def _user_label(uid: int, root: bool) -> str:
    if root:
        return "root (no setpriv to drop to an unprivileged user)" if bwrap_path() else "root"
    return "nobody (uid 65534)" if uid == NOBODY else f"uid {uid}"


def _open_parents(argv: list[str]) -> list[str]:
    """Create the folders above each mount point first, world-traversable: bwrap 0.8 run as root makes
    them 0700, which the unprivileged child could not pass."""
    dests = [argv[i + 2] for i, a in enumerate(argv) if a in ("--ro-bind", "--bind", "--symlink")]
    parents = sorted({str(p) for d in dests for p in Path(d).parents if str(p) != "/"}, key=lambda p: (len(p), p))
    made = [a for parent in parents for a in ("--perms", "0755", "--dir", parent)]
    first = min(i for i, a in enumerate(argv) if a in ("--ro-bind", "--bind", "--symlink"))  # after /tmp's tmpfs
    return argv[:first] + made + argv[first:]


def describe(record: dict[str, Any]) -> str:
    """One line for a job log: which protections a conversion ran under."""
    if record.get("isolation") != "bubblewrap":
        return (f"sandbox: resource limits only (no bubblewrap), as {record.get('user')}; the converter could "
                "read what the worker can")
    return (f"sandbox: bubblewrap, sees {record.get('filesystem')}, network {record.get('network')}, "
            f"runs as {record.get('user')}")


def isolation_prefix(workdir: Path, hide: Sequence[Path] = ()) -> list[str]:
    """The bwrap argv that wraps a command; [] when bwrap is not installed."""
    return isolation(workdir, hide).prefix


def _set_limits(limits: Limits) -> Callable[[], None]:
    def apply() -> None:
        memory = (limits.memory_mb or memory_for(0)) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 5))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_mb * 1024 * 1024,) * 2)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply


def child_env(workdir: Path, threads: int) -> dict[str, str]:
    """A clean environment: no proxies, no credentials, no GPU, offline model hubs, and a Python path of
    hpcfair alone (never the working directory, which holds the uploaded files)."""
    keep = {key: os.environ[key] for key in ("PATH", "LANG", "LC_ALL") if key in os.environ}
    return {**keep, "HOME": str(workdir), "TMPDIR": str(workdir), "OMP_NUM_THREADS": str(threads),
            "PYTHONPATH": str(HPCFAIR_DIR.parent), "PYTHONSAFEPATH": "1",
            "PYTHONNOUSERSITE": "1", "USER": "hpcfair", "LOGNAME": "hpcfair",
            "TF_NUM_INTRAOP_THREADS": str(threads), "TF_NUM_INTEROP_THREADS": "1", "TF_CPP_MIN_LOG_LEVEL": "2",
            "CUDA_VISIBLE_DEVICES": "", "KERAS_BACKEND": "tensorflow", "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1", "PYTHONDONTWRITEBYTECODE": "1", "MPLCONFIGDIR": str(workdir)}


def _hand_over(workdir: Path, owner: tuple[int, int] | None) -> None:
    """Give the work folder to the child's user (the caller is root and the child will not be)."""
    if owner is None:
        return
    for path in [workdir, *workdir.rglob("*")]:
        os.lchown(path, *owner)


def output_file(workdir: Path, relative: str) -> Path:
    """A file the child wrote, checked before the caller (root, perhaps) reads or moves it: a relative
    path inside ``workdir`` with no symlink on the way, to a regular file with a single link. A child
    that got loose could otherwise point result.json or model.onnx at /etc/shadow."""
    parts = Path(relative).parts
    if not parts or Path(relative).is_absolute() or any(p in ("..", "") for p in parts):
        raise ConversionError("conversion_crashed", "The conversion named an output outside its work folder.")
    path = Path(workdir)
    for part in parts:
        path = path / part
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            raise ConversionError("conversion_crashed", f"The conversion did not write {relative}.")
        if stat.S_ISLNK(info.st_mode):
            raise ConversionError("conversion_crashed", f"The conversion left a link at {relative}; refused.")
    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
        raise ConversionError("conversion_crashed", f"The conversion's {relative} is not a plain file; refused.")
    return path


def place(workdir: Path, relative: str, dest: Path) -> Path:
    """A file the child wrote (checked by ``output_file``) moved to ``dest``, which belongs to the caller: a
    root caller's child ran as another user (``Limits.uid``, nobody), and the file it leaves is the result
    the caller asked for, in the caller's folder."""
    source = output_file(workdir, relative)
    dest.parent.mkdir(parents=True, exist_ok=True)
    moved = Path(shutil.move(source, dest))
    if os.lstat(moved).st_uid != os.geteuid() or os.lstat(moved).st_gid != os.getegid():
        os.chown(moved, os.geteuid(), os.getegid(), follow_symlinks=False)
    return moved


def _read_output(workdir: Path, relative: str, limit: int = 64 * 1024 * 1024) -> str:
    path = output_file(workdir, relative)
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(descriptor, "rb") as handle:
        return handle.read(limit).decode("utf-8", errors="replace")


def _popen(argv: list[str], workdir: Path, limits: Limits, hide: Sequence[Path],
           read_only: Sequence[tuple[Path, str]] = (), **kwargs: Any):
    """Start ``argv`` confined and limited in ``workdir``; returns (process, isolation)."""
    confined = isolation(workdir, hide, limits, read_only)
    _hand_over(workdir, confined.owner)
    process = subprocess.Popen(confined.prefix + argv, cwd=workdir, env=child_env(workdir, limits.threads),
                               stdin=subprocess.DEVNULL, preexec_fn=_set_limits(limits), start_new_session=True,
                               **kwargs)
    return process, confined


def execute(argv: list[str], workdir: Path, limits: Limits | None = None, *, hide: Sequence[Path] = (),
            timeout: float = 120, read_only: Sequence[tuple[Path, str]] = ()) -> subprocess.CompletedProcess:
    """Run any command exactly as a conversion child runs (for checks of the sandbox itself)."""
    limits = limits or Limits()
    process, _ = _popen(argv, Path(workdir), limits, hide, read_only, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, text=True)
    try:
        out, err = process.communicate(timeout=timeout)
    finally:
        _kill_group(process)
    return subprocess.CompletedProcess(argv, process.returncode, out, err)


STARTED = "started"  # the child writes it before it reads anything of the request's files


def interpreter() -> str:
    """This Python, as an absolute path without ``..`` (``../.venv/bin/python`` started in another folder gives
    ``/work/papers/../.venv/bin/python``, which the sandbox, whose view has no ``papers``, cannot follow). The
    virtual environment's link is kept, not resolved: its site-packages come with it."""
    return os.path.normpath(os.path.abspath(sys.executable))


def run(request: dict[str, Any], workdir: Path, limits: Limits | None = None, *, hide: Sequence[Path] = (),
        on_line: Callable[[str], None] | None = None, read_only: Sequence[tuple[Path, str]] = ()
        ) -> dict[str, Any]:
    """Run ``python -m hpcfair.convert.child`` on ``request`` in ``workdir``; returns the child's result.

    Paths in ``request`` are relative to ``workdir``. A coded failure in the child, a limit reached or a
    crash raises ``ConversionError`` with a fixed message; what the child printed to stderr (library
    errors, tracebacks) goes to this process's log only, never to the user.
    """
    import tempfile

    limits = limits or Limits()
    workdir = Path(workdir)
    (workdir / "request.json").write_text(json.dumps(request))
    (workdir / "result.json").unlink(missing_ok=True)
    (workdir / STARTED).unlink(missing_ok=True)
    argv = [interpreter(), "-m", "hpcfair.convert.child", "request.json"]
    started = time.monotonic()
    with tempfile.TemporaryFile("w+", errors="replace") as stderr:  # outside the child's reach
        process, confined = _popen(argv, workdir, limits, hide, read_only, stdout=subprocess.PIPE, stderr=stderr,
                                   text=True, errors="replace")
        timer = threading.Timer(limits.wall_seconds, _kill_group, args=(process,))
        timer.start()
        try:
            for line in process.stdout:
                if line.startswith(LOG_PREFIX) and on_line:
                    on_line(line[len(LOG_PREFIX):].rstrip()[:500])
            process.wait()
        finally:
            timer.cancel()
            _kill_group(process)
        stderr.seek(0)
        child_log = stderr.read()[-200_000:]
    elapsed = time.monotonic() - started
    try:
        result = _result(workdir, process.returncode, child_log, limits, elapsed)
    except ConversionError as exc:
        log.warning("sandboxed %s failed (%s, status %s); its stderr:\n%s", request.get("task", "convert"),
                    exc.code, process.returncode, child_log[-20_000:])
        raise
    log.debug("sandboxed %s stderr:\n%s", request.get("task", "convert"), child_log[-20_000:])
    result["sandbox"] = {**confined.protection, "limits": asdict(limits), "seconds": round(elapsed, 2)}
    return result


def _result(workdir: Path, returncode: int, child_log: str, limits: Limits, elapsed: float) -> dict[str, Any]:
    """The child's result.json, or the coded error its end means."""
    if elapsed >= limits.wall_seconds:
        raise ConversionError("time_limit", f"The conversion ran longer than its limit of {limits.wall_seconds} s "
                                            "and was stopped. Ask for a longer limit or convert a smaller model.")
    memory_error = ConversionError(
        "memory_limit", f"The conversion needed more than its memory limit of {limits.memory_mb or memory_for(0)} MB "
                        "and was stopped. Raise the limit (memory_mb in the conversion config or request; the hub's "
                        f"HUB_CONVERT_MEMORY_MB) up to this machine's {machine_memory_mb()} MB, or convert a smaller "
                        "model.")
    if os.path.lexists(workdir / "result.json"):
        try:
            result = json.loads(_read_output(workdir, "result.json"))
        except ValueError:
            result = None
        if not isinstance(result, dict):
            raise ConversionError("conversion_crashed", "The conversion wrote an unreadable result.")
        if result.get("code") == "memory_limit":
            raise memory_error
        if not result.get("ok"):
            code = str(result.get("code", ""))
            code = code if re.fullmatch(r"[a-z_]{1,40}", code) else "conversion_failed"
            raise ConversionError(code, str(result.get("detail", "The conversion failed."))[:2000])
        return result
    if not os.path.lexists(workdir / STARTED):
        raise ConversionError("sandbox_failed", f"The conversion's sandbox could not start Python "
                                                f"({interpreter()}; status {returncode}). The model file was not "
                                                "read: this is a problem of this installation (the interpreter, "
                                                "bubblewrap or the limits), not of the model.")
    text = "\n".join(child_log.splitlines()[-20:]).lower()
    if returncode in (-signal.SIGXCPU, -signal.SIGKILL) and "memory" not in text:
        raise ConversionError("time_limit", f"The conversion used more than {limits.cpu_seconds} s of CPU time "
                                            "and was stopped.")
    if "memory" in text or "bad_alloc" in text or returncode in (-signal.SIGSEGV, -signal.SIGABRT):
        raise memory_error
    raise ConversionError("conversion_crashed", f"The conversion process ended with status {returncode} "
                                                "without a result; the model file may be damaged.")


def _kill_group(process: subprocess.Popen) -> None:
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
