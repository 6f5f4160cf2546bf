"""Graph and schedule files (own JSON format, networkx node-link) and graph generators."""

from remat_models.io.files import GRAPH_FORMATS, read_graph, read_json, write_graph, write_json_atomic
from remat_models.io.generators import (
    GENERATORS,
    GeneratorSpec,
    describe_generators,
    linear_chain,
    random_layered,
    transformer,
    unet,
)
from remat_models.io.graph_json import graph_from_dict, graph_to_dict
from remat_models.io.node_link import NodeLinkFlavour, detect_flavour, from_node_link, to_node_link
from remat_models.io.schedule_json import read_schedule, schedule_from_dict, schedule_to_dict, write_schedule

__all__ = [
    "GENERATORS",
    "GRAPH_FORMATS",
    "GeneratorSpec",
    "NodeLinkFlavour",
    "describe_generators",
    "detect_flavour",
    "from_node_link",
    "graph_from_dict",
    "graph_to_dict",
    "linear_chain",
    "random_layered",
    "read_graph",
    "read_json",
    "read_schedule",
    "schedule_from_dict",
    "schedule_to_dict",
    "to_node_link",
    "transformer",
    "unet",
    "write_graph",
    "write_json_atomic",
    "write_schedule",
]
