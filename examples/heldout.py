"""Held-out models for exact planning checks: transformers families nobody tuned the planners on.

Each function returns ``(model, inputs, targets, loss_fn)`` like ``examples/zoo.py`` (random weights from a
config, nothing downloaded; the ``hf`` extra). Shapes are training-like (the graphs are traced with fake tensors):

  remat graph from-torch examples/heldout.py:qwen2 -o qwen2.json
  remat graph from-torch examples/heldout.py:distilbert -o distilbert.json
  python benchmarks/exact_zoo.py --graphs qwen2.json,distilbert.json --budgets 50%,30%
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import transformers
from torch.nn import functional as F

Example = tuple[torch.nn.Module, torch.Tensor, torch.Tensor, Callable[[Any, torch.Tensor], torch.Tensor]]


def lm_loss(output: Any, targets: torch.Tensor) -> torch.Tensor:
    """Token cross-entropy of ``output.logits`` (batch, sequence, vocabulary)."""
    return F.cross_entropy(output.logits.flatten(0, 1), targets.flatten())


def qwen2(batch: int | None = None) -> Example:
    """Qwen2 causal LM, 6 layers (grouped-query attention, SwiGLU), 4 x 1,024 tokens, no dropout."""
    torch.manual_seed(0)
    config = transformers.Qwen2Config(
        num_hidden_layers=6, hidden_size=768, num_attention_heads=12, num_key_value_heads=2,
        intermediate_size=2048, vocab_size=16000, use_cache=False, attn_implementation="eager",
    )  # fmt: skip
    tokens = torch.randint(0, config.vocab_size, (batch or 4, 1024))
    targets = torch.randint(0, config.vocab_size, tokens.shape)
    return transformers.Qwen2ForCausalLM(config), tokens, targets, lm_loss


def distilbert(batch: int | None = None) -> Example:
    """DistilBERT masked LM, 6 layers, dropout 0.1 (random ops the plans may not redraw), 16 x 512 tokens."""
    torch.manual_seed(0)
    config = transformers.DistilBertConfig(
        n_layers=6, dim=768, hidden_dim=3072, n_heads=12, vocab_size=30522, max_position_embeddings=512,
        dropout=0.1, attention_dropout=0.1, attn_implementation="eager",
    )  # fmt: skip
    tokens = torch.randint(0, config.vocab_size, (batch or 16, 512))
    targets = torch.randint(0, config.vocab_size, tokens.shape)
    return transformers.DistilBertForMaskedLM(config), tokens, targets, lm_loss
