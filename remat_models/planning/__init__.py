"""Planning: the method table, warm starts, formulation solves, ``plan()``, the ``auto`` portfolio, max batch."""
