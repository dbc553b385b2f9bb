"""MoverScore v2, an own port of moverscore_v2 (same numbers); BERTScore is bert-score's."""

from __future__ import annotations

import math
import os
import string
import warnings
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from saf_utils import determinism
from saf_utils.encoders.sentence import minilm_path, resolve_model
from saf_utils.metrics.base import register_metric
from saf_utils.metrics.checks import check_pairs, check_texts, per_distinct_pair
from saf_utils.metrics.embedding import resolve_device

_ENCODERS: dict[tuple[str, str], tuple[Any, Any]] = {}
_PUNCTUATION = frozenset(string.punctuation)


def load_encoder(model: str | os.PathLike[str] | tuple[Any, Any], device: str = "cpu"):
    """``(model, tokenizer)`` for a path/hub id (loaded once per process) or a given pair."""
    if isinstance(model, tuple):
        enc, tok = model
        return enc.to(device).eval(), tok
    model = resolve_model(str(model))
    key = (model, device)
    if key not in _ENCODERS:
        from transformers import AutoModel, AutoTokenizer

        determinism.pin()
        tok = AutoTokenizer.from_pretrained(str(model))
        enc = AutoModel.from_pretrained(str(model)).to(device).eval()
        _ENCODERS[key] = (enc, tok)
    return _ENCODERS[key]


def _max_tokens(enc: Any, tok: Any) -> int:
    """Word pieces kept per text: 510 for 512-position models, as in moverscore_v2."""
    limit = getattr(enc.config, "max_position_embeddings", 512) or 512
    model_max = getattr(tok, "model_max_length", limit) or limit
    return int(min(limit, model_max)) - 2


def _idf(ids_per_doc: Sequence[Sequence[int]]) -> tuple[dict[int, float], float]:
    """moverscore_v2 ``get_idf_dict``: log((N+1)/(df+1)); unseen ids get log(N+1)."""
    df: Counter[int] = Counter()
    for ids in ids_per_doc:
        df.update(set(ids))
    n = len(ids_per_doc)
    return {i: math.log((n + 1) / (c + 1)) for i, c in df.items()}, math.log(n + 1)


def get_idf_dict(texts: Sequence[str], model: str | os.PathLike[str] | tuple[Any, Any],
                 device: str = "cpu") -> defaultdict[int, float]:
    """moverscore_v2's ``get_idf_dict`` over ``texts``: token id -> log((N+1)/(df+1)), unseen
    ids log(N+1); for ``idf_dict_ref`` / ``idf_dict_hyp``."""
    texts = check_texts(texts, "texts")
    enc, tok = load_encoder(model, device)
    max_tokens = _max_tokens(enc, tok)
    docs = [tok.convert_tokens_to_ids([tok.cls_token, *tok.tokenize(t)[:max_tokens],
                                       tok.sep_token]) for t in texts]
    table, unseen = _idf(docs)
    out: defaultdict[int, float] = defaultdict(lambda: unseen)
    out.update(table)
    return out


def moverscore(refs: Sequence[str], hyps: Sequence[str],
               model: str | os.PathLike[str] | tuple[Any, Any], device: str = "cpu",
               batch_size: int = 64, stop_words: Sequence[str] | frozenset[str] = (),
               idf_dict_ref: Mapping[int, float] | None = None,
               idf_dict_hyp: Mapping[int, float] | None = None,
               degenerate_score: float = 1.0) -> list[float]:
    """MoverScore v2 (Zhao et al., 2019; unigrams), the numbers of
    ``moverscore_v2.word_mover_score``: the last hidden layer; ``[CLS] + tokenize(text)[:510]
    + [SEP]``; IDF over ``refs`` and ``hyps`` separately unless given; ``##`` pieces, single
    punctuation and ``stop_words`` weigh 0; 1 - EMD of L2-normalised embeddings under
    Euclidean cost; ``degenerate_score`` where one side weighs 0 (an empty text; a single
    pair, where every IDF is 0). Faster: each distinct text embedded once, zero-weight tokens
    dropped before the EMD (they carry no flow), POT's ``emd2`` in float64 for pyemd.
    """
    refs, hyps = check_texts(refs, "refs"), check_texts(hyps, "hyps")
    if len(refs) != len(hyps):
        raise ValueError(f"got {len(refs)} references and {len(hyps)} hypotheses")
    if not refs:
        return []
    if len(refs) == 1 and (idf_dict_ref is None or idf_dict_hyp is None):
        warnings.warn("MoverScore of a single pair: every corpus IDF weight is 0, the score "
                      "is 1.0", stacklevel=2)
    enc, tok = load_encoder(model, device)
    ids, keep = _pieces(tok, _max_tokens(enc, tok), [*refs, *hyps], frozenset(stop_words))
    emb = _embed(enc, tok, ids, keep, device, batch_size)
    w_ref = _idf_weights(refs, ids, keep, idf_dict_ref)
    w_hyp = _idf_weights(hyps, ids, keep, idf_dict_hyp)
    return _emd_scores(refs, hyps, emb, w_ref, w_hyp, degenerate_score)


def _pieces(tok: Any, max_tokens: int, texts: Sequence[str], stop: frozenset[str]
            ) -> tuple[dict[str, list[int]], dict[str, np.ndarray]]:
    """Per distinct text: ``[CLS] + tokenize(text)[:max_tokens] + [SEP]`` ids and which
    pieces carry weight (not ``##`` pieces, single ASCII punctuation or stop words)."""
    ids, keep = {}, {}
    for t in dict.fromkeys(texts):
        tokens = [tok.cls_token, *tok.tokenize(t)[:max_tokens], tok.sep_token]
        ids[t] = tok.convert_tokens_to_ids(tokens)
        keep[t] = np.array([not (w in stop or "##" in w or w in _PUNCTUATION) for w in tokens])
    return ids, keep


def _embed(enc: Any, tok: Any, ids: Mapping[str, list[int]], keep: Mapping[str, np.ndarray],
           device: str, batch_size: int) -> dict[str, np.ndarray]:
    """L2-normalised last-layer embeddings of each text's weighted pieces; each distinct text
    embedded once, longest first so that padding stays small."""
    import torch
    from tqdm.auto import tqdm

    order = sorted(ids, key=lambda t: -len(ids[t]))
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else 0
    emb: dict[str, np.ndarray] = {}
    with torch.inference_mode():
        for start in tqdm(range(0, len(order), batch_size), desc="moverscore",
                          disable=len(order) <= 4 * batch_size):
            batch = order[start : start + batch_size]
            width = len(ids[batch[0]])
            input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for row, t in enumerate(batch):
                input_ids[row, : len(ids[t])] = torch.tensor(ids[t])
                mask[row, : len(ids[t])] = 1
            hidden = enc(input_ids=input_ids.to(device), attention_mask=mask.to(device))
            hidden = hidden.last_hidden_state.float().cpu().numpy()
            for row, t in enumerate(batch):
                vecs = hidden[row, : len(ids[t])][keep[t]].astype(np.float64)
                norms = np.linalg.norm(vecs, axis=1, keepdims=True)
                emb[t] = vecs / (norms + 1e-30)
    return emb


def _idf_weights(texts: Sequence[str], ids: Mapping[str, list[int]],
                 keep: Mapping[str, np.ndarray], given: Mapping[int, float] | None
                 ) -> dict[str, np.ndarray]:
    """IDF weight of each weighted piece of each text: from ``texts`` themselves, or from a
    given table (which behaves like the original's defaultdict from ``get_idf_dict``: ids it
    lacks get its default, or its largest weight, i.e. log(N+1))."""
    if given is None:
        table, unseen = _idf([ids[t] for t in texts])
    else:
        table = given
        factory = getattr(given, "default_factory", None)
        unseen = factory() if factory else max(given.values(), default=1.0)
    out = {}
    for t in dict.fromkeys(texts):
        ws = [table.get(i, unseen) for i, k in zip(ids[t], keep[t], strict=True) if k]
        out[t] = np.asarray(ws, dtype=np.float64)
    return out


def _emd_scores(refs: Sequence[str], hyps: Sequence[str], emb: Mapping[str, np.ndarray],
                w_ref: Mapping[str, np.ndarray], w_hyp: Mapping[str, np.ndarray],
                degenerate_score: float) -> list[float]:
    """1 - EMD per pair (Euclidean cost between normalised embeddings, POT in float64);
    ``degenerate_score`` where one side has no weight."""
    import ot

    scores: list[float] = []
    for ref, hyp in zip(refs, hyps, strict=True):
        a, b = w_ref[ref], w_hyp[hyp]
        sa, sb = a.sum(), b.sum()
        if sa <= 0 or sb <= 0:
            scores.append(float(degenerate_score))
            continue
        cos = emb[ref] @ emb[hyp].T
        dist = np.sqrt(np.clip(2.0 - 2.0 * cos, 1e-30, None))
        scores.append(float(1.0 - ot.emd2(a / sa, b / sb, dist, numItermax=1_000_000)))
    return scores


@register_metric("moverscore", inputs="texts", library="own port of moverscore_v2",
                 description="MoverScore (1 - EMD, on MiniLM)", scale="[-1, 1]",
                 definition="Mean per-output MoverScore v2: 1 minus the earth mover's "
                 "distance between IDF-weighted contextual embeddings (one IDF table from the "
                 "references). The embeddings are all-MiniLM-L6-v2's (sentence-transformers), "
                 "not the paper's DistilBERT: values are not comparable with published "
                 "MoverScores. Euclidean distances between unit vectors lie in [0, 2], so a "
                 "score lies in [-1, 1], and unrelated texts score below 0.",
                 reference="Zhao et al. (2019), MoverScore, EMNLP")
def moverscore_items(refs: Sequence[str], hyps: Sequence[str],
                     model: str | os.PathLike[str] | tuple[Any, Any] | None = None,
                     device: str | None = "auto", batch_size: int = 64,
                     idf_texts: Sequence[str] | None = None) -> list[float]:
    """Per-pair MoverScore v2 (references first) with one IDF table from ``idf_texts``
    (default ``refs``) for both sides (per-side IDF gives a constant output weight 0 on every
    token: a perfect 1.0); a hypothesis without a weighted token scores 0."""
    hyps, refs = check_pairs(hyps, refs)
    corpus = refs if idf_texts is None else check_texts(idf_texts, "idf_texts")
    model = model or minilm_path()
    dev = resolve_device(device)
    idf = get_idf_dict(corpus, model, device=dev)
    with determinism.training_threads():  # the same last bits on any thread count
        return per_distinct_pair(
            lambda h, r: moverscore(r, h, model=model, device=dev, batch_size=batch_size,
                                    idf_dict_ref=idf, idf_dict_hyp=idf, degenerate_score=0.0),
            hyps, refs)
