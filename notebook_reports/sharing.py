"""Pages you can share: :func:`esc` (HTML) and :func:`md` (Markdown) escape every value from
the data or a run where it meets markup; :func:`clean_html` sanitises every other HTML;
:class:`PathScrubber` hides the machine's absolute paths."""

from __future__ import annotations

import html
import os
import re
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from saf_utils.text import listing  # noqa: F401  (notebooks import it from here)

# ASCII punctuation that Markdown (CommonMark, GFM tables, nbconvert's $math$, autolinks) may
# interpret
_MD_SPECIAL = set("\\`*_{}[]()#+-!|~$:")
_HTML_SPECIAL = {"<": "&lt;", ">": "&gt;", "&": "&amp;", '"': "&quot;", "'": "&#39;"}


def esc(x: Any) -> str:
    """``x`` as HTML text (``None`` -> empty)."""
    return html.escape("" if x is None else str(x))


def md(x: Any, code: bool = False) -> str:
    """``x`` as literal Markdown text on one line (no tag, link, emphasis or new block);
    ``code=True``: a code span instead (the renderer escapes its content)."""
    text = " ".join(("" if x is None else str(x)).split())
    if code:
        fence = "`" * (max((len(r) for r in re.findall(r"`+", text)), default=0) + 1)
        return f"{fence} {text} {fence}" if text else ""
    return "".join(_HTML_SPECIAL.get(c) or (f"\\{c}" if c in _MD_SPECIAL else c) for c in text)


def fields_md(fields: Mapping[str, Any]) -> str:
    """``{name: text}`` as a Markdown list, each text literal with its line breaks kept."""
    return "\n".join(f"- **{md(k)}**: " + "  \n  ".join(
        md(line) for line in (str(v).splitlines() or [""])) for k, v in fields.items())


#: Words of the notebooks' verdict sentences and the glossary entries (how-to-read.html,
#: next to every notebook page in a run folder) that explain them.
VERDICT_TERMS = (
    ("Primary comparison", "primary-comparison"),
    ("Holm-adjusted", "holm"),
    ("not distinguishable", "not-distinguishable"),
    ("minimum detectable effect", "not-distinguishable"),
    ("Estimand", "estimand"),
    ("was not tested", "not-tested"),
    ("exact randomization", "paired-difference"),
)


def md_terms(x: Any, code: bool = False) -> str:
    """:func:`md` of a verdict sentence whose terms (:data:`VERDICT_TERMS`) link to the
    glossary, each once."""
    text = md(x, code)
    if code:
        return text
    for words, anchor in VERDICT_TERMS:
        escaped = md(words)
        if escaped in text:
            text = text.replace(escaped, f"[{escaped}](how-to-read.html#{anchor})", 1)
    return text


ALLOWED_TAGS = frozenset(
    "a abbr b blockquote br caption code col colgroup dd del details div dl dt em figcaption "
    "figure h1 h2 h3 h4 h5 h6 hr i img input kbd li mark ol p pre q s samp small span strong "
    "sub summary sup table tbody td tfoot th thead tr u ul var wbr".split())
_COMMON_ATTRS = {"class", "id", "title", "lang", "dir"}
_TAG_ATTRS = {
    "a": {"href", "rel"}, "img": {"alt", "width", "height"},
    "td": {"colspan", "rowspan", "align", "data-v"}, "th": {"colspan", "rowspan", "align"},
    "table": {"border"}, "ol": {"start"}, "col": {"span"}, "colgroup": {"span"},
    "input": {"size", "placeholder", "type", "disabled", "checked"},
}
_IMAGE_URI = re.compile(r"data:image/(?:png|jpeg|gif);base64,[A-Za-z0-9+/=\s]*\Z")
_SAFE_HREF = re.compile(r"(?:https?:|mailto:|#|[^:]*(?:[/?#]|\Z))", re.I)
_BARE_IMG = re.compile(r"<img(?![^>]*\ssrc=)[^>]*>")
_STYLE_ELEMENT = re.compile(r"<style\b[^>]*>.*?</style\s*>", re.I | re.S)


def _allow_attr(tag: str, name: str, value: str) -> bool:
    if name in _COMMON_ATTRS or name in _TAG_ATTRS.get(tag, ()):
        return name != "href" or bool(_SAFE_HREF.match(value.strip()))
    return tag == "img" and name == "src" and bool(_IMAGE_URI.match(value.strip()))


def clean_html(text: Any) -> str:
    """The one sanitiser (also nbconvert's filter for notebook pages), bleach with an
    allowlist: other tags escaped into visible text, other attributes (``on*``, ``style``)
    dropped; links keep http(s), mailto and relative targets, images only ``data:image``
    sources; ``<style>`` elements (pandas' table CSS) go with their content."""
    import bleach

    text = text.decode() if isinstance(text, bytes) else str(text)
    out = bleach.clean(_STYLE_ELEMENT.sub("", text), tags=ALLOWED_TAGS,
                       attributes=_allow_attr, protocols={"http", "https", "mailto", "data"},
                       strip=False, strip_comments=True)
    return _BARE_IMG.sub("&lt;img&gt;", out)  # an image whose source was refused


_SITE_PACKAGES = re.compile(r"(?:[A-Za-z]:)?[/\\](?:[^\s'\"<>/\\]+[/\\])*?(?:site|dist)-packages"
                            r"[/\\]")
# an absolute path (two or more segments) that starts a word: after a space, quote, bracket,
# '=' or '>' (so neither URLs, nor 'and/or', nor base64 data)
_ABS_PATH = re.compile(r"(?:^|(?<=[\s'\"(\[{=>]))/[^\s'\"<>/:]+(?:/[^\s'\"<>/:]+)+/?", re.M)
_END = r"(?=$|[/\\\s'\"<>),;:\]}&`])"


class PathScrubber:
    """Replace the machine's absolute paths with names; package files lose everything up to
    ``site-packages/``, any other absolute path keeps its last part (``…/x``)."""

    def __init__(self, run_dir: str | os.PathLike | None = None,
                 sources: Mapping[str, Any] | None = None):
        """Known prefixes, longest first: ``$RUN``, the data folders (``$SAF_DATA``, or a
        key of ``sources`` such as ``$saf_source``), ``$PROJECT``, ``$VENV``, ``$PYTHON``,
        ``$TMPDIR``, ``~``; each also as its real path."""
        from notebook_reports.data_check import data_env_vars
        from notebook_reports.manifest import PROJECT_ROOT

        run = str(Path(run_dir).absolute()) if run_dir is not None else None
        named = [*([(run, "$RUN")] if run else []),
                 *((os.environ[v], f"${v}") for v in data_env_vars() if os.environ.get(v)),
                 *((v, f"${k}") for k, v in (sources or {}).items() if isinstance(v, str)
                   and os.path.isabs(v) and not (run and (v + "/").startswith(run + "/"))),
                 (PROJECT_ROOT, "$PROJECT"),
                 *([(sys.prefix, "$VENV")] if sys.prefix != sys.base_prefix else []),
                 (sys.base_prefix, "$PYTHON"), (tempfile.gettempdir(), "$TMPDIR"),
                 (Path.home(), "~")]
        pairs: dict[str, str] = {}
        for path, name in named:
            for form in {str(Path(path).absolute()).rstrip("/\\"), os.path.realpath(path)}:
                if len(form) > 1:
                    pairs.setdefault(form, name)
        self._known = [(re.compile(re.escape(p) + _END), n)
                       for p, n in sorted(pairs.items(), key=lambda kv: -len(kv[0]))]

    def __call__(self, text: str, generic: bool = True) -> str:
        """``text`` without absolute paths; ``generic=False`` replaces known prefixes only."""
        if not text:
            return text
        text = _SITE_PACKAGES.sub("", text)
        for pat, name in self._known:
            text = pat.sub(name.replace("\\", "\\\\"), text)
        if generic:
            text = _ABS_PATH.sub(lambda m: "…/" + m.group(0).rstrip("/").rsplit("/", 1)[-1],
                                 text)
        return text

    def notebook(self, nb: Any) -> Any:
        """Scrub a notebook node in place: cell sources and every text output."""
        for cell in nb.cells:
            cell.source = self(cell.source)
            for out in cell.get("outputs", []):
                data = out.get("data") or {}
                for d, k in [(out, k) for k in ("text", "evalue") if k in out] + [
                        (data, k) for k, v in data.items()
                        if k.startswith("text/") and isinstance(v, (str, list))]:
                    d[k] = self(d[k] if isinstance(d[k], str) else "".join(d[k]))
                if "traceback" in out:
                    out["traceback"] = [self(line) for line in out["traceback"]]
        return nb
