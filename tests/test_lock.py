"""The lock file: `make install` installs exactly what requirements/lock.txt pins, so the lock must meet every
requirement the pyproject files name, with a hash for every pin; the client, a library, keeps ranges."""

from __future__ import annotations

import importlib.util
import tomllib

from packaging.requirements import Requirement

from tests.conftest import ROOT

spec = importlib.util.spec_from_file_location("check_lock", ROOT / "scripts" / "check_lock.py")
check_lock = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_lock)

LOCK = """\
django==5.2.19 \\
    --hash=sha256:aa \\
    --hash=sha256:bb
    # via hub (pyproject.toml)
pyyaml==6.0.4 \\
    --hash=sha256:cc
requests==2.32.0
"""


def project(tmp_path, *deps: str, name: str = "hub"):
    path = tmp_path / f"{name}.toml"
    listed = ", ".join(f"'{dep}'" for dep in deps)
    path.write_text(f'[project]\nname = "{name}"\ndependencies = [{listed}]\n'
                    f'[project.optional-dependencies]\ntest = ["PyYAML>=6", "{name}[extra]"]\n')
    return path


def test_the_committed_lock_meets_every_requirement():
    assert check_lock.problems() == []
    pinned = check_lock.pins(ROOT / "requirements" / "lock.txt")
    assert pinned["django"][0].major == 5 and pinned["torch"][0].public == "2.13.0"
    assert all(hashes for _, hashes in pinned.values())


def test_a_stale_lock_names_each_unmet_requirement(tmp_path):
    lock = tmp_path / "lock.txt"
    lock.write_text(LOCK)
    fine = project(tmp_path, "Django>=5.2,<5.3")
    assert check_lock.problems([(fine, ("test",))], [lock]) == ["requests==2.32.0 has no --hash in the lock"]
    lock.write_text(LOCK.replace("requests==2.32.0\n", ""))
    assert check_lock.problems([(fine, ("test",))], [lock]) == []
    stale = project(tmp_path, "Django>=6", "numpy>=2", 'pywin32>=300; sys_platform == "win32"')
    found = check_lock.problems([(stale, ("test",))], [lock])
    assert [problem.split(" asks for ")[1] for problem in found] == [
        "Django>=6, but the lock pins 5.2.19", "numpy>=2, which the lock does not pin"]


def test_the_client_keeps_ranges_as_a_library_should():
    client = tomllib.loads((ROOT / "client" / "pyproject.toml").read_text())["project"]
    for dependency in map(Requirement, client["dependencies"]):
        operators = {spec.operator for spec in dependency.specifier}
        assert operators and operators <= {">=", "<", "!=", "~="}, f"the client pins {dependency}"
