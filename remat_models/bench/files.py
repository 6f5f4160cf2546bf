"""Atomic output files for reports and plots (the checks live in ``remat_models.io.atomic``)."""

from remat_models.io.atomic import write_atomic, write_text_atomic

__all__ = ["write_atomic", "write_text_atomic"]
