"""BERTScore via ``bert-score``, models loaded once per process. The gpu profile sets the SAF
paper's German setting (bert-base-multilingual-cased, layer 9, ``lang: de``); offline
profiles use the packaged all-MiniLM-L6-v2, which has no rescaling baseline (unrescaled)."""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from saf_utils import determinism
from saf_utils.encoders.sentence import minilm_path, resolve_model
from saf_utils.metrics.base import register_metric
from saf_utils.metrics.checks import check_pairs, per_distinct_pair

#: all-MiniLM-L6-v2 has 6 transformer layers; BERTScore uses the last one.
MINILM_LAYERS = 6


_SCORERS: dict[tuple[Any, ...], Any] = {}


def _sorted_by_text(items: Any, key: Any = None, reverse: bool = False) -> list[Any]:
    """``sorted`` whose ties (equal ``key``) come in text order, not in the input's order."""
    return sorted(sorted(items), key=key, reverse=reverse)


def _patch_bert_score() -> None:
    """Make bert-score 0.3.13 work with transformers v5 and reproducible (idempotent): an
    empty sentence encoded with ``tokenizer.encode("", add_special_tokens=True)`` (v5 lacks
    ``build_inputs_with_special_tokens``), and its module's ``sorted`` breaking ties by text
    (equal-length sentences followed the string-hash seed, and with the padding the last
    bits of the scores changed per process)."""
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


def get_bertscorer(model_type: str, num_layers: int | None = None, lang: str | None = None,
                   rescale_with_baseline: bool = False, device: str | None = None,
                   batch_size: int = 64) -> Any:
    """A ``bert_score.BERTScorer`` built once per setting (model loads are slow); a local
    folder needs ``num_layers`` (bert-score's layer table is keyed by hub id)."""
    from bert_score import BERTScorer
    from bert_score.utils import model2layers

    determinism.pin()  # fixed kernels and threads before torch's first operation
    model_type = resolve_model(model_type)
    if num_layers is None:
        if os.path.isdir(model_type):
            raise ValueError(f"model_type={model_type!r} is a local folder: pass num_layers (the "
                             "layer whose embeddings BERTScore uses, e.g. 6 for all-MiniLM-L6-v2)")
        if model_type not in model2layers:
            raise ValueError(f"no default layer for {model_type!r} in bert-score: pass num_layers")
        num_layers = model2layers[model_type]
    if rescale_with_baseline and baseline_path(lang, model_type) is None:
        raise ValueError(f"bert-score ships no rescaling baseline for ({lang!r}, {model_type!r})")
    device = resolve_device(device)
    key = (model_type, num_layers, lang, rescale_with_baseline, device, batch_size)
    if key not in _SCORERS:
        _patch_bert_score()
        scorer = BERTScorer(model_type=model_type, num_layers=num_layers, lang=lang,
                            rescale_with_baseline=rescale_with_baseline, device=device,
                            batch_size=batch_size)
        # A local tokenizer without ``model_max_length`` reports ~1e30, which the fast
        # tokenizer cannot take as truncation length: cap it at the position limit.
        tok = scorer._tokenizer
        n_pos = getattr(scorer._model.config, "max_position_embeddings", None)
        if n_pos and tok.model_max_length > n_pos:
            tok.model_max_length = n_pos
        _SCORERS[key] = scorer
    return _SCORERS[key]


def bertscore(hyps: Sequence[str], refs: Sequence[str], model_type: str | None = None,
              num_layers: int | None = None, lang: str | None = None, rescale: bool = True,
              device: str | None = None, batch_size: int = 64) -> dict[str, Any]:
    """BERTScore P/R/F1 (no IDF) of parallel lists; ``model_type=None``: the packaged MiniLM
    (layer 6). ``rescale`` applies only where bert-score ships a baseline for ``(lang,
    model_type)``, and ``rescaled`` says whether it did."""
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
    return {"precision": float(p.mean()), "recall": float(r.mean()), "f1": float(f.mean()),
            "f1_per_pair": [float(x) for x in f], "rescaled": do_rescale, "model": model_type,
            "num_layers": scorer.num_layers}


def resolve_device(device: str | None = "auto") -> str:
    """``"auto"``/None: CUDA when available, else CPU; anything else is returned as is."""
    if device in (None, "auto"):
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


#: How far a float32 cosine of identical vectors can read above 1 (a few units in the last
#: place of 1.0 in float32, whose spacing is 1.19e-7).
FLOAT32_SLACK = 1e-6


def _bertscore_pairs(refs: Sequence[str], hyps: Sequence[str], rescale: bool,
                     model_type: str | None, num_layers: int | None, lang: str | None,
                     device: str | None, batch_size: int) -> list[float]:
    dev = resolve_device(device)
    with determinism.training_threads():  # the same last bits on any thread count
        values = per_distinct_pair(
            lambda h, r: bertscore(h, r, model_type=model_type, num_layers=num_layers,
                                   lang=lang, rescale=rescale, device=dev,
                                   batch_size=batch_size)["f1_per_pair"],
            hyps, refs)
    # float32 cosines of identical tokens read 1 + 1.2e-7: the score of a perfect output is 1
    # (its declared range), a larger excess is left for the range check to find
    return values if rescale else [1.0 if 1.0 < v <= 1.0 + FLOAT32_SLACK else v
                                   for v in values]


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
    """Per-pair BERTScore F1, each distinct pair scored once; never rescaled (a rescaled score
    leaves 0-1: :func:`bertscore_rescaled_items`)."""
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
