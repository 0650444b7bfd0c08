"""The Debian packages table (``scripts/debian-packages.txt``) and the programs the tests need from it.

``make test`` installs the ``test`` profile and then sets ``HUB_SYSTEM_PACKAGES=test``: from then on a
program of that profile that is missing is a failure that names its package, not a skip, so that a suite
passing on one machine cannot hide a package installed there by hand.
"""

from __future__ import annotations

import glob
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "scripts" / "debian-packages.txt"
# PostgreSQL's server programs are not on PATH on Debian; scripts/services.sh finds them here.
PG_BIN_GLOB = "/usr/lib/postgresql/*/bin"


@dataclass(frozen=True)
class Package:
    name: str
    profiles: frozenset[str]
    programs: tuple[str, ...]


def packages() -> list[Package]:
    """The table's rows, in order."""
    rows = []
    for line in TABLE.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, profiles, *programs = line.split()
            rows.append(Package(name, frozenset() if profiles == "-" else frozenset(profiles.split(",")),
                                tuple(programs)))
    return rows


def package_of(program: str) -> Package | None:
    return next((pkg for pkg in packages() if program in pkg.programs), None)


def installed_profile() -> str:
    """The profile ``scripts/system-deps.sh`` installed before this run ('' outside ``make test``)."""
    return os.environ.get("HUB_SYSTEM_PACKAGES", "")


def find_program(program: str) -> str | None:
    """Where ``program`` is: in the virtual environment, on PATH, or among PostgreSQL's server programs."""
    found = shutil.which(program, path=os.path.dirname(sys.executable)) or shutil.which(program)
    if found is None:
        candidates = sorted(glob.glob(f"{PG_BIN_GLOB}/{program}"))
        found = candidates[-1] if candidates else None
    return found


def missing_message(program: str) -> str:
    pkg = package_of(program)
    if pkg is None:
        return f"{program} is not installed and scripts/debian-packages.txt names no package for it"
    if not pkg.profiles:
        return f"{program} (Debian package {pkg.name}) is not installed; no install script installs it"
    profiles = ", ".join(sorted(pkg.profiles))
    return (f"{program} is not installed: the Debian package {pkg.name} is missing "
            f"(scripts/system-deps.sh {profiles} installs it)")


def require_program(program: str) -> str:
    """The path of ``program``. Missing: a failure naming its package under ``make test`` (whose install step
    should have installed it), a skip that says how to get it elsewhere."""
    found = find_program(program)
    if found is not None:
        return found
    pkg = package_of(program)
    if pkg is not None and installed_profile() in pkg.profiles:
        pytest.fail(missing_message(program), pytrace=False)
    pytest.skip(f"{missing_message(program)}; run through `make test`")
