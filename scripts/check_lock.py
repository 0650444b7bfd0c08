"""Is requirements/lock.txt current? Every requirement that pyproject.toml (with its `test` extra) and
client/pyproject.toml (with its `convert` extra) name must be met by the version the lock pins, and every pin
must carry a hash. `make install` runs this before installing the project, so a dependency added to a
pyproject.toml without `make lock` fails the install with what to do, instead of a missing module later.

    python scripts/check_lock.py        exit 1 and name each unmet requirement; 0 when the lock is current
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
# (pyproject, extras installed from it): what `make install` installs
PROJECTS = ((ROOT / "pyproject.toml", ("test",)), (ROOT / "client" / "pyproject.toml", ("convert",)))
LOCKS = (ROOT / "requirements" / "lock.txt", ROOT / "requirements" / "nodeps.txt")
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")


def pins(lock: Path) -> dict[str, tuple[Version, int]]:
    """{canonical name: (pinned version, number of hashes)} of a pip-compile lock file."""
    found: dict[str, tuple[Version, int]] = {}
    name = None
    for line in lock.read_text().splitlines():
        match = _PIN.match(line)
        if match:
            name = canonicalize_name(match[1])
            found[name] = (Version(match[2]), 0)
        elif name and line.strip().startswith("--hash=sha256:"):
            version, hashes = found[name]
            found[name] = (version, hashes + 1)
        elif not line.startswith((" ", "\t")):
            name = None
    return found


def requirements(pyproject: Path, extras: tuple[str, ...]) -> list[Requirement]:
    """The project's dependencies and those of the named extras, without references to itself."""
    project = tomllib.loads(pyproject.read_text())["project"]
    listed = list(project.get("dependencies", []))
    for extra in extras:
        listed += project.get("optional-dependencies", {}).get(extra, [])
    own = canonicalize_name(project["name"])
    return [req for req in map(Requirement, listed) if canonicalize_name(req.name) != own]


def problems(projects=PROJECTS, locks=LOCKS) -> list[str]:
    """What is wrong with the lock files, one sentence each; empty when they are current."""
    pinned: dict[str, tuple[Version, int]] = {}
    for lock in locks:
        pinned.update(pins(lock))
    found = [f"{name}=={version} has no --hash in the lock" for name, (version, hashes) in pinned.items()
             if hashes == 0]
    for pyproject, extras in projects:
        for req in requirements(pyproject, extras):
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            where = f"{_shown(pyproject)} asks for {req}"
            version = pinned.get(canonicalize_name(req.name), (None, 0))[0]
            if version is None:
                found.append(f"{where}, which the lock does not pin")
            elif not req.specifier.contains(version, prereleases=True):
                found.append(f"{where}, but the lock pins {version}")
    return found


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def main() -> int:
    found = problems()
    for problem in found:
        print(f"requirements/lock.txt is stale: {problem}", file=sys.stderr)
    if found:
        print("Run `make lock` (keeps the other pins), then `make test`, and commit requirements/.", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
