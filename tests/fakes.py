"""Test doubles shared by several test modules (no model download)."""

import numpy as np

from saf_utils.text import word_tokens


def fake_embed(texts):
    """Deterministic bag-of-words hashing vectors: similar wording -> similar vectors."""
    out = np.zeros((len(texts), 64))
    for row, t in enumerate(texts):
        for w in word_tokens(t):
            out[row, sum(map(ord, w)) % 64] += 1.0
    out[:, 0] += 1e-3
    return out / np.linalg.norm(out, axis=1, keepdims=True)
