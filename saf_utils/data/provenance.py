"""Data provenance: every file a loader reads is recorded with its SHA-256 (:func:`register`),
so a run manifest names exactly the data its numbers come from (:func:`data_sources`), and the
identity of every model a notebook's parameters name (:func:`model_identities`)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

_SOURCES: dict[str, dict[str, Any]] = {}
_STATS: dict[str, tuple[int, ...]] = {}  # path -> stat of the file when it was hashed


def sha256_file(path: str | Path) -> str:
    """SHA-256 of a file, read in chunks (data files can be large)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _stat_key(path: Path) -> tuple[int, ...]:
    st = path.stat()
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def register(dataset: str, source: str, path: str | Path, split: str | None = None) -> None:
    """Record a file a loader read, hashed once per version: a file whose size, mtime or
    inode changed is hashed again (earlier hashes kept in ``replaced_sha256``)."""
    path = Path(path).resolve()
    key = str(path)
    stat = _stat_key(path)
    if key in _SOURCES and _STATS.get(key) == stat:
        return
    entry = {"dataset": dataset, "source": source, "split": split, "path": key,
             "bytes": stat[0], "sha256": sha256_file(path)}
    old = _SOURCES.get(key)
    if old is not None:
        if old["sha256"] == entry["sha256"]:
            _STATS[key] = stat  # touched, not changed: keep the entry and its annotations
            return
        entry["replaced_sha256"] = [*old.get("replaced_sha256", []), old["sha256"]]
    _SOURCES[key] = entry
    _STATS[key] = stat


def data_sources() -> list[dict[str, Any]]:
    """Every data file read by a loader in this process, with size and SHA-256."""
    return sorted(_SOURCES.values(), key=lambda r: r["path"])


class DataError(ValueError):
    """Bad or missing input data; the message names file, split, row and column."""


def annotate(path: str | Path, **fields: Any) -> None:
    """Add what a loader found in a registered file (e.g. ``rows``, ``anomalies``) to its
    entry (and so to the run manifest's ``data_sources``)."""
    key = str(Path(path).resolve())
    if key not in _SOURCES:
        raise KeyError(f"{key}: not registered; call register() first")
    _SOURCES[key].update(fields)


# --------------------------------------------------------------------------- models

#: Parameter keys whose string values (keys, for ``models``) name a model, at any depth of a
#: notebook's parameters (``system_params`` nests them).
MODEL_KEYS = ("model", "encoder", "extra_encoders", "bertscore_model", "moverscore_model",
              "models")
_NOT_MODELS = ("scratch",)
_FOLDERS: dict[str, tuple[tuple[tuple[str, int, int], ...], str]] = {}


def _named_models(value: Any, key: str = "") -> list[str]:
    if isinstance(value, dict):
        names = [k for k in value if isinstance(k, str)] if key == "models" else []
        return names + [m for k, v in value.items() for m in _named_models(v, str(k))]
    if isinstance(value, (list, tuple)):
        return [m for v in value for m in _named_models(v, key)]
    if isinstance(value, str) and key in MODEL_KEYS and value not in _NOT_MODELS:
        return [value.removeprefix("bert2bert:")]
    return []


def folder_digest(folder: Path) -> str:
    """SHA-256 over the relative paths and contents of a model folder's files, computed once
    per process while no file's size or modification time changes (weights are large)."""
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    stats = tuple((p.relative_to(folder).as_posix(), p.stat().st_size, p.stat().st_mtime_ns)
                  for p in files)
    key = str(folder.resolve())
    if key not in _FOLDERS or _FOLDERS[key][0] != stats:
        h = hashlib.sha256()
        for p, (rel, _, _) in zip(files, stats, strict=True):
            h.update(rel.encode() + b"\0" + sha256_file(p).encode())
        _FOLDERS[key] = (stats, h.hexdigest())
    return _FOLDERS[key][1]


def _hub_revision(repo_id: str) -> tuple[str | None, str]:
    """(commit, how it was found) of a hub model: the local hub cache's ``main``, else the
    hub's current commit (what a download would fetch), else None offline."""
    import os

    from huggingface_hub import try_to_load_from_cache

    cached = try_to_load_from_cache(repo_id, "config.json")
    if isinstance(cached, str):
        return Path(cached).parent.name, "hub cache"
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
        return None, "not in the hub cache (offline)"
    try:
        from huggingface_hub import model_info

        return model_info(repo_id).sha, "hub"
    except Exception as exc:  # noqa: BLE001 - no network, no such repo: said, not raised
        return None, f"unresolved ({type(exc).__name__})"


def named_models(params: dict[str, Any]) -> list[str]:
    """Every model name in a notebook's parameters (:data:`MODEL_KEYS`), once each."""
    return list(dict.fromkeys(_named_models(params)))


def model_folder(name: str, base: Path | None = None) -> Path | None:
    """The folder a model name names for a notebook working in ``base`` (transformers reads a
    relative name against the working folder); None when it names no folder there."""
    folder = Path(name).expanduser()
    if base is not None and not folder.is_absolute():
        folder = base / folder
    try:
        return folder if folder.is_dir() else None
    except (OSError, ValueError):  # a name too long for a path, a NUL
        return None


def model_identity(name: str, base: Path | None = None) -> dict[str, Any]:
    """What a model name resolves to for a notebook working in ``base``: a packaged model, a
    folder with the digest of its files, or a hub id with its commit (never raises: a name it
    cannot resolve says so in ``source``)."""
    if name.startswith("local:"):
        return {"model": name, "source": "packaged (pinned by the lock)"}
    try:
        folder = model_folder(name, base)
        if folder is not None:
            return {"model": name, "source": "folder", "sha256": folder_digest(folder)}
        revision, how = _hub_revision(name)
    except Exception as exc:  # noqa: BLE001 - an id the hub refuses: the notebook said so
        revision, how = None, f"unresolved ({type(exc).__name__})"
    return {"model": name, "source": how, "revision": revision}


def model_identities(params: dict[str, Any], base: Path | None = None
                     ) -> list[dict[str, Any]]:
    """:func:`model_identity` of every model a notebook's parameters name, once each, in order;
    part of the reuse key, so a model updated under the same name reruns the notebook."""
    return [model_identity(m, base) for m in named_models(params)]
