"""Torch modules a cross-encoder trains (heads, loss, top layers), apart from its training loop."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def freeze_lower(model: Any, n_layers: int) -> int:
    """Freeze the embeddings and the ``n_layers`` lowest encoder layers; trainable count."""
    if n_layers > 0:
        base = model.base_model
        for p in base.embeddings.parameters():
            p.requires_grad = False
        for layer in base.encoder.layer[:n_layers]:
            for p in layer.parameters():
                p.requires_grad = False
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def _mean(hidden: Any, mask: Any) -> Any:
    m = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(1) / m.sum(1).clamp(min=1.0)


def first_segment(input_ids: Any, sep_token_id: int) -> Any:
    """Mask of the first text's positions in a pair (those before the first separator)."""
    return (input_ids == sep_token_id).cumsum(-1) == 0


def _head(model: Any, pooling: str, hidden: Any, attention_mask: Any,
          first_mask: Any = None) -> Any:
    """Logits of the classifier head over the last layer's states ``hidden``
    (``first_mask``: the first text's positions, for ``pooling: pair``)."""
    import torch

    if pooling == "mean":
        pooled = _mean(hidden, attention_mask)
    elif pooling == "pair":
        first = first_mask.long() * attention_mask
        u, v = _mean(hidden, first), _mean(hidden, attention_mask * (1 - first))
        pooled = torch.cat([(u - v).abs(), u * v], dim=-1)
    else:
        pooled = model.base_model.pooler(hidden)
    return model.classifier(model.dropout(pooled))


def _loss(config: Any, logits: Any, labels: Any, weight: Any = None) -> Any:
    from torch import nn

    if labels is None:
        return None
    if config.num_labels == 1:
        return nn.functional.mse_loss(logits.view(-1), labels.float().view(-1))
    w = None if weight is None else weight.to(device=logits.device, dtype=logits.dtype)
    return nn.functional.cross_entropy(logits, labels.long().view(-1), weight=w)


def _weight_buffer(module: Any, weight: Sequence[float] | None) -> None:
    """The class weights as a buffer of ``module`` (moved with it to the device)."""
    import torch

    module.register_buffer("class_weight", None if weight is None else
                           torch.tensor(list(weight), dtype=torch.float32), persistent=False)


def full_model(model: Any, pooling: str = "mean", weight: Sequence[float] | None = None,
               sep_token_id: int | None = None) -> Any:
    """The model (its weights shared) with its loss (class-weighted with ``weight``) computed
    here; ``pooling: mean`` / ``pair`` (with ``sep_token_id``) read the last layer's token
    means instead of BERT's pooler."""
    from torch import nn
    from transformers.modeling_outputs import SequenceClassifierOutput

    class _Full(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.config = model.config
            self.model = model
            _weight_buffer(self, weight)

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any = None,
                    labels: Any = None) -> SequenceClassifierOutput:
            if pooling in ("mean", "pair"):
                h = self.model.base_model(input_ids=input_ids, attention_mask=attention_mask,
                                          token_type_ids=token_type_ids).last_hidden_state
                first = None if pooling != "pair" else first_segment(input_ids, sep_token_id)
                logits = _head(self.model, pooling, h, attention_mask, first)
            else:
                extra = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
                logits = self.model(input_ids=input_ids, attention_mask=attention_mask,
                                    **extra).logits
            return SequenceClassifierOutput(
                loss=_loss(self.config, logits, labels, self.class_weight), logits=logits)

    return _Full()


def top_layers(model: Any, n_frozen: int, pooling: str = "cls",
               weight: Sequence[float] | None = None) -> Any:
    """The trainable top of a BERT-style classifier (layers above ``n_frozen``, pooler,
    head) as a module over cached hidden states; it shares the classifier's weights."""
    import torch
    from torch import nn
    from transformers.masking_utils import create_bidirectional_mask
    from transformers.modeling_outputs import SequenceClassifierOutput

    base = model.base_model
    if getattr(base, "pooler", None) is None or not hasattr(model, "dropout"):
        raise ValueError(f"cache_frozen needs a BERT-style classifier (pooler + dropout + "
                         f"classifier), not {type(model).__name__}; set cache_frozen: false")

    class _Top(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.config = model.config
            self.layers = nn.ModuleList(base.encoder.layer[n_frozen:])
            self.pooler, self.dropout = base.pooler, model.dropout
            self.classifier = model.classifier
            _weight_buffer(self, weight)

        def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor,
                    first_mask: torch.Tensor | None = None,
                    labels: torch.Tensor | None = None) -> SequenceClassifierOutput:
            h = hidden_states
            mask = create_bidirectional_mask(config=self.config, inputs_embeds=h,
                                             attention_mask=attention_mask)
            for layer in self.layers:
                out = layer(h, attention_mask=mask)
                h = out[0] if isinstance(out, tuple) else out
            logits = _head(model, pooling, h, attention_mask, first_mask)
            return SequenceClassifierOutput(
                loss=_loss(self.config, logits, labels, self.class_weight), logits=logits)

    return _Top()


def state_collator(states: list[np.ndarray], firsts: Sequence[int] | None = None):
    """Batches of cached states (padded) from dataset rows holding an index into them;
    with ``firsts`` (the first text's length in tokens per state), its mask too."""
    import torch

    def collate(rows: list[dict[str, Any]]) -> dict[str, Any]:
        arrays = [states[r["idx"]] for r in rows]
        n = max(len(a) for a in arrays)
        hidden = torch.zeros(len(arrays), n, arrays[0].shape[1])
        mask = torch.zeros(len(arrays), n, dtype=torch.long)
        first = torch.zeros(len(arrays), n, dtype=torch.long)
        for i, a in enumerate(arrays):
            hidden[i, :len(a)] = torch.from_numpy(a)
            mask[i, :len(a)] = 1
            if firsts is not None:
                first[i, :firsts[rows[i]["idx"]]] = 1
        batch = {"hidden_states": hidden, "attention_mask": mask}
        if firsts is not None:
            batch["first_mask"] = first
        if "labels" in rows[0]:
            batch["labels"] = torch.tensor([r["labels"] for r in rows])
        return batch

    return collate
