"""The README's runnable examples run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def _examples() -> dict[str, str]:
    blocks = re.findall(r"```python\n# readme-example: (\S+)\n(.*?)```", README.read_text(),
                        flags=re.S)
    return dict(blocks)


@pytest.mark.parametrize("name", sorted(_examples()))
def test_readme_example_runs(name, capsys):
    exec(compile(_examples()[name], f"README:{name}", "exec"), {})
    out = capsys.readouterr().out
    assert "mine is better than baseline on accuracy: +0.108 [+0.025, +0.192]" in out


def test_readme_has_the_protocol_example():
    assert "protocol" in _examples()
