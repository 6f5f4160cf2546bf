"""HiREmate: layers, H-Partition, cluster options and the hierarchical solver (docs/hilp.md)."""
