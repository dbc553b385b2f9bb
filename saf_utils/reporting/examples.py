"""Example pages: one SAF answer or one ArgSciChat message pair followed through every system.

- ``examples-saf.html`` (:mod:`.examples_saf`): every answer of 02's evaluation splits;
- ``examples-argscichat.html`` (:mod:`.examples_argscichat`): every scored test message pair
  of 03/04; both are made of the parts in :mod:`.example_parts`, in pages of at most
  ``example_parts.PER_PAGE`` examples (``examples-saf-2.html``, ...).

Written by the runner with the other pages (:func:`saf_utils.reporting.run_folder.write_reports`)
from the files notebooks hand to each other (:mod:`saf_utils.artifacts`: predictions,
selections, replies and ``items.jsonl``); ArgSciChat texts come from the data folder the run
read (its ``data_sources``). A detail view is an anchor ``#<task>-<split>-<id>`` (CSS
``:target``, no script), so any page can link one example; the list's search box is a few
lines of the project's own script. Seeded systems show their first seed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from saf_utils import artifacts as AR
from saf_utils.reporting.example_parts import anchor, artifact_folder  # noqa: F401 - anchor
from saf_utils.reporting.examples_argscichat import argscichat_page
from saf_utils.reporting.examples_saf import saf_page
from saf_utils.reporting.manifest import write_text
from saf_utils.reporting.sharing import esc

SAF_PAGE = "examples-saf.html"
ARGSCICHAT_PAGE = "examples-argscichat.html"
PAGES = ((SAF_PAGE, "SAF examples (one answer, every system)"),
         (ARGSCICHAT_PAGE, "ArgSciChat examples (one message pair, every system)"))
#: each page, how it is built and the artifact files it is drawn from
BUILDERS = ((SAF_PAGE, saf_page, (AR.SAF_PREDICTIONS_FILE.format(split="*"),)),
            (ARGSCICHAT_PAGE, argscichat_page, (AR.SELECTIONS_FILE, AR.GENERATIONS_FILE)))
SIGNATURE_FILE = ".examples.json"


def example_pages(run_dir: Path) -> list[tuple[str, str]]:
    """``(file name, link text)`` of the example pages present in the run folder."""
    return [(name, what) for name, what in PAGES if (Path(run_dir) / name).is_file()]


def write_example_pages(run_dir: Path, manifest: Mapping[str, Any], records: Sequence[dict]
                   ) -> list[Path]:
    """The example pages whose inputs the run has (02's predictions; 03's selections or 04's
    replies); a page that cannot be built says why on the page instead of costing the run's
    other pages."""
    run_dir = Path(run_dir)
    out = []
    for name, build, patterns in BUILDERS:
        sig = _signature(run_dir, patterns, manifest)
        if (run_dir / name).is_file() and _read_signature(run_dir).get(name) == sig:
            out.append(run_dir / name)  # its inputs did not change since it was written
            continue
        try:
            built = build(run_dir, manifest, records)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            from saf_utils.reporting.pages import page

            built = [(name, page(name, f"<h1>{esc(name)}</h1><p class=\"warn\">This page "
                                 f"could not be built: {esc(type(exc).__name__)}: {esc(exc)}"
                                 "</p>", run_dir=run_dir, current=name))]
        if built is not None:
            for stale in run_dir.glob(f"{Path(name).stem}-*.html"):  # pages of fewer examples
                if stale.name not in dict(built) and stale.stem.rsplit("-", 1)[1].isdigit():
                    stale.unlink(missing_ok=True)
            out += [write_text(run_dir / file, text) for file, text in built]
            _write_signature(run_dir, name, sig)
    return out


def _signature(run_dir: Path, patterns: Sequence[str], manifest: Mapping[str, Any]) -> str:
    """What a page is drawn from: the files (size, time) of the notebooks that wrote its
    artifacts, the data folders the run read and the modules and templates that draw it;
    the runner rewrites the pages after every notebook, and an example page is rebuilt only
    when one of these changed."""
    parts: list[Any] = [[s.get("dataset"), s.get("source")] for s in
                        manifest.get("data_sources") or []]
    folders = dict.fromkeys(f for pat in patterns
                            if (f := artifact_folder(run_dir, manifest, pat)) is not None)
    for folder in folders:
        for f in sorted(folder.glob("*.jsonl*")):
            st = f.stat()
            parts.append([f.name, folder.name, st.st_size, st.st_mtime_ns])
    from saf_utils.reporting import example_parts, examples_argscichat, examples_saf
    from saf_utils.reporting.chrome import TEMPLATES

    for module in (__file__, example_parts.__file__, examples_saf.__file__,
                   examples_argscichat.__file__, *sorted((TEMPLATES / "saf").iterdir())):
        st = Path(module).stat()
        parts.append([st.st_size, st.st_mtime_ns])
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()


def _read_signature(run_dir: Path) -> dict[str, str]:
    try:
        return dict(json.loads((run_dir / SIGNATURE_FILE).read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return {}


def _write_signature(run_dir: Path, name: str, sig: str) -> None:
    write_text(run_dir / SIGNATURE_FILE, json.dumps({**_read_signature(run_dir), name: sig}))
