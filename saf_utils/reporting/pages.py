"""HTML pages of a run: ``index.html`` (notebook status and results)."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any


def _table(rows: list[list[str]], head: list[str]) -> str:
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) >= 1 else f"{x:.4g}"


def write_index(run_dir: Path, manifest: dict, results: list[Any], summary) -> Path:
    """``index.html``: notebook status and links, then every recorded metric (mean ± std)."""
    nb_rows = []
    for r in results:
        link = f'<a href="{html.escape(r.html)}">{html.escape(r.name)}</a>' if r.html else r.name
        status = f'<span class="{r.status}">{r.status}</span>'
        nb_rows.append([link, status, f"{r.seconds:.1f} s", html.escape(r.error or "")])
    sections = []
    keys = ["task", "dataset", "split", "system"]
    for notebook, part in summary.groupby("notebook", sort=False):
        part = part.assign(cell=[
            _fmt(r.mean) + (f" ± {_fmt(r.std)} <small>(n={r.n})</small>" if r.n > 1 else "")
            for r in part.itertuples()])
        wide = part.pivot_table(index=keys, columns="metric", values="cell", aggfunc="first",
                                sort=False)
        metrics = list(dict.fromkeys(part.metric))
        rows = [[html.escape(str(k)) for k in idx] + [wide.at[idx, m] if isinstance(
                 wide.at[idx, m], str) else "" for m in metrics] for idx in wide.index]
        sections.append(f"<h3>{html.escape(str(notebook))}</h3>"
                        f"{_table(rows, keys + metrics)}")
    git = manifest.get("git", {})
    page = f"""<!DOCTYPE html><html><head><meta charset="utf-8">
<title>Run {html.escape(run_dir.name)}</title><style>
body{{font-family:sans-serif;margin:2em;max-width:1200px}}
table{{border-collapse:collapse;margin:1em 0}}
td,th{{border:1px solid #ccc;padding:4px 8px;text-align:left}} th{{background:#eee}}
.ok{{color:#060}} .failed{{color:#b00;font-weight:bold}}</style></head><body>
<h1>Run {html.escape(run_dir.name)}</h1>
<p>Profile <b>{html.escape(str(manifest['profile']))}</b> —
{html.escape(str(manifest.get('description') or ''))}<br>
Commit {html.escape(str(git.get('commit')))}{' (dirty)' if git.get('dirty') else ''},
started {manifest['started']}, finished {manifest.get('finished')}.
<a href="manifest.json">manifest.json</a> · <a href="metrics.json">metrics.json</a></p>
<h2>Notebooks</h2>{_table(nb_rows, ['notebook', 'status', 'time', 'error'])}
<h2>Results</h2><p>Numbers measured in this run (mean ± population std over seeds/folds
where n &gt; 1).
Published numbers are quoted inside the notebooks, never in this table.</p>
{"".join(sections) or "<p>No metric was recorded.</p>"}
</body></html>"""
    out = run_dir / "index.html"
    out.write_text(page, encoding="utf-8")
    return out
