"""Helpers shared by the torch tests (import after ``pytest.importorskip("torch")``)."""

from __future__ import annotations

from collections.abc import Callable

import torch


def seeded_grads(
    model: torch.nn.Module, run: Callable[[], torch.Tensor], seed: int = 7
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Loss and gradients of one step ``run()`` under ``seed`` (dropout draws from it)."""
    model.zero_grad(set_to_none=True)
    torch.manual_seed(seed)
    loss = run()
    loss.backward()
    return loss.detach(), [p.grad.clone() for p in model.parameters()]
