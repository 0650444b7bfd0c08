"""Every program the hub calls comes from a package its own install scripts install.

A suite that passes on one machine can hide a package that somebody installed there by hand (it did: podman
ran only because runc had been installed by hand). So the programs that the code, the scripts, the Makefile
and podman's settings call are collected from the sources themselves, and each one must be in
``scripts/debian-packages.txt`` or come with every Debian system (a package of priority ``required``); under
``make test`` each program of the installed profile must be there, and the manual (docs/getting-started/install.md)
must list the same packages as the scripts.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.system_packages import (
    ROOT,
    find_program,
    installed_profile,
    missing_message,
    package_of,
    packages,
    require_program,
)

PYTHON_SOURCES = ("hub", "workers", "client/hpcfair", "bench", "tests", "manage.py")
SHELL_SOURCES = ("scripts/*.sh", ".ci/run")
# A program in a Python argv list or looked up on PATH: subprocess.run(["podman", ...]), shutil.which("bwrap"),
# require_program("chromium").
PY_CALL = re.compile(r"""(?:subprocess\.(?:run|Popen|check_output|check_call|call)\(\s*\[|shutil\.which\("""
                     r"""|require_program\()\s*["']([A-Za-z][\w.+-]*)["']""")
SHELL_WORDS = {
    "if", "then", "else", "elif", "fi", "for", "in", "do", "done", "while", "until", "case", "esac", "function",
    "echo", "printf", "cd", "set", "export", "eval", "exit", "return", "trap", "shift", "read", "local", "mapfile",
    "test", "true", "false", "wait", "kill", "source", "type", "command", "declare", "break", "continue", "unset",
    "exec", "time",
}
SEPARATORS = re.compile(r"&&|\|\||;|\||`|\(|\)|\{|\}|!|\bthen\b|\bdo\b|\belse\b|\bif\b|\bwhile\b")
ASSIGNMENT = re.compile(r"^\w+=")
QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
SUBSTITUTION = re.compile(r"\$\(([^()]*)\)")
CASE_ARM = re.compile(r"^\s*[\w*|.-]+\)")


def python_calls() -> dict[str, set[str]]:
    """Program -> the Python files that call it."""
    calls: dict[str, set[str]] = {}
    for source in PYTHON_SOURCES:
        base = ROOT / source
        for path in [base] if base.is_file() else sorted(base.rglob("*.py")):
            for program in PY_CALL.findall(path.read_text()):
                calls.setdefault(program, set()).add(str(path.relative_to(ROOT)))
    from hpcfair.cube.engine import ENGINES, RUNTIMES  # tried by name: the engines, and the runtimes suggested
    for program in (*ENGINES, *RUNTIMES):
        calls.setdefault(program, set()).add("client/hpcfair/cube/engine.py")
    return calls


def shell_commands(text: str) -> set[str]:
    """The programs a shell script (or a Makefile's recipes) runs: the first word of each command, command
    substitutions ``$(...)`` included."""
    found: set[str] = set(re.findall(r"\$PG_BIN/(\w+)", text))  # PostgreSQL's programs, called by full path
    functions = set(re.findall(r"^\s*([\w-]+)\(\)\s*\{", text, re.MULTILINE))
    lines = re.sub(r"\\\n", " ", text).splitlines()  # continuation lines joined
    while lines:
        line = re.sub(r"(^|\s)#.*$", "", lines.pop())
        inner = SUBSTITUTION.search(line)
        while inner:  # innermost first; its command is scanned as a line of its own
            lines.append(inner.group(1))
            line = line[:inner.start()] + " SUBST " + line[inner.end():]
            inner = SUBSTITUTION.search(line)
        line = CASE_ARM.sub("", QUOTED.sub(" QUOTED ", line))  # a quoted command is a path: "$VENV/bin/pip"
        for segment in SEPARATORS.split(line):
            words = [w for w in segment.split() if not ASSIGNMENT.match(w) and w != "$SUDO"]
            if words and re.fullmatch(r"[a-z][\w.+-]*", words[0]):
                found.add(words[0])
    return found - SHELL_WORDS - functions


def script_calls() -> dict[str, set[str]]:
    calls: dict[str, set[str]] = {}
    paths = [p for pattern in SHELL_SOURCES for p in sorted(ROOT.glob(pattern))]
    for path in paths:
        for program in shell_commands(path.read_text()):
            calls.setdefault(program, set()).add(str(path.relative_to(ROOT)))
    recipes = "\n".join(line[1:] for line in (ROOT / "Makefile").read_text().splitlines() if line.startswith("\t"))
    for program in shell_commands(recipes):
        calls.setdefault(program, set()).add("Makefile")
    return calls


def podman_runtime() -> str | None:
    """The OCI runtime podman uses with the hub's settings: the one they name, else podman's default."""
    conf = tomllib.loads((ROOT / "deploy" / "podman" / "containers.conf").read_text())
    named = conf.get("engine", {}).get("runtime")
    if named:
        return named
    if find_program("podman") is None:
        return None
    out = subprocess.run(["podman", "info", "--format", "{{.Host.OCIRuntime.Name}}"], capture_output=True, text=True,
                         timeout=120, env={"CONTAINERS_CONF": str(ROOT / "deploy/podman/containers.conf"),
                                           "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
    assert out.returncode == 0, f"podman cannot run with deploy/podman/containers.conf: {out.stderr.strip()}"
    return out.stdout.strip()


def debian_package(path: str) -> tuple[str, str] | None:
    """The Debian package that ships ``path`` and its priority, or None when no package does."""
    real = str(Path(path).resolve())
    merged = [name[len("/usr"):] for name in (path, real) if name.startswith("/usr/")]  # usr-merged systems
    for candidate in dict.fromkeys([path, real, *merged]):
        out = subprocess.run(["dpkg", "-S", candidate], capture_output=True, text=True)
        if out.returncode == 0:
            name = out.stdout.split(":", 1)[0].split(",")[0].strip()
            priority = subprocess.run(["dpkg-query", "-W", "-f=${Priority}", name], capture_output=True,
                                      text=True).stdout.strip()
            return name, priority
    return None


def test_the_table_is_well_formed():
    rows = packages()
    names = [pkg.name for pkg in rows]
    assert len(names) == len(set(names)), "a package is listed twice"
    programs = [program for pkg in rows for program in pkg.programs if program != "-"]
    assert len(programs) == len(set(programs)), "a program is listed under two packages"
    for pkg in rows:
        if pkg.profiles == {"build"}:  # headers to build a source-only package: no program (`-`)
            assert pkg.programs == ("-",), f"{pkg.name}: a build profile's row names no program: write '-'"
            continue
        assert pkg.programs and "-" not in pkg.programs, f"{pkg.name}: name the programs of it that the hub calls"
        assert pkg.profiles <= {"base", "run", "stack", "test", "bench", "llama"}, \
            f"{pkg.name}: unknown profile {sorted(pkg.profiles)}"


@pytest.mark.parametrize("profile", ["run", "stack", "test", "bench", "build", "llama"])
def test_the_install_script_installs_the_tables_profile(profile):
    listed = subprocess.run([str(ROOT / "scripts" / "system-deps.sh"), "list", profile], capture_output=True,
                            text=True, check=True).stdout.split()
    assert listed == [pkg.name for pkg in packages() if profile in pkg.profiles]


@pytest.mark.slow
@pytest.mark.cpu  # reads every source file of the tree
def test_every_program_called_comes_from_a_package_the_scripts_name():
    """The scan finds what is called; each program is in the table, or ships with every Debian system, or is
    the project's own (its virtual environment, its scripts)."""
    calls = python_calls()
    for program, where in script_calls().items():
        calls.setdefault(program, set()).update(where)
    assert {"podman", "bwrap", "redis-server", "initdb", "pg_ctl", "debootstrap", "docker-compose", "weed"} \
        <= set(calls), "the scan lost track of programs it used to find"
    problems = []
    for program, where in sorted(calls.items()):
        if package_of(program) is not None:
            continue
        found = find_program(program)
        if found is None:
            problems.append(f"{program} (called in {', '.join(sorted(where))}) is not installed, and "
                            "scripts/debian-packages.txt names no package for it")
            continue
        if Path(found).resolve().is_relative_to(ROOT) or Path(found).parent == Path(sys.executable).parent:
            continue
        owner = debian_package(found)
        if owner is None:
            problems.append(f"{program} ({found}, called in {', '.join(sorted(where))}) comes from no Debian "
                            "package: it was installed by hand; install it from a package named in "
                            "scripts/debian-packages.txt")
        elif owner[1] != "required":
            problems.append(f"{program} (called in {', '.join(sorted(where))}) comes from the Debian package "
                            f"{owner[0]}, which no install script installs: add it to scripts/debian-packages.txt")
    assert not problems, "\n".join(problems)


def test_podmans_runtime_is_one_the_install_step_installs():
    runtime = podman_runtime()
    if runtime is None:
        require_program("podman")
    pkg = package_of(runtime)
    assert pkg is not None and "test" in pkg.profiles, (
        f"podman runs containers with the OCI runtime {runtime!r}, but scripts/debian-packages.txt does not install "
        f"it for `make test`: add its Debian package ({runtime}) or let podman use one that is installed")
    require_program(runtime)


def test_the_installed_profiles_programs_are_there():
    profile = installed_profile()
    if not profile:
        pytest.skip("`make test` sets HUB_SYSTEM_PACKAGES after installing the test profile")
    missing = [missing_message(program) for pkg in packages() if profile in pkg.profiles
               for program in pkg.programs if find_program(program) is None]
    assert not missing, "\n".join(missing)


def test_the_makefile_installs_each_commands_profile():
    makefile = (ROOT / "Makefile").read_text()
    recipes = {target: body for target, body in re.findall(r"^(\w+):[^\n]*\n((?:\t[^\n]*\n)*)", makefile, re.M)}
    assert "scripts/system-deps.sh run" in recipes["run"]
    assert "scripts/system-deps.sh bench" in recipes["bench"]
    assert "scripts/system-deps.sh stack" in recipes["stack"]
    assert "scripts/test.sh" in recipes["test"]
    assert "scripts/system-deps.sh test" in (ROOT / "scripts" / "test.sh").read_text()


def test_the_manual_lists_the_packages_each_command_installs():
    readme = (ROOT / "docs" / "getting-started" / "install.md").read_text()
    base = [pkg.name for pkg in packages() if "base" in pkg.profiles]
    needs = re.search(r"(?:Both|All) need only Debian 12 with Python 3\.11 and ([^.]*)\.", readme)
    assert needs and re.findall(r"`([^`]+)`", needs.group(1)) == base, \
        "docs/getting-started/install.md must name the base packages"
    for command, profile in (("make run", "run"), ("make stack", "stack"), ("make test", "test"),
                             ("make bench", "bench")):
        row = re.search(rf"^\| `{command}`[^|]*\|([^|\n]*)\|", readme, re.MULTILINE)
        assert row, f"the manual's table of Debian packages has no row for `{command}`"
        listed = re.findall(r"`([^`]+)`", row.group(1))
        assert listed == [pkg.name for pkg in packages() if profile in pkg.profiles], (
            f"the manual's `{command}` row lists {listed}")
