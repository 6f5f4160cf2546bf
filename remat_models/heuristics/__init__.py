"""Heuristics that produce a Schedule directly: baselines (checkpoint-all, Chen, Griewank), FastSA, rounding."""
