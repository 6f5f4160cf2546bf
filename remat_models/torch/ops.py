"""Predicates on FX nodes of a traced step (random draws, write-backs, side effects) and their tensors."""

from __future__ import annotations

from typing import Any

import torch
from torch import fx
from torch.utils._pytree import tree_flatten


def tensors_of(value: Any) -> list[torch.Tensor]:
    """Flat list of the tensors in an FX value (a tensor, a tuple of them, None...)."""
    return [leaf for leaf in tree_flatten(value)[0] if isinstance(leaf, torch.Tensor)]


def is_random(node: fx.Node) -> bool:
    """Whether ``node`` draws from the random number generator."""
    target = node.target
    return isinstance(target, torch._ops.OpOverload) and torch.Tag.nondeterministic_seeded in target.tags


def is_write_back(node: fx.Node) -> bool:
    """Whether ``node`` copies a new value into a placeholder (a buffer or input mutation)."""
    return (
        node.op == "call_function"
        and node.target is torch.ops.aten.copy_.default
        and isinstance(node.args[0], fx.Node)
        and node.args[0].op == "placeholder"
    )


def is_impure(node: fx.Node) -> bool:
    """Keep placeholders, outputs, write-backs and random draws through dead-code elimination."""
    return node.op in ("placeholder", "output") or is_write_back(node) or is_random(node)
