"""Embedding-based text metrics: BERTScore (via ``bert-score``) and MoverScore v2, models
loaded once per process. The SAF paper's German setting is :data:`SAF_GERMAN_BERTSCORE`
(gpu profile); offline profiles use the packaged all-MiniLM-L6-v2, for which bert-score
has no rescaling baseline (its scores are reported unrescaled).
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import string
import sys
import warnings
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from saf_utils import numerics
from saf_utils.encoders import minilm_path, resolve_model
from saf_utils.metrics.base import register_metric
from saf_utils.metrics.checks import check_pairs, check_texts, per_distinct_pair

__all__ = [
    "MINILM_LAYERS",
    "SAF_GERMAN_BERTSCORE",
    "baseline_path",
    "bertscore",
    "get_bertscorer",
    "load_encoder",
    "get_idf_dict",
    "bertscore_items",
    "moverscore",
    "moverscore_items",
    "resolve_device",
]

#: SAF paper's German BERTScore setting (needs the hub model in the local cache).
SAF_GERMAN_BERTSCORE: dict[str, Any] = {
    "model_type": "bert-base-multilingual-cased",
    "num_layers": 9,
    "lang": "de",
}
#: all-MiniLM-L6-v2 has 6 transformer layers; BERTScore uses the last one.
MINILM_LAYERS = 6


# --------------------------------------------------------------------------------- BERTScore

_SCORERS: dict[tuple[Any, ...], Any] = {}


def _sorted_by_text(items: Any, key: Any = None, reverse: bool = False) -> list[Any]:
    """``sorted`` whose ties (equal ``key``) come in text order, not in the input's order."""
    return sorted(sorted(items), key=key, reverse=reverse)


def _patch_bert_score() -> None:
    """Make bert-score 0.3.13 work with transformers v5, and reproducible (idempotent).

    ``sent_encode`` encodes an empty sentence with ``build_inputs_with_special_tokens([])``,
    which v5 tokenizers lack: ``tokenizer.encode("", add_special_tokens=True)`` gives the
    same ids. And ``bert_cos_score_idf`` batches sentences in ``sorted(set(...), key=word
    count)`` order, so equal-length ones follow the string-hash seed and the padding, hence
    the last bits of the scores, change per process (measured on 1,836 SAF pairs): its
    module's ``sorted`` breaks ties by the text instead.
    """
    import bert_score.utils as bu

    if getattr(bu.sent_encode, "_saf_patched", False):
        return
    bu.sorted = _sorted_by_text  # the module's global shadows the builtin in dedup_and_sort
    original = bu.sent_encode

    def sent_encode(tokenizer: Any, sent: str) -> list[int]:
        if sent.strip() == "" and not hasattr(tokenizer, "build_inputs_with_special_tokens"):
            return tokenizer.encode("", add_special_tokens=True)
        return original(tokenizer, sent)

    sent_encode._saf_patched = True  # type: ignore[attr-defined]
    bu.sent_encode = sent_encode


def baseline_path(lang: str | None, model_type: str) -> Path | None:
    """The bert-score rescaling baseline ``rescale_baseline/{lang}/{model}.tsv``, if shipped."""
    if not lang:
        return None
    import bert_score

    path = Path(bert_score.__file__).parent / "rescale_baseline" / lang / f"{model_type}.tsv"
    return path if path.is_file() else None


def get_bertscorer(
    model_type: str,
    num_layers: int | None = None,
    lang: str | None = None,
    rescale_with_baseline: bool = False,
    device: str | None = None,
    batch_size: int = 64,
) -> Any:
    """A ``bert_score.BERTScorer`` built once per setting (model loads are slow); a local
    folder needs ``num_layers`` (bert-score's layer table is keyed by hub id)."""
    from bert_score import BERTScorer
    from bert_score.utils import model2layers

    numerics.pin()  # fixed kernels and threads before torch's first operation
    model_type = resolve_model(model_type)
    is_local = os.path.isdir(model_type)
    if num_layers is None:
        if is_local:
            raise ValueError(
                f"model_type={model_type!r} is a local folder: pass num_layers (the layer "
                "whose embeddings BERTScore uses, e.g. 6 for all-MiniLM-L6-v2)"
            )
        if model_type not in model2layers:
            raise ValueError(f"no default layer for {model_type!r} in bert-score: pass num_layers")
        num_layers = model2layers[model_type]
    if rescale_with_baseline and baseline_path(lang, model_type) is None:
        raise ValueError(f"bert-score ships no rescaling baseline for ({lang!r}, {model_type!r})")
    device = resolve_device(device)
    key = (model_type, num_layers, lang, rescale_with_baseline, device, batch_size)
    if key not in _SCORERS:
        _patch_bert_score()
        scorer = BERTScorer(
            model_type=model_type,
            num_layers=num_layers,
            lang=lang,
            rescale_with_baseline=rescale_with_baseline,
            device=device,
            batch_size=batch_size,
        )
        # A local tokenizer without ``model_max_length`` reports ~1e30, which the fast
        # tokenizer cannot take as truncation length: cap it at the position limit.
        tok = scorer._tokenizer
        n_pos = getattr(scorer._model.config, "max_position_embeddings", None)
        if n_pos and tok.model_max_length > n_pos:
            tok.model_max_length = n_pos
        _SCORERS[key] = scorer
    return _SCORERS[key]


def bertscore(
    hyps: Sequence[str],
    refs: Sequence[str],
    model_type: str | None = None,
    num_layers: int | None = None,
    lang: str | None = None,
    rescale: bool = True,
    device: str | None = None,
    batch_size: int = 64,
) -> dict[str, Any]:
    """BERTScore P/R/F1 (no IDF) of parallel hypothesis/reference lists.

    ``model_type=None`` uses the packaged MiniLM (layer 6). ``rescale`` applies only where
    bert-score ships a baseline for ``(lang, model_type)``; the result's ``rescaled`` says
    whether it did, so a table can never mix the two silently.
    """
    hyps, refs = check_pairs(hyps, refs)  # strings only, parallel, not empty
    if model_type is None:
        model_type = minilm_path()
        num_layers = MINILM_LAYERS if num_layers is None else num_layers
    do_rescale = bool(rescale and baseline_path(lang, model_type) is not None)
    scorer = get_bertscorer(model_type, num_layers, lang, do_rescale, device, batch_size)
    # bert-score's "Empty candidate sentence detected" is the documented score of an empty
    # text (0), not worth a line on every page; anything else it prints is passed on
    with contextlib.redirect_stderr(io.StringIO()) as err:
        p, r, f = scorer.score(list(hyps), list(refs), batch_size=batch_size)
    sys.stderr.write("".join(line for line in err.getvalue().splitlines(keepends=True)
                             if "Empty candidate sentence" not in line))
    return {
        "precision": float(p.mean()),
        "recall": float(r.mean()),
        "f1": float(f.mean()),
        "f1_per_pair": [float(x) for x in f],
        "rescaled": do_rescale,
        "model": model_type,
        "num_layers": scorer.num_layers,
    }


# ----------------------------------------------------------------------------- MoverScore v2

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

        numerics.pin()
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


def get_idf_dict(
    texts: Sequence[str], model: str | os.PathLike[str] | tuple[Any, Any], device: str = "cpu"
) -> defaultdict[int, float]:
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


def moverscore(
    refs: Sequence[str],
    hyps: Sequence[str],
    model: str | os.PathLike[str] | tuple[Any, Any],
    device: str = "cpu",
    batch_size: int = 64,
    n_gram: int = 1,
    stop_words: Sequence[str] | frozenset[str] = (),
    idf_dict_ref: Mapping[int, float] | None = None,
    idf_dict_hyp: Mapping[int, float] | None = None,
    show_progress: bool | None = None,
    degenerate_score: float = 1.0,
) -> list[float]:
    """MoverScore v2 (Zhao et al., 2019), same numbers as ``moverscore_v2.word_mover_score``.

    As the original: the last hidden layer; ``[CLS] + tokenize(text)[:510] + [SEP]``; IDF
    weights over ``refs`` and over ``hyps`` separately unless ``idf_dict_ref`` /
    ``idf_dict_hyp`` are given; ``##`` pieces, single punctuation and ``stop_words`` weigh 0;
    score = 1 - EMD of L2-normalised embeddings under Euclidean cost. Where one side weighs 0
    (an empty text; a single pair, where every IDF is 0) the score is ``degenerate_score``
    (1.0 as in the original; generated text usually wants 0).

    Faster with the same numbers: each distinct text embedded once; zero-weight tokens
    dropped before the EMD (they carry no flow); POT's ``emd2`` in float64 for pyemd.
    """
    refs, hyps = check_texts(refs, "refs"), check_texts(hyps, "hyps")
    if len(refs) != len(hyps):
        raise ValueError(f"got {len(refs)} references and {len(hyps)} hypotheses")
    if n_gram != 1:
        raise ValueError("moverscore_v2 only implements n_gram=1")
    if not refs:
        return []
    if len(refs) == 1 and (idf_dict_ref is None or idf_dict_hyp is None):
        warnings.warn(
            "MoverScore of a single pair: every corpus IDF weight is 0, the score is 1.0",
            stacklevel=2,
        )
    enc, tok = load_encoder(model, device)
    ids, keep = _pieces(tok, _max_tokens(enc, tok), [*refs, *hyps], frozenset(stop_words))
    emb = _embed(enc, tok, ids, keep, device, batch_size, show_progress)
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
           device: str, batch_size: int, show_progress: bool | None) -> dict[str, np.ndarray]:
    """L2-normalised last-layer embeddings of each text's weighted pieces; each distinct text
    embedded once, longest first so that padding stays small."""
    import torch
    from tqdm.auto import tqdm

    order = sorted(ids, key=lambda t: -len(ids[t]))
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else 0
    emb: dict[str, np.ndarray] = {}
    if show_progress is None:
        show_progress = len(order) > 4 * batch_size
    with torch.inference_mode():
        for start in tqdm(
            range(0, len(order), batch_size), disable=not show_progress, desc="moverscore"
        ):
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


# ------------ The collection's conventions (both tasks call these, never their own variants)


def resolve_device(device: str | None = "auto") -> str:
    """``"auto"``/None: CUDA when available, else CPU; anything else is returned as is."""
    if device in (None, "auto"):
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def _bertscore_pairs(refs: Sequence[str], hyps: Sequence[str], rescale: bool,
                     model_type: str | None, num_layers: int | None, lang: str | None,
                     device: str | None, batch_size: int) -> list[float]:
    dev = resolve_device(device)
    with numerics.training_threads():  # the same last bits on any thread count
        return per_distinct_pair(
            lambda h, r: bertscore(h, r, model_type=model_type, num_layers=num_layers,
                                   lang=lang, rescale=rescale, device=dev,
                                   batch_size=batch_size)["f1_per_pair"],
            hyps, refs)


@register_metric("bertscore_f1", inputs="texts", library="bert-score",
                 description="BERTScore F1",
                 definition="Mean per-output BERTScore F1: greedy cosine matching of "
                 "contextual token embeddings, no IDF, not rescaled (see "
                 "bertscore_f1_rescaled).",
                 reference="Zhang et al. (2020), BERTScore: Evaluating Text Generation with "
                 "BERT, ICLR")
def bertscore_items(refs: Sequence[str], hyps: Sequence[str], model_type: str | None = None,
                    num_layers: int | None = None, lang: str | None = None,
                    device: str | None = "auto", batch_size: int = 64) -> list[float]:
    """Per-pair BERTScore F1 (references first; an empty output scored as ``""``), each
    distinct pair scored once. Never rescaled: a rescaled score leaves 0-1, so it is its own
    metric, :func:`bertscore_rescaled_items`.
    """
    return _bertscore_pairs(refs, hyps, False, model_type, num_layers, lang, device,
                            batch_size)


@register_metric("bertscore_f1_rescaled", inputs="texts", library="bert-score", scale="any",
                 description="BERTScore F1, rescaled with bert-score's baseline",
                 definition="Mean per-output BERTScore F1 rescaled as (F - b) / (1 - b) with "
                 "bert-score's baseline b for the language and model (the mean F1 of random "
                 "sentence pairs): at most 1, and below 0 for pairs less similar than "
                 "random ones; as papers that rescale report it.",
                 reference="Zhang et al. (2020), BERTScore, ICLR; bert-score's "
                 "rescale_baseline")
def bertscore_rescaled_items(refs: Sequence[str], hyps: Sequence[str],
                             model_type: str | None = None, num_layers: int | None = None,
                             lang: str | None = None, device: str | None = "auto",
                             batch_size: int = 64) -> list[float]:
    """Per-pair rescaled BERTScore F1; a ``ValueError`` where bert-score ships no baseline
    for ``(lang, model_type)`` (never unrescaled scores under this name)."""
    if baseline_path(lang, model_type or minilm_path()) is None:
        raise ValueError(f"bert-score ships no rescaling baseline for language {lang!r} and "
                         f"model {model_type!r}")
    return _bertscore_pairs(refs, hyps, True, model_type, num_layers, lang, device,
                            batch_size)


@register_metric("moverscore", inputs="texts", library="own port of moverscore_v2",
                 description="MoverScore",
                 definition="Mean per-output MoverScore v2: earth mover's distance between "
                 "IDF-weighted contextual embeddings (one IDF table from the references).",
                 reference="Zhao et al. (2019), MoverScore, EMNLP")
def moverscore_items(refs: Sequence[str], hyps: Sequence[str],
                     model: str | os.PathLike[str] | tuple[Any, Any] | None = None,
                     device: str | None = "auto", batch_size: int = 64,
                     idf_texts: Sequence[str] | None = None) -> list[float]:
    """Per-pair MoverScore v2 with the collection's conventions (references first).

    One IDF table from the *references* weights both sides: moverscore_v2's per-side IDF
    gives a constant output weight 0 on every token (a perfect 1.0). A hypothesis without
    any weighted token scores 0. ``idf_texts``: the IDF's corpus (default ``refs``), so that
    several systems' outputs can be scored in one call with the weights each gets alone.
    """
    hyps, refs = check_pairs(hyps, refs)
    corpus = refs if idf_texts is None else check_texts(idf_texts, "idf_texts")
    model = model or minilm_path()
    dev = resolve_device(device)
    idf = get_idf_dict(corpus, model, device=dev)
    with numerics.training_threads():  # the same last bits on any thread count
        return per_distinct_pair(
            lambda h, r: moverscore(r, h, model=model, device=dev, batch_size=batch_size,
                                    idf_dict_ref=idf, idf_dict_hyp=idf, degenerate_score=0.0),
            hyps, refs)
