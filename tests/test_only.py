"""``--only``: full names or unique prefixes, repeated or comma-separated (``--only 02,05``),
in profile order; a name that matches nothing or several is one clear error."""

from __future__ import annotations

import pytest

from saf_utils.reporting.cli import run_parser
from saf_utils.reporting.profiles import RunnerError, select_notebooks

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
