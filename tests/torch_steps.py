"""Helpers shared by the torch tests (import after ``pytest.importorskip("torch")``)."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import torch

MODELS_FILE = Path(__file__).resolve().parents[1] / "examples" / "models.py"


def example_models(name: str) -> ModuleType:
    """``examples/models.py`` imported as module ``name`` (each test file its own copy)."""
    spec = importlib.util.spec_from_file_location(name, MODELS_FILE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def seeded_grads(
    model: torch.nn.Module, run: Callable[[], torch.Tensor], seed: int = 7
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Loss and gradients of one step ``run()`` under ``seed`` (dropout draws from it)."""
    model.zero_grad(set_to_none=True)
    torch.manual_seed(seed)
    loss = run()
    loss.backward()
    return loss.detach(), [p.grad.clone() for p in model.parameters()]
