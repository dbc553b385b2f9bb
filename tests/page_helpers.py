"""Reading the pages the tests check: external resources a page would load, its interactive
tables."""

from __future__ import annotations

import html
import json
import re
from typing import Any


def external_resources(text: str) -> list[str]:
    """External scripts, stylesheets, images or frames a page would load."""
    return re.findall(r"<(?:script|link|img|iframe|source|video|audio)\b[^>]*\b(?:src|href)\s*="
                      r"\s*[\"']?((?:https?:)?//[^\"' >]+)", text, re.I)


def read_page_tables(text: str) -> dict[str, dict[str, Any]]:
    """A page's interactive tables: ``{table id: {"columns", "data", "dt_args"}}``."""
    out = {}
    for tid, args in re.findall(r'document\.querySelectorAll\("#([^"]+):not\(\.dataTable\)"\)'
                                r'.*?let dt_args = (\{.*?\});\n', text, re.S):
        spec = json.loads(args)
        head = str(spec.get("table_html", "")).split("</thead>")[0]
        out[tid] = {"columns": [html.unescape(re.sub("<[^>]+>", "", h)).strip()
                                for h in re.findall(r"<th[^>]*>(.*?)</th>", head, re.S)],
                    "data": json.loads(str(spec.get("data_json", "[]"))), "dt_args": spec}
    return out
