"""A pretrained encoder fine-tuned as a cross-encoder (text pair -> label or score) with
transformers' ``Trainer`` (CPU, one GPU or DDP); the job kind ``"cross_encoder"`` of
:mod:`saf_utils.training.jobs`. Why each choice (docs/encoders.md): a **constant** learning
rate, so the model after epoch ``e`` is that of an ``e``-epoch run (``predict_every_epoch``
scores every epoch count in one run); ``freeze_layers`` / ``train_layers``, as 2 CPU cores
afford only the top layers' backward pass, and with ``cache_frozen`` the frozen part runs
once per pair (:mod:`saf_utils.training.cross_encoder_modules`, the same logits);
``pooling: pair``, where the head reads only |u - v| and u * v of the answer's and the
reference's token means, so no feature says which question a pair is about.
"""

from __future__ import annotations

import resource
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from saf_utils.encoders.sentence import resolve_model
from saf_utils.training.cross_encoder_modules import (
    first_segment,
    freeze_lower,
    full_model,
    state_collator,
    top_layers,
)
from saf_utils.training.seq2seq import configure_trainer, training_arguments

MODES = ("label", "score")
POOLINGS = ("cls", "mean", "pair")
CLASS_WEIGHTS = (None, "balanced")


@dataclass
class CrossEncoderSettings:
    """Training settings of one cross-encoder fine-tune (the notebooks' parameters)."""

    model: str = "local:all-MiniLM-L6-v2"
    mode: str = "label"  # label: classification over ``labels``; score: regression
    labels: list[str] | None = None  # label order of the head; None: sorted training labels
    max_length: int = 128
    epochs: int = 2
    learning_rate: float = 5e-5
    batch_size: int = 16
    eval_batch_size: int = 64
    weight_decay: float = 0.01
    freeze_layers: int = 0  # freeze the embeddings and this many lowest encoder layers
    # train only this many top layers (freeze the rest; overrides freeze_layers), so one
    # setting fits models of any depth (MiniLM-L6, e5-small's 12 layers)
    train_layers: int | None = None
    cache_frozen: bool = True  # run the frozen layers once per pair (BERT-style models)
    # the head's input: "cls" (BERT's pooler), "mean" (the mean of the last layer's token
    # states, as e5 and MiniLM were trained: no trained pooler) or "pair" (module docstring)
    pooling: str = "cls"
    class_weight: str | None = None  # label mode: None or "balanced" (class_weights)
    seed: int = 42
    predict_every_epoch: bool = False  # predict the eval splits after every epoch
    fp16: bool = False  # GPU only
    bf16: bool = False  # GPU only
    logging_steps: int = 50

    def __post_init__(self) -> None:
        for name, allowed in (("mode", MODES), ("pooling", POOLINGS),
                              ("class_weight", CLASS_WEIGHTS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} {getattr(self, name)!r}: use one of {allowed}")
        if self.epochs < 1:
            raise ValueError("epochs must be a positive integer")
        if self.train_layers is not None and self.train_layers < 0:
            raise ValueError("train_layers must be a non-negative integer (or None)")

    def for_depth(self, n_layers: int) -> CrossEncoderSettings:
        """These settings with ``train_layers`` as the matching ``freeze_layers``."""
        if self.train_layers is None:
            return self
        if self.train_layers > n_layers:
            raise ValueError(f"train_layers {self.train_layers}: the model has {n_layers} layers")
        return replace(self, freeze_layers=n_layers - self.train_layers)


_TOKENS: dict[tuple[str, int], dict[tuple[str, str], dict[str, list[int]]]] = {}


def tokenize_pairs(tokenizer: Any, key: str, first: Sequence[str], second: Sequence[str],
                   max_length: int) -> dict[str, list[list[int]]]:
    """Tokenizer outputs of text pairs, cached per (``key``, max length, pair) in the process."""
    cache = _TOKENS.setdefault((key, max_length), {})
    pairs = list(zip(first, second, strict=True))
    missing = list(dict.fromkeys(p for p in pairs if p not in cache))
    if missing:
        enc = tokenizer([a for a, _ in missing], [b for _, b in missing],
                        max_length=max_length, truncation="longest_first")
        names = list(enc.keys())
        for i, pair in enumerate(missing):
            cache[pair] = {k: enc[k][i] for k in names}
    names = list(cache[pairs[0]]) if pairs else []
    return {k: [cache[p][k] for p in pairs] for k in names}


def _dataset(tokenizer: Any, key: str, first: Sequence[str], second: Sequence[str],
             max_length: int, targets: Sequence[float | int] | None = None):
    import datasets

    rows: dict[str, list[Any]] = dict(tokenize_pairs(tokenizer, key, first, second,
                                                     max_length))
    if targets is not None:
        rows["labels"] = list(targets)
    return datasets.Dataset.from_dict(rows)


_HIDDEN: dict[tuple[str, int, int], dict[tuple[str, str], np.ndarray]] = {}


def frozen_states(model: Any, tokenizer: Any, key: str, first: Sequence[str],
                  second: Sequence[str], settings: CrossEncoderSettings) -> list[np.ndarray]:
    """Hidden states after the ``freeze_layers`` lowest layers, one ``(tokens, hidden)``
    array per pair, cached per (model, max length, layer, pair) in the process."""
    import torch

    cache = _HIDDEN.setdefault((key, settings.max_length, settings.freeze_layers), {})
    pairs = list(zip(first, second, strict=True))
    missing = list(dict.fromkeys(p for p in pairs if p not in cache))
    if missing:
        enc = tokenize_pairs(tokenizer, key, [a for a, _ in missing], [b for _, b in missing],
                             settings.max_length)
        order = np.argsort([len(x) for x in enc["input_ids"]], kind="stable")
        base = model.base_model
        was_training = base.training
        base.eval()
        device = next(base.parameters()).device
        for start in range(0, len(order), settings.eval_batch_size):
            idx = order[start:start + settings.eval_batch_size]
            batch = tokenizer.pad({k: [enc[k][i] for i in idx] for k in enc},
                                  return_tensors="pt").to(device)
            with torch.no_grad():
                hidden = base(**batch, output_hidden_states=True).hidden_states[
                    settings.freeze_layers]
            for row, i in enumerate(idx):
                n = len(enc["input_ids"][i])
                cache[missing[i]] = hidden[row, :n].float().cpu().numpy()
        base.train(was_training)
    return [cache[p] for p in pairs]


def class_weights(settings: CrossEncoderSettings, labels: Sequence[str],
                  y: Sequence[float | int]) -> list[float] | None:
    """The loss's weight per head label with ``class_weight: balanced`` (else None):
    ``n / (k * count)`` over the ``k`` labels present in the ``n`` training targets, so every
    label carries the same total weight; labels absent from training weigh 1."""
    if settings.mode == "score" or settings.class_weight is None:
        return None
    counts = np.bincount(np.asarray(y, dtype=int), minlength=len(labels))
    present = counts > 0
    w = np.where(present, len(y) / (present.sum() * np.maximum(counts, 1)), 1.0)
    return [float(v) for v in w]


def build_cross_encoder(settings: CrossEncoderSettings, labels: Sequence[str]):
    """Tokenizer and sequence-classification model (a new head) for ``settings.model``."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    from transformers.utils import logging as hf_logging

    path = resolve_model(settings.model)
    tokenizer = AutoTokenizer.from_pretrained(path)
    head = ({"num_labels": 1, "problem_type": "regression"} if settings.mode == "score" else
            {"num_labels": len(labels), "problem_type": "single_label_classification",
             "id2label": dict(enumerate(labels)),
             "label2id": {lab: i for i, lab in enumerate(labels)}})
    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # the new head is always "missing": no report per job
    try:
        model = AutoModelForSequenceClassification.from_pretrained(path, **head)
    finally:
        hf_logging.set_verbosity(level)
    if settings.pooling == "pair":  # the head reads |u - v| and u * v: twice the width
        from torch import nn

        old = getattr(model, "classifier", None)
        if not isinstance(old, nn.Linear) or tokenizer.sep_token_id is None:
            raise ValueError(f"pooling: pair needs a BERT-style classifier (one linear head) "
                             f"and a separator token, not {type(model).__name__}")
        model.classifier = nn.Linear(2 * old.in_features, old.out_features)
        model._init_weights(model.classifier)
    return model, tokenizer


def _decode(settings: CrossEncoderSettings, labels: Sequence[str], logits: np.ndarray
            ) -> tuple[list[str], list[dict[str, float] | None]]:
    """Outputs (label, or score as text) and class probabilities (label mode) per row."""
    logits = np.asarray(logits, dtype=float)
    if settings.mode == "score":
        return [f"{float(v):.6f}" for v in logits.reshape(-1)], [None] * len(logits)
    z = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs = z / z.sum(axis=1, keepdims=True)
    return ([labels[int(i)] for i in probs.argmax(axis=1)],
            [dict(zip(labels, map(float, p), strict=True)) for p in probs])


def _label_targets(settings: CrossEncoderSettings, targets: Sequence[str]
                   ) -> tuple[list[str], list[float | int]]:
    """The head's labels and the training targets as the head reads them."""
    labels = list(settings.labels or sorted(set(targets)))
    if settings.mode == "score":
        return labels, [float(t) for t in targets]
    unknown = sorted(set(targets) - set(labels))
    if unknown:
        raise ValueError(f"training labels {unknown} not in the head's labels {labels}")
    return labels, [labels.index(t) for t in targets]


def _datasets(model: Any, tokenizer: Any, settings: CrossEncoderSettings,
              first: Sequence[str], second: Sequence[str], y: Sequence[float | int],
              evals: dict[str, tuple[Sequence[str], Sequence[str]]],
              labels: Sequence[str] = ()) -> tuple[Any, Any, dict[str, Any], Any, bool]:
    """The model the Trainer fits (the cached top, ``full_model`` or the plain classifier),
    its train and eval datasets, the collator and whether the frozen part is cached."""
    import datasets

    key = resolve_model(settings.model)
    weight = class_weights(settings, labels, y)
    if not (settings.cache_frozen and settings.freeze_layers > 0):
        if settings.pooling in ("mean", "pair") or weight is not None:
            model = full_model(model, settings.pooling, weight, tokenizer.sep_token_id)
        return (model, _dataset(tokenizer, key, first, second, settings.max_length, y),
                {s: _dataset(tokenizer, key, a, b, settings.max_length)
                 for s, (a, b) in evals.items()}, None, False)
    all_first = [*first, *(t for a, _ in evals.values() for t in a)]
    all_second = [*second, *(t for _, b in evals.values() for t in b)]
    states = frozen_states(model, tokenizer, key, all_first, all_second, settings)
    train_ds = datasets.Dataset.from_dict({"idx": list(range(len(first))), "labels": list(y)})
    eval_ds, pos = {}, len(first)
    for s, (a, _) in evals.items():
        eval_ds[s] = datasets.Dataset.from_dict({"idx": list(range(pos, pos + len(a)))})
        pos += len(a)
    firsts = None
    if settings.pooling == "pair":
        ids = tokenize_pairs(tokenizer, key, all_first, all_second,
                             settings.max_length)["input_ids"]
        firsts = [int(first_segment(np.asarray(x), tokenizer.sep_token_id).sum())
                  for x in ids]
    return (top_layers(model, settings.freeze_layers, settings.pooling, weight), train_ds,
            eval_ds, state_collator(states, firsts), True)


def train_and_predict(first: Sequence[str], second: Sequence[str], targets: Sequence[str],
                      evals: dict[str, tuple[Sequence[str], Sequence[str]]],
                      settings: CrossEncoderSettings, output_dir: str | None = None
                      ) -> tuple[dict[int, dict[str, tuple[list[str], list[Any]]]],
                                 dict[str, Any]]:
    """Fine-tune on the training pairs (targets: labels, or scores as text) and predict every
    eval split: ``{epoch: {split: (outputs, probabilities)}}`` (every epoch with
    ``predict_every_epoch``, else the last) and a log with time, memory and losses."""
    import torch
    from transformers import Trainer, TrainerCallback, set_seed

    if len(first) != len(targets) or not len(first):
        raise ValueError(f"{len(first)} training pairs for {len(targets)} targets")
    set_seed(settings.seed)
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    labels, y = _label_targets(settings, targets)
    model, tokenizer = build_cross_encoder(settings, labels)
    settings = settings.for_depth(model.config.num_hidden_layers)
    trainable = freeze_lower(model, settings.freeze_layers)
    n_parameters = sum(p.numel() for p in model.parameters())
    model, train_ds, eval_ds, collator, cached = _datasets(model, tokenizer, settings, first,
                                                           second, y, evals, labels)
    results: dict[int, dict[str, tuple[list[str], list[Any]]]] = {}

    class _EveryEpoch(TrainerCallback):
        trainer: Any = None

        def on_epoch_end(self, args, state, control, **kwargs):  # noqa: ANN001
            epoch = round(state.epoch or 0)
            if settings.predict_every_epoch and epoch < settings.epochs:
                results[epoch] = predict_all(self.trainer)

    def predict_all(trainer: Any) -> dict[str, tuple[list[str], list[Any]]]:
        return {s: _decode(settings, labels, trainer.predict(ds).predictions)
                for s, ds in eval_ds.items()}

    with tempfile.TemporaryDirectory() as tmp:
        args = training_arguments(settings, output_dir or tmp, lr_scheduler_type="constant",
                                  remove_unused_columns=not cached)
        callback = _EveryEpoch()
        trainer = Trainer(model=model, args=args, train_dataset=train_ds,
                          data_collator=collator,
                          processing_class=None if cached else tokenizer,
                          callbacks=[callback])
        configure_trainer(trainer)
        callback.trainer = trainer
        t0 = time.perf_counter()
        out = trainer.train()
        train_seconds = time.perf_counter() - t0
        results[settings.epochs] = predict_all(trainer)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # lifetime peak, KiB
        log = {"settings": asdict(settings), "labels": labels,
               "class_weights": class_weights(settings, labels, y),
               "n_parameters": n_parameters, "n_trainable": trainable, "n_train": len(first),
               "cached_frozen": cached, "train_loss": float(out.training_loss),
               "train_steps": int(out.global_step), "train_seconds": round(train_seconds, 1),
               "seconds": round(time.perf_counter() - t0, 1), "world_size": int(args.world_size),
               "precision": "fp16" if args.fp16 else "bf16" if args.bf16 else "fp32",
               "peak_rss_mb": round(rss / 1024, 1),
               **({"peak_cuda_mb": round(torch.cuda.max_memory_allocated() / 2**20, 1)}
                  if torch.cuda.is_available() else {}),
               "log_history": list(trainer.state.log_history)}
        if output_dir:
            trainer.save_model(output_dir)
    return results, log
