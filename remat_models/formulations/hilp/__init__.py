"""HiREmate: layers, H-Partition, cluster alternatives, the H-ILP model and the hierarchical solver (docs/hilp.md)."""
