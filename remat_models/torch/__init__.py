"""PyTorch front end: trace training steps into Graphs, run Schedules on real tensors (needs the torch extra)."""

from remat_models.torch.api import RematStep, activation_bytes, apply_grads, extract, fixed_tensors, plan
from remat_models.torch.executor import Executor, StepResult
from remat_models.torch.mapping import Role, TorchGraph, to_graph
from remat_models.torch.maxbatch import TorchMaxBatch, max_batch
from remat_models.torch.trace import TracedStep, trace_step

__all__ = [
    "Executor",
    "RematStep",
    "Role",
    "StepResult",
    "TorchGraph",
    "TorchMaxBatch",
    "TracedStep",
    "activation_bytes",
    "apply_grads",
    "extract",
    "fixed_tensors",
    "max_batch",
    "plan",
    "to_graph",
    "trace_step",
]
