"""MONeT: operator implementation selection with checkpointing."""
