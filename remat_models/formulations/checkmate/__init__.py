"""Checkmate: the staged MILP, its implementation-choosing variant, LP rounding and its paging part."""
