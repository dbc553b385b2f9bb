"""Tiny, randomly initialised stand-ins of every model the gpu profile names, built at test
time (nothing committed, nothing downloaded).

Each stand-in has the class and tokenizer family of the model it replaces, only its sizes
cut: mBART (a Unigram tokenizer with mBART's language codes), mT5 (also as a
sentencepiece-only copy: ``spiece.model`` and no ``tokenizer.json``, the way the hub ships
``google/mt5-base``), LED (byte-level BPE, as RoBERTa's), XLM-R (Unigram), a 10-layer
multilingual BERT (BERTScore reads its layer 9), and the two sentence encoders as
sentence-transformers folders. Tokenizers are trained on the given texts (the shared
data's, so they segment real German and English). :func:`build_standins` saves each one as a
local folder and, where ``hub_cache`` is given, under its hub id in an offline hub cache, so
that the profile's own names resolve with ``HF_HUB_OFFLINE=1``.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Sequence
from pathlib import Path

#: The hub ids of configs/gpu.yaml and the architecture of each stand-in.
GPU_MODELS = {
    "facebook/mbart-large-cc25": "mbart",
    "google/mt5-base": "mt5",
    "allenai/led-base-16384": "led",
    "xlm-roberta-base": "xlmr",
    "bert-base-multilingual-cased": "mbert",
    "sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2": "st_minilm",
    "sentence-transformers/all-mpnet-base-v2": "st_mpnet",
}
D_MODEL = 32
#: No dropout anywhere: a stand-in's loss is then the same on every path (gradient
#: accumulation, DDP ranks, the kernel), which is what the parity tests compare.
NO_DROPOUT = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}


def _unigram_vocab(texts: Sequence[str], size: int, specials: Sequence[str]
                   ) -> list[tuple[str, float]]:
    from saf_utils.training.seq2seq import train_scratch_tokenizer

    tok = train_scratch_tokenizer(texts, size)
    vocab = tok.backend_tokenizer.model.__getstate__()
    import json

    pieces = json.loads(vocab)["vocab"]
    return [(s, 0.0) for s in specials] + [(p, float(sc)) for p, sc in pieces
                                           if p not in ("<pad>", "</s>", "<unk>", *specials)]


def _wordpiece_vocab(texts: Sequence[str], size: int, specials: Sequence[str]) -> dict[str, int]:
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=False)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(list(texts), trainers.WordPieceTrainer(
        vocab_size=size, special_tokens=list(specials), show_progress=False))
    return tok.get_vocab()


def _bpe(texts: Sequence[str], size: int) -> tuple[dict[str, int], list[tuple[str, str]]]:
    import json

    from tokenizers import ByteLevelBPETokenizer

    tok = ByteLevelBPETokenizer()
    tok.train_from_iterator(list(texts), vocab_size=size, show_progress=False,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    model = json.loads(tok._tokenizer.model.__getstate__())
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    return model["vocab"], merges


def _spiece(texts: Sequence[str], folder: Path, size: int) -> Path:
    """A real sentencepiece model file (what the hub's mT5 ships), trained on ``texts``."""
    import sentencepiece as spm

    corpus = folder / "corpus.txt"
    corpus.write_text("\n".join(t.replace("\n", " ") for t in texts), encoding="utf-8")
    spm.SentencePieceTrainer.train(
        input=str(corpus), model_prefix=str(folder / "spiece"), vocab_size=size,
        model_type="unigram", pad_id=0, eos_id=1, unk_id=2, bos_id=-1,
        character_coverage=1.0, minloglevel=2, hard_vocab_limit=False)
    corpus.unlink()
    return folder / "spiece.model"


def _save(model, tokenizer, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _mbart(texts: Sequence[str], folder: Path) -> Path:
    from transformers import MBartConfig, MBartForConditionalGeneration, MBartTokenizer

    tok = MBartTokenizer(vocab=_unigram_vocab(texts, 400, ["<s>", "<pad>", "</s>", "<unk>"]),
                         src_lang="de_DE", tgt_lang="de_DE")
    cfg = MBartConfig(vocab_size=len(tok), d_model=D_MODEL, encoder_layers=1,
                      decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
                      encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=600,
                      dropout=0.0,
                      pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
                      eos_token_id=tok.eos_token_id, decoder_start_token_id=tok.eos_token_id)
    return _save(MBartForConditionalGeneration(cfg), tok, folder)


def _mt5(texts: Sequence[str], folder: Path) -> Path:
    """mT5 saved the way the hub ships it: a sentencepiece model, no ``tokenizer.json``."""
    import json

    from transformers import MT5Config, MT5ForConditionalGeneration

    folder.mkdir(parents=True, exist_ok=True)
    _spiece(texts, folder, 400)
    cfg = MT5Config(vocab_size=400 + 100, d_model=D_MODEL, d_kv=16, d_ff=64, num_layers=1,
                    num_decoder_layers=1, num_heads=2, dropout_rate=0.0, pad_token_id=0,
                    eos_token_id=1, decoder_start_token_id=0)
    MT5ForConditionalGeneration(cfg).save_pretrained(folder)
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "T5Tokenizer", "extra_ids": 100, "eos_token": "</s>",
         "unk_token": "<unk>", "pad_token": "<pad>"}))
    return folder


def _led(texts: Sequence[str], folder: Path) -> Path:
    from transformers import LEDConfig, LEDForConditionalGeneration, RobertaTokenizer

    vocab, merges = _bpe(texts, 600)
    tok = RobertaTokenizer(vocab=vocab, merges=merges)
    cfg = LEDConfig(vocab_size=len(tok), d_model=D_MODEL, encoder_layers=1, decoder_layers=1,
                    encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                    decoder_ffn_dim=64, attention_window=[16], dropout=0.0,
                    max_encoder_position_embeddings=1024, max_decoder_position_embeddings=256,
                    pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
                    eos_token_id=tok.eos_token_id, decoder_start_token_id=tok.eos_token_id)
    return _save(LEDForConditionalGeneration(cfg), tok, folder)


def _xlmr(texts: Sequence[str], folder: Path) -> Path:
    from transformers import XLMRobertaConfig, XLMRobertaModel, XLMRobertaTokenizer

    tok = XLMRobertaTokenizer(vocab=_unigram_vocab(
        texts, 400, ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]))
    cfg = XLMRobertaConfig(vocab_size=len(tok), hidden_size=D_MODEL, num_hidden_layers=2,
                           num_attention_heads=2, intermediate_size=64,
                           max_position_embeddings=300, pad_token_id=tok.pad_token_id,
                           **NO_DROPOUT)
    return _save(XLMRobertaModel(cfg), tok, folder)


def _mbert(texts: Sequence[str], folder: Path, layers: int = 10) -> Path:
    from transformers import BertConfig, BertModel, BertTokenizer

    tok = BertTokenizer(vocab=_wordpiece_vocab(
        texts, 500, ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]), do_lower_case=False)
    cfg = BertConfig(vocab_size=len(tok), hidden_size=D_MODEL, num_hidden_layers=layers,
                     num_attention_heads=2, intermediate_size=64, max_position_embeddings=512,
                     **NO_DROPOUT)
    return _save(BertModel(cfg), tok, folder)


def _sentence_encoder(texts: Sequence[str], folder: Path, family: str) -> Path:
    """A sentence-transformers folder (transformer, mean pooling, normalisation)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers import models as st

    raw = folder.parent / f"{folder.name}-raw"
    if family == "st_mpnet":
        from transformers import MPNetConfig, MPNetModel, MPNetTokenizer

        tok = MPNetTokenizer(vocab=_wordpiece_vocab(
            texts, 500, ["<s>", "<pad>", "</s>", "[UNK]", "<mask>"]), do_lower_case=True)
        cfg = MPNetConfig(vocab_size=len(tok), hidden_size=D_MODEL, num_hidden_layers=2,
                          num_attention_heads=2, intermediate_size=64,
                          max_position_embeddings=520)
        _save(MPNetModel(cfg), tok, raw)
    else:  # the multilingual MiniLM: a BERT body with XLM-R's sentencepiece tokenizer
        from transformers import BertConfig, BertModel, XLMRobertaTokenizer

        tok = XLMRobertaTokenizer(vocab=_unigram_vocab(
            texts, 400, ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]))
        cfg = BertConfig(vocab_size=len(tok), hidden_size=D_MODEL, num_hidden_layers=2,
                         num_attention_heads=2, intermediate_size=64,
                         max_position_embeddings=512, pad_token_id=tok.pad_token_id)
        _save(BertModel(cfg), tok, raw)
    body = st.Transformer(str(raw), max_seq_length=128)
    model = SentenceTransformer(modules=[body, st.Pooling(D_MODEL, "mean"), st.Normalize()])
    model.save(str(folder))
    shutil.rmtree(raw)
    return folder


_BUILDERS = {"mbart": _mbart, "mt5": _mt5, "led": _led, "xlmr": _xlmr, "mbert": _mbert}


def build_standin(hub_id: str, texts: Sequence[str], folder: Path) -> Path:
    """One stand-in of ``hub_id`` (a key of :data:`GPU_MODELS`) saved in ``folder``."""
    import torch

    torch.manual_seed(0)
    family = GPU_MODELS[hub_id]
    if family.startswith("st_"):
        return _sentence_encoder(texts, folder, family)
    return _BUILDERS[family](texts, folder)


def add_to_hub_cache(hub_id: str, folder: Path, cache: Path) -> Path:
    """Copy ``folder`` into an offline hub cache (``HF_HUB_CACHE`` layout) under ``hub_id``;
    its revision is a digest of the files, as a hub commit would be."""
    digest = hashlib.sha1()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(path.relative_to(folder).as_posix().encode())
        digest.update(path.read_bytes())
    revision = digest.hexdigest()
    repo = cache / ("models--" + hub_id.replace("/", "--"))
    snapshot = repo / "snapshots" / revision
    if snapshot.exists():
        shutil.rmtree(snapshot)
    shutil.copytree(folder, snapshot)
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(revision)
    return snapshot


def build_standins(root: Path, texts: Sequence[str], hub_cache: Path | None = None
                   ) -> dict[str, Path]:
    """Every stand-in of :data:`GPU_MODELS` as ``root/<name>`` (hub id -> folder), each also
    under its hub id in ``hub_cache`` when given."""
    out = {}
    for hub_id in GPU_MODELS:
        folder = build_standin(hub_id, texts, root / hub_id.replace("/", "--"))
        if hub_cache is not None:
            add_to_hub_cache(hub_id, folder, hub_cache)
        out[hub_id] = folder
    return out
