"""Predicted vs measured peak and time overhead of planned training steps for the example models.

Run: .venv/bin/python benchmarks/torch_validate.py [--device cpu|cuda] [--budgets 100%,70%,50%]
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import torch

from remat_models.errors import RematError
from remat_models.torch.validate import validate

ROOT = Path(__file__).resolve().parents[1]


def load_models():
    spec = importlib.util.spec_from_file_location("remat_example_models", ROOT / "examples" / "models.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["remat_example_models"] = module
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--budgets", default="100%,70%,50%")
    parser.add_argument("--methods", default="checkpoint-all,chen-sqrtn,chen-greedy")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    models = load_models()
    print(
        f"{'model':8} {'method':15} {'budget':>7} {'predicted':>10} {'measured':>10} {'diff':>6} "
        f"{'grads':>6} {'eager ms':>9} {'remat ms':>9} {'overhead':>9}"
    )
    for name, build in models.EXAMPLES.items():
        for method in args.methods.split(","):
            for budget in args.budgets.split(","):
                model, inputs, targets, loss_fn = build()
                try:
                    report = validate(
                        model,
                        inputs,
                        targets,
                        loss_fn,
                        budget=budget,
                        method=method,
                        device=args.device,
                        repeats=args.repeats,
                    )
                except RematError as error:
                    print(f"{name:8} {method:15} {budget:>7} {type(error).__name__}: {error}")
                    continue
                print(
                    f"{name:8} {method:15} {budget:>7} {report.predicted:>10,} {report.measured:>10,} "
                    f"{report.error:>+6,} {'same' if report.grads_equal else 'DIFF':>6} "
                    f"{report.eager_seconds * 1e3:>9.2f} {report.remat_seconds * 1e3:>9.2f} "
                    f"{report.overhead:>+8.1f}%"
                )


if __name__ == "__main__":
    main()
