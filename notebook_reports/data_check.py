"""Where each dataset of a run will come from, checked before anything runs: a local folder
(a notebook's source parameter, else the task's environment variable), else a cached or
reachable hub copy (the task specs' :class:`saf_utils.taskspec.DataSource`)."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

from notebook_reports.parameters import NotebookPlan
from notebook_reports.profiles import RunnerError


def data_env_vars() -> tuple[str, ...]:
    """Environment variables that name local data folders (each task's, WordNet for METEOR)."""
    from notebook_reports.tasks import declared_data_sources

    return (*(d.env for d in declared_data_sources()), "WORDNET_DIR")


def reachable(host: str, timeout: float = 3.0) -> bool:
    """Can a TCP connection to ``host:443`` be opened (offline env variables say no)?"""
    offline = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE") if host == "huggingface.co" else ()
    if any(os.environ.get(v, "").strip().lower() in ("1", "true", "yes") for v in offline):
        return False
    try:
        with socket.create_connection((host, 443), timeout=timeout):
            return True
    except OSError:
        return False


def check_data_sources(plans: list[NotebookPlan]) -> list[dict[str, Any]]:
    """Where each dataset a selected notebook declares (``saf_source``, ...) will come from:
    a local folder (the parameter, else its environment variable) that exists, else a hub
    copy cached or reachable; one error naming every unavailable source."""
    from notebook_reports.tasks import declared_data_sources

    out: list[dict[str, Any]] = []
    problems: list[str] = []
    for src in declared_data_sources():
        notebooks = [p.name for p in plans if src.param in p.declared]
        for value in sorted({p.params.get(src.param) for p in plans if p.name in notebooks},
                            key=str):
            source, via = (value, src.param) if value else (os.environ.get(src.env), src.env)
            entry = {"dataset": src.name, "notebooks": notebooks,
                     "via": via if source else "hub"}
            local = Path(str(source)).expanduser()
            if source and local.exists():
                out.append({**entry, "kind": "local", "source": str(local.resolve())})
                continue
            if source and not (src.is_hub_id and src.is_hub_id(str(source))):
                problems.append(f"{src.name}: {via}={source} does not exist")
                continue
            hub = str(source) if source else src.hub
            if not (cached := src.cached(hub)) and not reachable(src.host):
                given = (f"{via}={source} is no folder (relative to {Path.cwd()}) and, as a "
                         "hub id," if source else
                         f"no local source ({src.env} / {src.param} unset) and")
                problems.append(f"{src.name}: {given} {src.host} is unreachable; set "
                                f"{src.env}=<local copy>")
                continue
            out.append({**entry, "kind": "hub", "source": hub, "cached": cached})
    if problems:
        raise RunnerError("data sources: " + "; ".join(problems))
    return out
