"""pyproject.toml, environment.yml and the lock file agree, so conda, pip and `make` agree.

- environment.yml lists the same dependencies as pyproject.toml, with the same exact pins.
- requirements/cpu.lock.txt pins every dependency except torch (installed first from TORCH_SPEC),
  each version satisfies pyproject's range, and every line carries sha256 hashes.
- requires-python, the lock's Python, ruff's target and environment.yml's python agree.
- Inside a venv that `make install` built, what is installed is what the lock says.
"""

from __future__ import annotations

import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements" / "cpu.lock.txt"
TORCH_DEPS = ROOT / "requirements" / "torch-cpu.in"
CONDA_NAMES = {"pytorch-cpu": "torch", "pytorch": "torch"}
NOT_LOCKED = {"torch"}  # `make install` installs it from TORCH_SPEC before the lock


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _requirements() -> list[Requirement]:
    project = _project()["project"]
    specs = project["dependencies"] + project["optional-dependencies"]["dev"]
    return [Requirement(s) for s in specs]


def _conda_requirements() -> dict[str, str]:
    """environment.yml as {canonical name: specifier string} (conda's `=x` read as `==x`)."""
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    listed: dict[str, str] = {}
    for dep in env["dependencies"]:
        specs = dep["pip"] if isinstance(dep, dict) else [dep]
        for spec in specs:
            spec = spec.split("#", 1)[0].strip()
            if spec.startswith("-e") or spec in {"pip", "python"}:
                continue
            name, rest = re.match(r"([A-Za-z0-9_.\-]+)\s*(.*)", spec).group(1, 2)
            rest = re.sub(r"^=(?!=)", "==", rest.replace(" ", ""))
            name = canonicalize_name(CONDA_NAMES.get(name, name))
            if name != "python":
                listed[name] = rest
    return listed


def _lock() -> dict[str, dict]:
    """The lock as {canonical name: {"version": Version, "hashes": [...]}}."""
    entries: dict[str, dict] = {}
    current = None
    for line in LOCK.read_text().splitlines():
        if m := re.match(r"^([A-Za-z0-9_.\-]+)==([^\s\\;]+)", line):
            current = canonicalize_name(m.group(1))
            entries[current] = {"version": Version(m.group(2)), "hashes": []}
        elif current and (h := re.search(r"--hash=sha256:([0-9a-f]{64})", line)):
            entries[current]["hashes"].append(h.group(1))
        elif line and not line.startswith((" ", "#")):
            raise AssertionError(f"unexpected lock line: {line!r}")
    return entries


def _lock_python() -> Version:
    """The Python version the lock was compiled for (`--python-version` in the Makefile)."""
    m = re.search(r"--python-version\s+(\S+)", (ROOT / "Makefile").read_text())
    assert m, "Makefile's lock target names no --python-version"
    return Version(m.group(1))


def test_environment_yml_matches_pyproject():
    wanted = {canonicalize_name(r.name): r for r in _requirements()}
    listed = _conda_requirements()
    assert set(listed) == set(wanted)
    for name, req in wanted.items():
        pins = {str(s) for s in req.specifier if s.operator == "=="}
        if pins:  # exact pins (patched libraries) are exact in conda's file too
            assert SpecifierSet(listed[name]) == req.specifier, name


def test_lock_file_covers_pyproject():
    lock = _lock()
    assert len(lock) > 50
    missing = {canonicalize_name(r.name) for r in _requirements()} - NOT_LOCKED - set(lock)
    assert not missing, f"not in {LOCK.name}: {sorted(missing)} (run `make lock`)"
    assert not NOT_LOCKED & set(lock), "torch is installed from TORCH_SPEC, not from the lock"
    assert not {n for n in lock if n.startswith("nvidia-") or n == "triton"}


def test_lock_versions_satisfy_pyproject_ranges():
    lock = _lock()
    for req in _requirements():
        name = canonicalize_name(req.name)
        if name in NOT_LOCKED:
            continue
        version = lock[name]["version"]
        assert req.specifier.contains(version, prereleases=True), f"{name}=={version} vs {req}"


def test_lock_locks_torch_requirements():
    """torch stays out of the lock, but what it requires is in it (and in range)."""
    lock = _lock()
    for line in TORCH_DEPS.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            req = Requirement(line)
            assert req.specifier.contains(lock[canonicalize_name(req.name)]["version"]), req


def test_lock_has_hashes():
    lock = _lock()
    unhashed = [name for name, entry in lock.items() if not entry["hashes"]]
    assert not unhashed, f"lines without --hash: {unhashed}"


def test_makefile_installs_lock_with_hashes_and_torch_spec_in_range():
    makefile = (ROOT / "Makefile").read_text()
    assert "--require-hashes --no-deps -r $(LOCK)" in makefile
    assert re.search(r"^\$\(VENV\)/\.installed:.*\$\(LOCK\)", makefile, re.M)
    assert "LOCK        ?= requirements/cpu.lock.txt" in makefile
    spec = re.search(r"^TORCH_SPEC\s*\?=\s*(\S+)", makefile, re.M).group(1)
    torch_pin = Requirement(spec)
    torch_req = next(r for r in _requirements() if r.name == "torch")
    (pin,) = list(torch_pin.specifier)
    assert torch_req.specifier.contains(pin.version)


def test_requires_python_is_consistent():
    project = _project()
    requires = SpecifierSet(project["project"]["requires-python"])
    floor = min(Version(s.version) for s in requires if s.operator in {">=", "~=", "=="})
    # this test itself needs tomllib (3.11) and the lock is compiled for 3.11
    assert requires.contains("3.11.5") and not requires.contains("3.10.12")
    assert requires.contains(_lock_python())
    assert _lock_python().release[:2] == (3, 11)
    target = project["tool"]["ruff"]["target-version"]
    assert target == f"py{floor.major}{floor.minor}"
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    (python,) = [d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python")]
    conda_python = SpecifierSet(python.split("#")[0].replace("python", "", 1).strip())
    assert conda_python.contains(_lock_python())


@pytest.mark.skipif(
    not (Path(sys.prefix) / ".installed").exists(),
    reason="only inside a venv that `make install` built from the lock",
)
def test_project_venv_matches_lock():
    drift = {}
    for name, entry in _lock().items():
        try:
            installed = Version(metadata.version(name))
        except metadata.PackageNotFoundError:
            installed = None
        if installed != entry["version"]:
            drift[name] = (str(entry["version"]), installed and str(installed))
    assert not drift, f"{{name: (locked, installed)}} = {drift}; run `make install` again"
