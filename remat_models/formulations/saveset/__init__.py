"""The exact save-set choice (which forward values the backward pass gets saved), on Checkmate's memory rows."""
