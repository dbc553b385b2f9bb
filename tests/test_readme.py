"""The README's and the docs' examples work as written.

- Python blocks that start with ``# readme-example: NAME`` run, and each ``# expect: TEXT``
  line of a block must appear in what it prints (a block without one is an error).
- ``saf-run`` commands in ``bash`` blocks (and the ``RUN_ARGS="…"`` of ``make`` lines) parse
  with the command's own parser, and their ``--only`` names match the profile's notebooks.
- Relative links point at files that exist.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

from notebook_reports import cli
from notebook_reports.parameters import select_notebooks

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
FILES = [README, *DOCS]


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _examples() -> dict[str, tuple[str, str]]:
    """NAME -> (file, code) of every runnable example; a name used twice is an error."""
    out: dict[str, tuple[str, str]] = {}
    for path in FILES:
        for name, code in re.findall(r"```python\n# readme-example: (\S+)\n(.*?)```",
                                     path.read_text(encoding="utf-8"), flags=re.S):
            assert name not in out, f"example {name!r} in {out.get(name, ('?',))[0]} and {path}"
            out[name] = (_rel(path), code)
    return out


@pytest.mark.parametrize("name", sorted(_examples()))
def test_docs_example_runs(name, capsys):
    where, code = _examples()[name]
    expected = re.findall(r"^# expect: (.+)$", code, flags=re.M)
    assert expected, f"{where}: example {name!r} has no '# expect:' line"
    exec(compile(code, f"{where}:{name}", "exec"), {})
    out = capsys.readouterr().out
    for text in expected:
        assert text.strip() in out, f"{where}:{name}: {text!r} not printed; got {out[-500:]!r}"


def test_the_examples_include_the_protocol():
    assert "protocol" in set(_examples())


def _commands() -> list[tuple[str, list[str]]]:
    """(file, argv after ``saf-run``) of every command in a bash block."""
    out = []
    for path in FILES:
        for block in re.findall(r"```bash\n(.*?)```", path.read_text(encoding="utf-8"),
                                flags=re.S):
            for line in block.replace("\\\n", " ").splitlines():
                line = line.split(" #", 1)[0].strip()
                if not re.search(r"saf-run|saf_utils\.run|RUN_ARGS=", line):
                    continue
                if "<" in line:  # placeholders such as reports/<run>: shlex cannot split them
                    line = re.sub(r"<[^>]*>", "X", line)
                words = shlex.split(line)
                for i, w in enumerate(words):
                    if w.endswith("saf-run") or words[i:i + 3] == ["python", "-m",
                                                                    "notebook_reports"]:
                        start = i + (1 if w.endswith("saf-run") else 3)
                        out.append((_rel(path), words[start:]))
                        break
                    if w.startswith("RUN_ARGS="):
                        out.append((_rel(path), shlex.split(w.split("=", 1)[1])))
    return out


def test_every_saf_run_command_in_the_docs_parses():
    notebooks = yaml.safe_load((ROOT / "configs" / "base.yaml").read_text())["notebooks"]
    commands = _commands()
    assert len(commands) >= 10, commands  # the README's quick start and docs/profiles.md
    for where, argv in commands:
        if argv[:1] in (["list"], ["compare"]):
            assert argv[0] == "list" or len(argv) >= 3, (where, argv)
            continue
        parser = cli.run_parser()
        if argv[:1] == ["run"]:
            argv = argv[1:]
        elif argv[:1] == ["sweep"]:  # saf-run sweep: the run options plus --matrix
            from notebook_reports.sweep import add_sweep_arguments

            argv, parser = argv[1:], add_sweep_arguments(parser)
        try:
            args = parser.parse_args(argv)
        except SystemExit:
            pytest.fail(f"{where}: saf-run {' '.join(argv)} does not parse")
        select_notebooks(notebooks, args.only)  # raises naming a bad --only


def test_relative_links_point_at_files():
    missing = []
    for path in FILES:
        text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            file = (path.parent / target.split("#", 1)[0]).resolve()
            rel = file.relative_to(ROOT).as_posix() if file.is_relative_to(ROOT) else str(file)
            if not file.exists():
                missing.append(f"{_rel(path)} -> {target} ({rel})")
    assert not missing, missing
