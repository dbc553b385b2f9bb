"""The shared seq2seq trainer: scratch T5, bert2bert warm start, determinism, bad input."""

from __future__ import annotations

import os

import pytest

from saf_utils.training.seq2seq import (
    Seq2SeqSettings,
    generate,
    train_scratch_tokenizer,
    train_seq2seq,
)


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Tiny models gain nothing from two threads, and spin when the cores are shared."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)

SOURCES = [f"Antwort: die Zahl {i} ist {('un' if i % 2 else '') + 'gerade'}" for i in range(24)]
TARGETS = [("Correct" if i % 3 else "Incorrect") + f" Feedback: {i} geprüft" for i in range(24)]
TINY = dict(max_steps=4, batch_size=8, logging_steps=2, scratch_vocab_size=120,
            scratch_d_model=32, scratch_heads=2, scratch_ff=64, scratch_layers=1,
            max_source_length=32, max_target_length=12)


def test_scratch_tokenizer_is_deterministic_and_keeps_umlauts():
    a = train_scratch_tokenizer(SOURCES + TARGETS, 120)
    b = train_scratch_tokenizer(SOURCES + TARGETS, 120)
    assert a.get_vocab() == b.get_vocab()
    ids = a("geprüft")["input_ids"]
    assert ids[-1] == a.eos_token_id
    assert a.decode(ids, skip_special_tokens=True) == "geprüft"


def test_scratch_training_is_reproducible_for_a_seed():
    settings = Seq2SeqSettings(model="scratch", seed=7, **TINY)
    m1, tok1, log1 = train_seq2seq(SOURCES, TARGETS, settings)
    m2, tok2, log2 = train_seq2seq(SOURCES, TARGETS, settings)
    assert log1["train_loss"] == log2["train_loss"] and log1["train_steps"] == 4
    assert log1["n_parameters"] > 0
    out1 = generate(m1, tok1, SOURCES[:5], settings, batch_size=2)
    assert out1 == generate(m2, tok2, SOURCES[:5], settings, batch_size=3)
    assert len(out1) == 5 and all(isinstance(o, str) for o in out1)


def test_bert2bert_from_a_local_encoder(tmp_path):
    from transformers import BertConfig, BertModel, BertTokenizer

    words = sorted({w.lower() for t in SOURCES + TARGETS for w in t.replace(":", " ").split()})
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]
    (tmp_path / "vocab.txt").write_text("\n".join(vocab))
    BertTokenizer(str(tmp_path / "vocab.txt")).save_pretrained(tmp_path)
    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
    BertModel(config).save_pretrained(tmp_path)
    settings = Seq2SeqSettings(model=f"bert2bert:{tmp_path}", learning_rate=1e-3, **TINY)
    model, tok, log = train_seq2seq(SOURCES, TARGETS, settings)
    assert log["train_steps"] == 4
    assert len(generate(model, tok, SOURCES[:3], settings)) == 3


def test_bad_input_is_reported():
    settings = Seq2SeqSettings(model="scratch", **TINY)
    with pytest.raises(ValueError, match="3 sources but 2 targets"):
        train_seq2seq(SOURCES[:3], TARGETS[:2], settings)
    with pytest.raises(ValueError, match=r"empty or non-string source at row\(s\) \[1\]"):
        train_seq2seq([SOURCES[0], "  ", SOURCES[2]], TARGETS[:3], settings)


def test_shards_cover_every_input_once_in_order():
    from saf_utils.training.seq2seq import shard_range

    for n in range(8):
        for world in (1, 2, 3):
            parts = [list(shard_range(n, r, world)) for r in range(world)]
            assert sum(parts, []) == list(range(n))
            assert max(map(len, parts)) - min(map(len, parts)) <= 1
    with pytest.raises(ValueError):
        shard_range(3, 2, 2)


def test_canonical_vocab_ignores_the_order_of_appended_characters():
    """The trainer appends uncovered characters with scores ``min - k * 1e-4`` in a new
    hash order on every call: the same set of scores, assigned differently. The canonical
    vocabulary must not depend on the assignment, even where the run straddles a rounding
    boundary and sits above the lowest multi-character piece (one ArgSciChat
    fold's tokenizers differed from run to run)."""
    import itertools

    from saf_utils.training.seq2seq import canonical_unigram_vocab

    specials = ["<pad>", "</s>", "<unk>"]
    pieces = [("<unk>", 0.0), ("▁the", -2.5), ("e", -3.1), ("▁Gi", -11.7658), ("ho", -11.8902),
              ("scen", -11.8948)]
    appended = list("([jQqYK")
    start = -11.904732245308429  # the run crosses -11.905, where rounding to 0.01 flips
    runs = {tuple(canonical_unigram_vocab(
        pieces + [(c, start - k * 1e-4) for k, c in enumerate(order)] + [("▁expe", -11.9053)],
        specials)) for order in itertools.islice(itertools.permutations(appended), 0, 720, 37)}
    assert len(runs) == 1
    vocab = dict(runs.pop())
    assert {vocab[c] for c in appended} == {round(start - 6e-4, 2)}
    assert vocab["▁the"] == -2.5 and vocab["e"] == -3.1  # scored pieces keep their scores


realdata = pytest.mark.realdata
needs_argscichat = pytest.mark.skipif(not os.environ.get("ARGSCICHAT_DATA"),
                                      reason="ARGSCICHAT_DATA not set")


@realdata
@needs_argscichat
def test_scratch_tokenizer_is_the_same_on_every_call_on_real_texts():
    """Fold 0's training texts of notebook 04's seq2seq: before the canonical vocabulary,
    5 of 6 tokenizers trained on them in one process differed, and tokenized the fold's
    test sources differently."""
    from saf_utils.argscichat import generation as RG
    from saf_utils.argscichat.data import load_argscichat
    from saf_utils.argscichat.dialogue import pair_index

    data = load_argscichat(fold=0)
    index = pair_index([*data.train, *data.val, *data.test])
    texts = [RG.build_source(p, ["query", "selected_facts"], p.fact_indexes, index)
             for p in data.train] + [p.reply for p in data.train]
    unseen = [RG.build_source(p, ["query", "gold_facts"], None, index) for p in data.test]
    toks = [train_scratch_tokenizer(texts, 2000) for _ in range(6)]
    assert len({t.backend_tokenizer.to_str() for t in toks}) == 1
    assert len({str(t(unseen)["input_ids"]) for t in toks}) == 1
