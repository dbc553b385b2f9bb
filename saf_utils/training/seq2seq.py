"""One seq2seq trainer for both tracks on transformers' ``Seq2SeqTrainer``: CPU (deterministic
for a seed), one GPU or DDP under a launcher (:func:`generate` with ``distributed=True`` shards
the inputs and gathers the outputs in order). ``Seq2SeqSettings.model``: a hub id or folder of
a pretrained seq2seq model (mBART, mT5, LED, ...); ``"scratch"``, a small T5 with a Unigram
tokenizer trained on the training texts; or ``"bert2bert:<encoder>"``, an
``EncoderDecoderModel`` warm-started from a BERT-style encoder."""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from saf_utils.encoders.sentence import resolve_model

SCRATCH = "scratch"
BERT2BERT = "bert2bert:"


@dataclass
class Seq2SeqSettings:
    """Training and generation settings (the notebooks' parameters map onto these)."""

    model: str = SCRATCH
    max_source_length: int = 256
    max_target_length: int = 64
    epochs: float = 3.0
    max_steps: int = -1  # > 0 overrides epochs
    learning_rate: float = 5e-4
    batch_size: int = 8
    grad_accum: int = 1
    weight_decay: float = 0.01
    warmup_ratio: float = 0.0
    label_smoothing: float = 0.0
    seed: int = 42
    num_beams: int = 1
    no_repeat_ngram_size: int = 0  # generation: forbid repeated n-grams (0: off)
    src_lang: str | None = None  # multilingual tokenizers (mBART: "de_DE")
    tgt_lang: str | None = None  # also the decoder start token of mBART-style models
    eval_batch_size: int = 32
    fp16: bool = False  # GPU only
    bf16: bool = False  # GPU only
    # size of the "scratch" T5 and its tokenizer
    scratch_vocab_size: int = 4000
    scratch_d_model: int = 128
    scratch_layers: int = 2
    scratch_heads: int = 4
    scratch_ff: int = 512
    logging_steps: int = 50


def _check_pairs(sources: Sequence[str], targets: Sequence[str] | None, what: str) -> None:
    if targets is not None and len(sources) != len(targets):
        raise ValueError(f"{what}: {len(sources)} sources but {len(targets)} targets")
    bad = [i for i, s in enumerate(sources) if not isinstance(s, str) or not s.strip()]
    if bad:
        raise ValueError(f"{what}: empty or non-string source at row(s) {bad[:10]}")


def train_scratch_tokenizer(texts: Sequence[str], vocab_size: int):
    """A T5-style Unigram tokenizer (Metaspace, ``</s>`` appended) trained on ``texts`` (the
    training split only: no test text leaks into the vocabulary)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from tokenizers.processors import TemplateProcessing
    from transformers import PreTrainedTokenizerFast

    specials = ["<pad>", "</s>", "<unk>"]
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    trainer = trainers.UnigramTrainer(vocab_size=vocab_size, special_tokens=specials,
                                      unk_token="<unk>", show_progress=False)
    tok.train_from_iterator(list(texts), trainer=trainer)
    ordered = canonical_unigram_vocab(json.loads(tok.to_str())["model"]["vocab"], specials)
    tok.model = models.Unigram(ordered, unk_id=specials.index("<unk>"))
    eos = tok.token_to_id("</s>")
    tok.post_processor = TemplateProcessing(single="$A </s>", pair="$A </s> $B </s>",
                                            special_tokens=[("</s>", eos)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>",
                                   unk_token="<unk>")


#: Score step between the characters the Unigram trainer appends (tokenizers' ``finalize``).
_APPENDED_STEP = 1e-4


def canonical_unigram_vocab(raw: Sequence[Sequence[Any]], specials: Sequence[str]
                            ) -> list[tuple[str, float]]:
    """The trained Unigram vocabulary ``raw`` (piece, score) the same on every run: specials
    first, then pieces by score rounded to 2 decimals, ties by text; the single characters the
    trainer appends in hash order (scores ``min - k * 1e-4``) all get the lowest one
    (docs/reproducibility.md)."""
    raw = [(str(p), float(sc)) for p, sc in raw]
    singles = [sc for p, sc in raw if len(p) == 1 and p not in specials]
    low = min(singles, default=math.inf)
    span = low + _APPENDED_STEP * len(singles) + 1e-9
    multi = min((sc for p, sc in raw if len(p) > 1 and p not in specials), default=math.inf)

    def score(p: str, sc: float) -> float:
        tail = len(p) == 1 and p not in specials and (sc <= span or sc <= multi)
        return round(low if tail else sc, 2)

    vocab = [(p, score(p, sc)) for p, sc in raw]
    rest = sorted((v for v in vocab if v[0] not in specials), key=lambda v: (-v[1], v[0]))
    return [v for s in specials for v in vocab if v[0] == s] + rest


def build_seq2seq(settings: Seq2SeqSettings, train_texts: Sequence[str] = ()):
    """Model and tokenizer for ``settings.model`` (see the module docstring)."""
    from transformers import (
        AutoModelForSeq2SeqLM,
        AutoTokenizer,
        EncoderDecoderModel,
        T5Config,
        T5ForConditionalGeneration,
    )

    name = settings.model
    if name == SCRATCH:
        if not train_texts:
            raise ValueError("the scratch model needs training texts for its tokenizer")
        tokenizer = train_scratch_tokenizer(train_texts, settings.scratch_vocab_size)
        config = T5Config(
            vocab_size=len(tokenizer), d_model=settings.scratch_d_model,
            d_kv=settings.scratch_d_model // settings.scratch_heads, d_ff=settings.scratch_ff,
            num_layers=settings.scratch_layers, num_decoder_layers=settings.scratch_layers,
            num_heads=settings.scratch_heads, dropout_rate=0.1,
            pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
            decoder_start_token_id=tokenizer.pad_token_id,
        )
        return T5ForConditionalGeneration(config), tokenizer
    if name.startswith(BERT2BERT):
        encoder = resolve_model(name[len(BERT2BERT):])
        tokenizer = AutoTokenizer.from_pretrained(encoder)
        model = EncoderDecoderModel.from_encoder_decoder_pretrained(encoder, encoder)
        for config in (model.config, model.generation_config):
            config.decoder_start_token_id = tokenizer.cls_token_id
            config.eos_token_id = tokenizer.sep_token_id
            config.pad_token_id = tokenizer.pad_token_id
        return model, tokenizer
    langs = {k: v for k, v in (("src_lang", settings.src_lang),
                               ("tgt_lang", settings.tgt_lang)) if v}
    tokenizer = AutoTokenizer.from_pretrained(name, **langs)
    model = AutoModelForSeq2SeqLM.from_pretrained(name)
    if settings.tgt_lang:  # mBART decodes from the target language code
        lang_id = tokenizer.convert_tokens_to_ids(settings.tgt_lang)
        model.config.decoder_start_token_id = lang_id
        model.generation_config.decoder_start_token_id = lang_id
    return model, tokenizer


def is_led(model: Any) -> bool:
    """Whether ``model`` is LED, by its config (its tokenizer loads as a RoBERTa one)."""
    return getattr(getattr(model, "config", None), "model_type", "") == "led"


def _dataset(tokenizer, sources, targets, settings: Seq2SeqSettings, led: bool = False):
    import datasets

    enc = tokenizer(list(sources), max_length=settings.max_source_length, truncation=True)
    rows = {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]}
    if led:  # global attention on the first token only, as HF's LED fine-tuning recipe
        rows["global_attention_mask"] = [[1] + [0] * (len(ids) - 1) for ids in enc["input_ids"]]
    rows["labels"] = tokenizer(text_target=list(targets), max_length=settings.max_target_length,
                               truncation=True)["input_ids"]
    return datasets.Dataset.from_dict(rows)


def seq2seq_collator(tokenizer: Any, model: Any) -> Any:
    """``DataCollatorForSeq2Seq`` that also pads LED's ``global_attention_mask`` (with 0,
    on the tokenizer's padding side), which the stock collator leaves ragged and fails on."""
    import torch
    from transformers import DataCollatorForSeq2Seq

    class _Collator(DataCollatorForSeq2Seq):
        def __call__(self, features: list[dict[str, Any]], return_tensors: Any = None) -> Any:
            key = "global_attention_mask"
            masks = [f.pop(key) for f in features] if features and key in features[0] else None
            batch = super().__call__(features, return_tensors)
            if masks is not None:
                n = batch["input_ids"].shape[1]
                left = getattr(self.tokenizer, "padding_side", "right") == "left"
                batch[key] = torch.tensor([[0] * (n - len(m)) + list(m) if left else
                                           list(m) + [0] * (n - len(m)) for m in masks])
            return batch

    return _Collator(tokenizer, model=model)


def precision(settings: Any) -> str:
    """The precision a fine-tune runs in: ``fp16``/``bf16`` where asked for and CUDA is there,
    else ``fp32`` (with a warning where asked for without CUDA)."""
    import warnings

    import torch

    asked = "fp16" if settings.fp16 else "bf16" if settings.bf16 else "fp32"
    if asked != "fp32" and not torch.cuda.is_available():
        warnings.warn(f"{asked} asked for, but there is no CUDA device: training in fp32 "
                      "(the train log's 'precision' says so)", stacklevel=2)
        return "fp32"
    return asked


def training_arguments(settings: Any, output_dir: str, **extra: Any) -> Any:
    """Trainer arguments of a seq2seq or cross-encoder fine-tune (plus ``extra``): deterministic
    on CPU, mixed precision only on a GPU, nothing saved or evaluated, plain DDP."""
    import torch
    from transformers import Seq2SeqTrainingArguments, TrainingArguments

    cuda = torch.cuda.is_available()
    mixed = precision(settings)
    seq2seq = isinstance(settings, Seq2SeqSettings)
    if seq2seq:
        extra = {"gradient_accumulation_steps": settings.grad_accum,
                 # a float in [0, 1) is a ratio (transformers v5)
                 "warmup_steps": settings.warmup_ratio,
                 "label_smoothing_factor": settings.label_smoothing,
                 "max_steps": settings.max_steps, **extra}
    return (Seq2SeqTrainingArguments if seq2seq else TrainingArguments)(
        output_dir=output_dir, per_device_train_batch_size=settings.batch_size,
        per_device_eval_batch_size=settings.eval_batch_size,
        learning_rate=settings.learning_rate, weight_decay=settings.weight_decay,
        num_train_epochs=settings.epochs, seed=settings.seed, data_seed=settings.seed,
        full_determinism=not cuda, fp16=mixed == "fp16", bf16=mixed == "bf16",
        use_cpu=not cuda, save_strategy="no", eval_strategy="no", report_to=[],
        logging_steps=settings.logging_steps, dataloader_num_workers=0,
        disable_tqdm=os.environ.get("TQDM_DISABLE", "").lower() in ("1", "true"),
        average_tokens_across_devices=False, **extra)


def train_seq2seq(sources: Sequence[str], targets: Sequence[str], settings: Seq2SeqSettings,
                  output_dir: str | None = None) -> tuple[Any, Any, dict[str, Any]]:
    """Fine-tune (or train from scratch) on source/target pairs: model, tokenizer and a log;
    nothing is saved unless ``output_dir`` is given."""
    from transformers import Seq2SeqTrainer, set_seed

    _check_pairs(sources, targets, "training data")
    set_seed(settings.seed)
    model, tokenizer = build_seq2seq(settings, list(sources) + list(targets))
    led = is_led(model)
    train_ds = _dataset(tokenizer, sources, targets, settings, led)
    with tempfile.TemporaryDirectory() as tmp:
        args = training_arguments(settings, output_dir or tmp)
        trainer = Seq2SeqTrainer(model=model, args=args, train_dataset=train_ds,
                                 data_collator=seq2seq_collator(tokenizer, model),
                                 processing_class=tokenizer)
        configure_trainer(trainer)
        t0 = time.perf_counter()
        out = trainer.train()
        log: dict[str, Any] = {
            "settings": asdict(settings),
            "n_parameters": sum(p.numel() for p in model.parameters()),
            "n_train": len(sources),
            "train_loss": float(out.training_loss),
            "train_steps": int(out.global_step),
            "train_seconds": round(time.perf_counter() - t0, 1),
            "world_size": int(args.world_size),
            "precision": "fp16" if args.fp16 else "bf16" if args.bf16 else "fp32",
            **({"global_attention": "first token"} if led else {}),
            "log_history": list(trainer.state.log_history),
        }
        if output_dir:
            trainer.save_model(output_dir)
    model.eval()
    return model, tokenizer, log


def dist_rank_world() -> tuple[int, int]:
    """(rank, world size) of the initialised ``torch.distributed`` group, else (0, 1)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def shard_range(n: int, rank: int, world: int) -> range:
    """The contiguous block of ``range(n)`` that ``rank`` of ``world`` handles (so the gathered
    outputs, concatenated, are in input order)."""
    if world < 1 or not 0 <= rank < world:
        raise ValueError(f"rank {rank} outside a world of {world}")
    return range(n * rank // world, n * (rank + 1) // world)


def generate(
    model, tokenizer, sources: Sequence[str], settings: Seq2SeqSettings,
    batch_size: int | None = None, desc: str = "generate", distributed: bool = False,
) -> list[str]:
    """One output per source (beam search per ``settings.num_beams``), in order.
    ``distributed=True`` in a process group: every rank passes the same ``sources``, generates
    one shard and gets the full list back (``all_gather_object``)."""
    _check_pairs(sources, None, "generation input")
    rank, world = dist_rank_world() if distributed else (0, 1)
    if world == 1:
        return _generate_local(model, tokenizer, sources, settings, batch_size, desc)
    import torch.distributed as dist

    part = shard_range(len(sources), rank, world)
    local = _generate_local(model, tokenizer, [sources[i] for i in part], settings,
                            batch_size, f"{desc} [rank {rank}]")
    gathered: list[list[str] | None] = [None] * world
    dist.all_gather_object(gathered, local)
    outputs = [text for chunk in gathered for text in chunk or []]
    if len(outputs) != len(sources):  # never hand back a list misaligned with the inputs
        raise RuntimeError(f"gathered {len(outputs)} outputs for {len(sources)} sources")
    return outputs


def _generate_local(model, tokenizer, sources: Sequence[str], settings: Seq2SeqSettings,
                    batch_size: int | None, desc: str) -> list[str]:
    import torch

    bs = batch_size or settings.eval_batch_size
    device = next(model.parameters()).device
    order = np.argsort([len(s) for s in sources])  # similar lengths per batch: less padding
    outputs: list[str] = [""] * len(sources)
    batches = range(0, len(sources), bs)
    for start in tqdm(batches, desc=desc, total=math.ceil(len(sources) / bs), leave=False):
        idx = order[start:start + bs]
        enc = tokenizer([sources[i] for i in idx], max_length=settings.max_source_length,
                        truncation=True, padding=True, return_tensors="pt").to(device)
        enc.pop("token_type_ids", None)
        if is_led(model):
            enc["global_attention_mask"] = torch.zeros_like(enc["input_ids"])
            enc["global_attention_mask"][:, 0] = 1
        with torch.no_grad():
            ids = model.generate(**enc, num_beams=settings.num_beams,
                                 max_new_tokens=settings.max_target_length,
                                 no_repeat_ngram_size=settings.no_repeat_ngram_size)
        texts = tokenizer.batch_decode(ids, skip_special_tokens=True)
        for i, text in zip(idx, texts, strict=True):
            outputs[i] = text.strip()
    return outputs


def configure_trainer(trainer: Any) -> Any:
    """The two settings every Trainer here needs: loss-kwargs-free (each model returns its
    batch's mean loss yet declares ``**kwargs``, which the Trainer takes for a token sum: no
    division by the accumulation steps, times the world size; docs/distributed-training.md)
    and no printer (it prints each log as a raw dict into the notebook)."""
    from transformers.trainer_callback import PrinterCallback

    trainer.model_accepts_loss_kwargs = False
    trainer.remove_callback(PrinterCallback)
    return trainer
