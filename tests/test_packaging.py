"""environment.yml and pyproject.toml list the same dependencies, so conda and pip agree."""

from __future__ import annotations

import re
from pathlib import Path

import tomllib
import yaml

ROOT = Path(__file__).resolve().parent.parent
CONDA_NAMES = {"pytorch-cpu": "torch", "pytorch": "torch"}


def _name(spec: str) -> str:
    return re.split(r"[<>=!~ ]", spec.strip(), maxsplit=1)[0].lower()


def test_environment_yml_matches_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = {_name(d) for d in project["dependencies"] + project["optional-dependencies"]["dev"]}
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    listed = set()
    for dep in env["dependencies"]:
        specs = dep["pip"] if isinstance(dep, dict) else [dep]
        for spec in specs:
            name = _name(spec)
            if name not in {"python", "pip", "-e"}:
                listed.add(CONDA_NAMES.get(name, name))
    assert listed == wanted
