"""Test doubles shared by several test modules (no model download)."""

import types
import zlib

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


def bow_encoder(texts):
    """Deterministic bag-of-words hashing encoder (no model download)."""
    out = np.zeros((len(texts), 64), dtype=np.float32)
    for i, t in enumerate(texts):
        for w in word_tokens(t):
            out[i, zlib.crc32(w.encode()) % 64] += 1.0
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms == 0, 1, norms)


class FakeTok:
    """Whitespace tokenizer with BERT's special tokens, for the MoverScore plumbing tests."""

    cls_token, sep_token, cls_token_id, sep_token_id, model_max_length = "[CLS]", "[SEP]", 0, 1, 512

    def tokenize(self, t):
        return t.split()

    def convert_tokens_to_ids(self, toks):
        special = {"[CLS]": 0, "[SEP]": 1}
        return [special.get(w, 2 + zlib.crc32(w.encode()) % 50) for w in toks]


FAKE_ENCODER = (types.SimpleNamespace(config=types.SimpleNamespace(max_position_embeddings=512)),
                FakeTok())
