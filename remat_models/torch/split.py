"""Split multi-output ops so a small saved output does not pin a large one in memory.

A node that keeps several outputs frees them together, so BatchNorm's saved mean would pin its
activation, and a weight gradient (kept to the end) the input gradient. Every op whose first output
and some other output are both used is split in two: ops with an ``output_mask`` argument
(convolution/norm backward) into one call for the input gradient and one for the parameter
gradients; other ops (norm forward, max-pool with indices, nll_loss) are duplicated, the copy keeping
the secondary outputs (it recomputes the op: deterministic kernels give identical values). Random
ops are never split. This runs on the joint graph before functionalization, which re-derives all
tensor metadata.
"""

from __future__ import annotations

import logging
import operator

from torch import fx

from remat_models.torch.ops import is_random

log = logging.getLogger(__name__)


def _used_outputs(node: fx.Node) -> dict[int, list[fx.Node]]:
    """Output index -> the getitem nodes reading it (only getitems that have users)."""
    used: dict[int, list[fx.Node]] = {}
    for user in node.users:
        if user.target is operator.getitem and user.users:
            used.setdefault(user.args[1], []).append(user)
    return used


def mask_position(node: fx.Node) -> int | None:
    """Position of the ``output_mask`` argument in the op's schema, if the call passes one."""
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return None
    for position, argument in enumerate(schema.arguments):
        if argument.name == "output_mask" and position < len(node.args):
            return position
    return None


def split_multi_output(module: fx.GraphModule) -> int:
    """Rewrite ``module`` in place; return how many ops were split."""
    graph = module.graph
    split = 0
    for node in list(graph.nodes):
        if node.op != "call_function" or not isinstance(node.meta.get("val"), (tuple, list)) or is_random(node):
            continue
        used = _used_outputs(node)
        rest = sorted(index for index in used if index != 0)
        if 0 not in used or not rest:
            continue
        mask_at = mask_position(node)
        parts = []
        for group in ([0], rest):
            args = list(node.args)
            if mask_at is not None:
                args[mask_at] = [j in group for j in range(len(args[mask_at]))]
            parts.append((group, args))
        anchor = node
        for group, args in parts:
            with graph.inserting_after(anchor):
                part = graph.call_function(node.target, tuple(args), dict(node.kwargs))
            for index in group:
                for getitem in used[index]:
                    getitem.replace_input_with(node, part)
            anchor = part
        for user in list(node.users):
            graph.erase_node(user)  # getitems nobody reads
        graph.erase_node(node)
        split += 1
    module.recompile()
    log.debug("split %d multi-output ops", split)
    return split


def undefine_masked_outputs(module: fx.GraphModule) -> None:
    """Masked-off outputs are undefined (None) at run time, though some meta kernels allocate them."""
    for node in module.graph.nodes:
        value = node.meta.get("val")
        mask_at = mask_position(node) if node.op == "call_function" else None
        if mask_at is not None and isinstance(value, (tuple, list)):
            mask = node.args[mask_at]
            node.meta["val"] = type(value)(item if keep else None for item, keep in zip(value, mask, strict=True))
