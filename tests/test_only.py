"""``--only``: full names or unique prefixes, repeated or comma-separated (``--only 02,05``),
in profile order; a name that matches nothing or several is one clear error."""

from __future__ import annotations

import pytest

from notebook_reports.cli import run_parser
from notebook_reports.parameters import select_notebooks
from notebook_reports.profiles import RunnerError

NAMES = ["01_data_exploration", "02_baseline_finetuning", "03_fact_selection", "04_generation",
         "05_saf_error_analysis", "06_argscichat_error_analysis"]


def test_a_comma_list_selects_each_name_in_profile_order():
    assert select_notebooks(NAMES, ["05,02"]) == ["02_baseline_finetuning",
                                                 "05_saf_error_analysis"]
    assert select_notebooks(NAMES, ["01_data_exploration, 03"]) == ["01_data_exploration",
                                                                    "03_fact_selection"]
    # repeated and comma-separated mix; a name given twice counts once
    assert select_notebooks(NAMES, ["02,04", "04_generation"]) == ["02_baseline_finetuning",
                                                                   "04_generation"]


def test_the_command_line_passes_the_comma_list_through():
    args = run_parser().parse_args(["--profile", "smoke", "--only", "02,05"])
    assert select_notebooks(NAMES, args.only) == ["02_baseline_finetuning",
                                                  "05_saf_error_analysis"]


@pytest.mark.parametrize(("wanted", "message"), [
    (["0"], "matches ['01_data_exploration'"),      # ambiguous prefix: names the candidates
    (["02,zzz"], "--only 'zzz' matches nothing"),   # names the part that failed
    (["02,"], "an empty name"),
])
def test_bad_parts_are_named(wanted, message):
    with pytest.raises(RunnerError) as err:
        select_notebooks(NAMES, wanted)
    assert message in str(err.value)


def test_saf_run_dry_run_takes_a_comma_list(tmp_path, capsys):
    """The whole command, as a user types it: ``saf-run --only a,b --dry-run``."""
    import nbformat
    import yaml

    from notebook_reports import cli

    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    for name in ("a_first", "b_second", "c_third"):
        nb = nbformat.v4.new_notebook()
        cell = nbformat.v4.new_code_cell("value = 0.5\noutput_dir = None")
        cell.metadata["tags"] = ["parameters"]
        nb.cells = [cell]
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                     "language": "python"}
        nbformat.write(nb, nbs / f"{name}.ipynb")
    (tmp_path / "toy.yaml").write_text(yaml.safe_dump(
        {"notebooks": ["a_first", "b_second", "c_third"]}))
    base = ["--config", str(tmp_path / "toy.yaml"), "--notebooks-dir", str(nbs),
            "--reports-dir", str(tmp_path / "reports"), "--dry-run"]
    assert cli.main([*base, "--only", "c_third,a"]) == 0
    out = capsys.readouterr().out
    assert "[1] a_first" in out and "[2] c_third" in out and "b_second" not in out
    assert cli.main([*base, "--only", "a,zzz"]) == 2
    assert "--only 'zzz' matches nothing" in capsys.readouterr().err


def test_dry_run_prints_every_value_whole_ready_to_paste(capsys):
    """The JupyterLab recipe pastes the dry run's parameter lines into a notebook's parameters
    cell: every value must be printed whole (02's ``system_params`` is thousands of characters)
    and the pasted lines must run and give the planned values."""
    import textwrap

    from notebook_reports import cli

    assert cli.main(["--profile", "smoke", "--only", "02", "--dry-run"]) == 0
    out = capsys.readouterr().out
    block = out.split("[1] 02_baseline_finetuning", 1)[1].split("\n", 1)[1]
    lines = []
    for line in block.splitlines():
        if not line.startswith("      ") or " = " not in line:
            break
        lines.append(line)
    cell: dict = {}
    exec(textwrap.dedent("\n".join(lines)), {}, cell)  # noqa: S102 - the user's paste, as written
    assert isinstance(cell["system_params"], dict) and "cross_encoder" in cell["system_params"]
    assert len(repr(cell["system_params"])) > 500  # the value that used to be cut
    assert "seeds" in cell
