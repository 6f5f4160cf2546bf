"""PyTorch front end: trace training steps into Graphs, run Schedules on real tensors (needs the torch extra)."""

from remat_models.torch.api import (
    Floor,
    RematStep,
    activation_bytes,
    activation_floor,
    apply_grads,
    extract,
    fixed_tensors,
    least_peak,
    plan,
)
from remat_models.torch.compiled import CompiledStep, SavePlan, compile
from remat_models.torch.compiled_step import GeneratedStep
from remat_models.torch.executor import Executor, StepResult
from remat_models.torch.mapping import Role, TorchGraph, to_graph
from remat_models.torch.maxbatch import TorchMaxBatch, max_batch
from remat_models.torch.sac import SacPlan, checkpointed, sac_plan
from remat_models.torch.schedule_partition import SchedulePlan
from remat_models.torch.trace import TracedStep, trace_step

__all__ = [
    "CompiledStep",
    "Executor",
    "Floor",
    "GeneratedStep",
    "RematStep",
    "Role",
    "SacPlan",
    "SavePlan",
    "SchedulePlan",
    "StepResult",
    "TorchGraph",
    "TorchMaxBatch",
    "TracedStep",
    "activation_bytes",
    "activation_floor",
    "apply_grads",
    "checkpointed",
    "compile",
    "extract",
    "fixed_tensors",
    "least_peak",
    "max_batch",
    "plan",
    "sac_plan",
    "to_graph",
    "trace_step",
]
