"""The core: graph, schedule steps, simulator, budgets, limits, implementations, transfers, batch scaling, stages.

No solver and no heuristic: everything else is built on this layer.
"""
