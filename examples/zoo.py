"""A model zoo from Hugging Face ``transformers`` configs, with random weights (nothing is downloaded).

GPT-2, BERT, LLaMA, ViT and ResNet built from configs (``transformers`` is the ``hf`` extra), each as
``(model, inputs, targets, loss_fn)`` like ``examples/models.py``; the models return ``ModelOutput``
objects and the losses read ``output.logits``. Sizes: ``tiny`` (tests, seconds on a CPU),
``small`` and ``mid`` (2 layers, 4 x 128 tokens: steps a CPU thread runs in well under a second; the
compiled-step and vs-PyTorch benchmarks) and ``bench`` (activation-heavy training shapes: batch x sequence
as in training; the graphs are traced with fake tensors, so only the weights take real memory).

  remat graph from-torch examples/zoo.py:gpt2 --batch 2 -o gpt2.json    # tiny, one model
  python examples/zoo.py -o benchmarks/zoo                               # every model at bench size
  remat bench run benchmarks/zoo.toml -o bench_results/zoo.jsonl         # the sweep on those graphs
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import torch
import transformers
from torch import nn
from torch.nn import functional as F


class Example(NamedTuple):
    """A model with one sample batch and its loss function ``loss_fn(output, targets)``."""

    model: nn.Module
    inputs: torch.Tensor
    targets: torch.Tensor
    loss_fn: Callable[[Any, torch.Tensor], torch.Tensor]


def lm_loss(output: Any, targets: torch.Tensor) -> torch.Tensor:
    """Token cross-entropy of ``output.logits`` (batch, sequence, vocabulary)."""
    return F.cross_entropy(output.logits.flatten(0, 1), targets.flatten())


def class_loss(output: Any, targets: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of ``output.logits`` (batch, classes)."""
    return F.cross_entropy(output.logits, targets)


# Shapes per size: model config keywords and the batch. No dropout (plans replay exactly), eager
# attention (every op visible), no KV cache (nothing but tensors in the output).
_NO_DROPOUT = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
SIZES: dict[str, dict[str, dict[str, Any]]] = {
    "tiny": {
        "gpt2": {"n_layer": 2, "n_embd": 32, "n_head": 2, "vocab_size": 64, "batch": 2, "seq": 8},
        "bert": {"num_hidden_layers": 2, "hidden_size": 32, "num_attention_heads": 2, "intermediate_size": 64,
                 "vocab_size": 64, "batch": 2, "seq": 8},
        "llama": {"num_hidden_layers": 2, "hidden_size": 32, "num_attention_heads": 2, "num_key_value_heads": 1,
                  "intermediate_size": 64, "vocab_size": 64, "batch": 2, "seq": 8},
        "vit": {"num_hidden_layers": 2, "hidden_size": 32, "num_attention_heads": 2, "intermediate_size": 64,
                "image_size": 16, "patch_size": 4, "batch": 2},
        "resnet": {"embedding_size": 8, "hidden_sizes": [8, 16], "depths": [1, 1], "layer_type": "basic",
                   "image_size": 32, "batch": 2},
    },
    # Between tiny (overhead-bound) and bench (too large for one CPU thread): benchmarks/compiled_step.py.
    "small": {
        "gpt2": {"n_layer": 2, "n_embd": 256, "n_head": 4, "vocab_size": 2048, "batch": 4, "seq": 128},
        "bert": {"num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 4, "intermediate_size": 1024,
                 "vocab_size": 2048, "batch": 4, "seq": 128},
        "llama": {"num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2,
                  "intermediate_size": 688, "vocab_size": 2048, "batch": 4, "seq": 128},
        "vit": {"num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 4, "intermediate_size": 1024,
                "image_size": 64, "patch_size": 8, "batch": 8},
        "resnet": {"embedding_size": 32, "hidden_sizes": [32, 64, 128, 256], "depths": [1, 1, 1, 1],
                   "layer_type": "basic", "image_size": 64, "batch": 8},
    },
    # Bench-ish shapes that run in seconds a step on one CPU thread: benchmarks/vs_pytorch.py.
    "mid": {
        "gpt2": {"n_layer": 2, "n_embd": 256, "n_head": 4, "vocab_size": 8192, "batch": 4, "seq": 128},
        "bert": {"num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 4, "intermediate_size": 1024,
                 "vocab_size": 8192, "batch": 4, "seq": 128},
        "llama": {"num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2,
                  "intermediate_size": 688, "vocab_size": 8192, "batch": 4, "seq": 128},
        "vit": {"num_hidden_layers": 2, "hidden_size": 192, "num_attention_heads": 3, "intermediate_size": 768,
                "image_size": 64, "patch_size": 8, "batch": 8},
        "resnet": {"embedding_size": 32, "hidden_sizes": [64, 128, 256, 512], "depths": [1, 1, 1, 1],
                   "layer_type": "bottleneck", "image_size": 64, "batch": 8},
    },
    "bench": {
        "gpt2": {"n_layer": 12, "n_embd": 768, "n_head": 12, "vocab_size": 50257, "batch": 8, "seq": 1024},
        "bert": {"num_hidden_layers": 12, "hidden_size": 768, "num_attention_heads": 12, "intermediate_size": 3072,
                 "vocab_size": 30522, "batch": 32, "seq": 512},
        "llama": {"num_hidden_layers": 8, "hidden_size": 1024, "num_attention_heads": 16, "num_key_value_heads": 4,
                  "intermediate_size": 2816, "vocab_size": 32000, "batch": 4, "seq": 2048},
        "vit": {"num_hidden_layers": 12, "hidden_size": 768, "num_attention_heads": 12, "intermediate_size": 3072,
                "image_size": 224, "patch_size": 16, "batch": 64},
        "resnet": {"embedding_size": 64, "hidden_sizes": [256, 512, 1024, 2048], "depths": [3, 4, 6, 3],
                   "layer_type": "bottleneck", "image_size": 224, "batch": 32},
    },
}


def _shape(name: str, size: str, batch: int | None) -> tuple[dict[str, Any], int]:
    config = dict(SIZES[size][name])
    default_batch = config.pop("batch")
    return config, default_batch if batch is None else batch


def gpt2(batch: int | None = None, size: str = "tiny") -> Example:
    """GPT-2 language model (``GPT2LMHeadModel``), next-token cross-entropy on random tokens."""
    config, batch = _shape("gpt2", size, batch)
    seq = config.pop("seq")
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(
        transformers.GPT2Config(
            **config, n_positions=seq, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False,
            attn_implementation="eager", bos_token_id=0, eos_token_id=0,
        )
    )
    return _language_example(model, config["vocab_size"], batch, seq)


def _language_example(model: nn.Module, vocab: int, batch: int, seq: int) -> Example:
    """Random input tokens and random target tokens (same RNG order as drawing them inline) with ``lm_loss``."""
    tokens = torch.randint(0, vocab, (batch, seq))
    return Example(model, tokens, torch.randint(0, vocab, (batch, seq)), lm_loss)


def bert(batch: int | None = None, size: str = "tiny") -> Example:
    """BERT masked language model (``BertForMaskedLM``), token cross-entropy on random tokens."""
    config, batch = _shape("bert", size, batch)
    seq = config.pop("seq")
    torch.manual_seed(0)
    model = transformers.BertForMaskedLM(
        transformers.BertConfig(**config, max_position_embeddings=seq, **_NO_DROPOUT, attn_implementation="eager")
    )
    return _language_example(model, config["vocab_size"], batch, seq)


def llama(batch: int | None = None, size: str = "tiny") -> Example:
    """LLaMA language model (``LlamaForCausalLM``: RMSNorm, rotary positions, SwiGLU, grouped-query attention)."""
    config, batch = _shape("llama", size, batch)
    seq = config.pop("seq")
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(
        transformers.LlamaConfig(
            **config, max_position_embeddings=seq, use_cache=False, attn_implementation="eager",
            bos_token_id=0, eos_token_id=0,
        )
    )
    return _language_example(model, config["vocab_size"], batch, seq)


def vit(batch: int | None = None, size: str = "tiny") -> Example:
    """Vision transformer classifier (``ViTForImageClassification``), 10 classes on random images."""
    config, batch = _shape("vit", size, batch)
    torch.manual_seed(0)
    model = transformers.ViTForImageClassification(
        transformers.ViTConfig(**config, num_labels=10, **_NO_DROPOUT, attn_implementation="eager")
    )
    images = torch.randn(batch, 3, config["image_size"], config["image_size"])
    return Example(model, images, torch.randint(0, 10, (batch,)), class_loss)


def resnet(batch: int | None = None, size: str = "tiny") -> Example:
    """ResNet classifier (``ResNetForImageClassification``, BatchNorm), 10 classes on random images."""
    config, batch = _shape("resnet", size, batch)
    side = config.pop("image_size")
    torch.manual_seed(0)
    model = transformers.ResNetForImageClassification(transformers.ResNetConfig(**config, num_labels=10))
    return Example(model, torch.randn(batch, 3, side, side), torch.randint(0, 10, (batch,)), class_loss)


ZOO: dict[str, Callable[..., Example]] = {"gpt2": gpt2, "bert": bert, "llama": llama, "vit": vit, "resnet": resnet}


def main() -> None:
    """Trace every zoo model at the chosen size and write its graph JSON (``zoo_NAME.json``)."""
    from remat_models.io import write_graph
    from remat_models.torch import extract

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-o", "--out", type=Path, default=Path("benchmarks/zoo"))
    parser.add_argument("--size", choices=sorted(SIZES), default="bench")
    parser.add_argument("--models", default=",".join(ZOO))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.models.split(","):
        model, inputs, targets, loss_fn = ZOO[name](size=args.size)
        graph = extract(model, inputs, loss_fn, targets, name=f"zoo_{name}").graph
        path = args.out / f"zoo_{name}.json"
        write_graph(graph, path)
        print(f"{path}: {graph.n} nodes, {graph.m} edges, {len(graph.outputs)} outputs")
        del model


if __name__ == "__main__":
    main()
