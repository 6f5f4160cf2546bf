"""Give the outputs of multi-output ops their own lifetimes without running any op twice.

A Graph node frees its outputs together, so BatchNorm's small saved statistics would pin its large
output until the backward, and a weight gradient (kept to the end) the input gradient. Two rewrites:

- ``split_by_mask`` (joint graph, before functionalization): a convolution backward whose input
  gradient and parameter gradients are both used becomes one call for each (they are separate
  convolutions: no work is shared). Norm backward ops take an ``output_mask`` too, but their input
  gradient needs the reductions their parameter gradients are made of: they stay one call.
- ``share_outputs`` (functional graph): any other multi-output op stays one node that runs once, as
  in eager, and holds all its outputs; outputs that outlive the others by enough to matter are each
  copied into their own node right after the op (a clone: exact values, and the op's node can be
  freed while the copies stay). Which ones: the op's node lives until a time T (the last read of an
  output it keeps); an output read after T is cloned, so it costs its bytes from the op to T twice,
  and an output read before T costs its bytes until T. T is the output end minimising the sum of
  bytes x program steps (ties: fewer clones).

A copy of an op's output (those clones, and functionalization's copies of BatchNorm's new running
statistics) can only be recomputed by re-running the whole op; a planner that recomputes one when the
backward reads it holds the op's large outputs again (the split before issue 23 recomputed small
outputs from the op's inputs instead, at the price of running every such op twice). So copies that are
small next to their op are kept (:func:`is_kept_copy`: not recomputable).
"""

from __future__ import annotations

import logging
import operator

import torch
from torch import fx
from torch._guards import detect_fake_mode
from torch.fx.passes.fake_tensor_prop import FakeTensorProp
from torch.multiprocessing.reductions import StorageWeakRef

from remat_models.torch.guards import storage_key
from remat_models.torch.ops import tensors_of

log = logging.getLogger(__name__)

aten = torch.ops.aten
SMALL = 16  # copies of outputs this many times smaller than their op's outputs are kept, never recomputed
KEPT = "remat_kept_copy"  # FX node meta key of such copies
SEPARATE_PARTS = {aten.convolution_backward.default}  # masked ops whose outputs share no work
COPY_SOURCE = {aten.clone.default: 0, aten.copy.default: 1}  # copy ops -> the argument whose values they copy


def used_outputs(node: fx.Node) -> dict[int, list[fx.Node]]:
    """Output index -> the getitem nodes reading it (only getitems that have users)."""
    used: dict[int, list[fx.Node]] = {}
    for user in node.users:
        if user.target is operator.getitem and user.users:
            used.setdefault(user.args[1], []).append(user)
    return used


def _multi_output(node: fx.Node) -> bool:
    """Whether ``node`` calls an op returning a tuple or list of values."""
    return node.op == "call_function" and isinstance(node.meta.get("val"), (tuple, list))


def mask_position(node: fx.Node) -> int | None:
    """Position of the ``output_mask`` argument in the op's schema, if the call passes one."""
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return None
    for position, argument in enumerate(schema.arguments):
        if argument.name == "output_mask" and position < len(node.args):
            return position
    return None


def split_by_mask(module: fx.GraphModule) -> int:
    """Split masked ops whose outputs share no work (input gradient | parameter gradients) in place; return how many.

    Runs on the joint graph before functionalization (which derives the parts' metadata). Each part
    computes only its outputs, so this adds no work, and no copy either.
    """
    graph = module.graph
    split = 0
    for node in list(graph.nodes):
        mask_at = mask_position(node) if node.target in SEPARATE_PARTS else None
        used = used_outputs(node) if mask_at is not None else {}
        rest = sorted(index for index in used if index != 0)
        if 0 not in used or not rest:
            continue
        anchor = node
        for group in ([0], rest):
            args = list(node.args)
            args[mask_at] = [j in group for j in range(len(args[mask_at]))]
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
    log.debug("split %d masked multi-output ops", split)
    return split


def _last_reads(graph: fx.Graph) -> tuple[dict[fx.Node, int], dict[StorageWeakRef, int]]:
    """Program position of every node, and of the last node reading each storage (getitems are not reads)."""
    position: dict[fx.Node, int] = {}
    last: dict[StorageWeakRef, int] = {}
    for k, node in enumerate(graph.nodes):
        position[node] = k
        if node.target is operator.getitem:
            continue
        for source in node.all_input_nodes:
            for tensor in tensors_of(source.meta.get("val")):
                last[storage_key(tensor)] = k
    return position, last


def _nbytes(node: fx.Node) -> int:
    """Bytes of the storages of a getitem's tensor."""
    return sum(t.untyped_storage().nbytes() for t in tensors_of(node.meta.get("val")))


def _pinned_until(position: int, ends: dict[int, int], nbytes: dict[int, int]) -> int:
    """The time T until which the op's node lives (see the module docstring)."""

    def waste(until: int) -> int:
        return sum(
            nbytes[k] * (until - position) if end > until else nbytes[k] * (until - end) for k, end in ends.items()
        )

    return min(sorted(set(ends.values()), reverse=True), key=waste)


def share_outputs(module: fx.GraphModule) -> int:
    """Copy outputs of multi-output ops into own nodes where that saves memory; return how many ops."""
    graph = module.graph
    position, last = _last_reads(graph)
    shared = 0
    for node in list(graph.nodes):
        used = used_outputs(node) if _multi_output(node) else {}
        if len(used) < 2:
            continue
        ends = {
            k: max((last.get(storage_key(t), 0) for item in items for t in tensors_of(item.meta.get("val"))), default=0)
            for k, items in used.items()
        }
        until = _pinned_until(position[node], ends, {k: _nbytes(items[0]) for k, items in used.items()})
        anchor = max((getitem for getitems in used.values() for getitem in getitems), key=position.__getitem__)
        for k, getitems in sorted(used.items()):
            if ends[k] <= until:
                continue
            with graph.inserting_after(anchor):
                copy = graph.call_function(aten.clone.default, (getitems[0],))
            for getitem in getitems:
                getitem.replace_all_uses_with(copy, delete_user_cb=lambda user, copy=copy: user is not copy)
            anchor = copy
        shared += any(end > until for end in ends.values())
        _keep_small_copies(used)
    module.recompile()
    if shared:  # fresh metadata of the ops: views of a rewired output now alias its copy
        _propagate(module)
    log.debug("copied outputs of %d multi-output ops", shared)
    return shared


def _propagate(module: fx.GraphModule) -> None:
    """Fresh fake values of every op of ``module`` after a rewrite (its inputs' values kept)."""
    kept = {node: node.meta.get("val") for node in module.graph.nodes if node.op in ("placeholder", "get_attr")}
    placeholders = [value for node, value in kept.items() if node.op == "placeholder"]
    FakeTensorProp(module, detect_fake_mode(placeholders)).propagate_dont_convert_inputs(*placeholders)
    for node, value in kept.items():
        node.meta["val"] = value


def rederive_dropout(module: fx.GraphModule) -> int:
    """Readers of a training dropout's output read ``input * mask * scale`` instead; return how many dropouts.

    ``native_dropout`` draws its mask and returns it with its output, one Graph node that cannot be recomputed
    (it would draw again): its output, activation-sized, stayed resident as long as any reader might need it.
    Derived from the mask, the output can be freed and recomputed like any op, and the op's own output is
    scratch, dead at once. The CPU kernel computes ``input.mul(mask).mul_(scale)`` from the same 0/1 mask,
    so the values are the same.
    """
    graph = module.graph
    count = 0
    for node in list(graph.nodes):
        if node.target is not aten.native_dropout.default or node.args[2] is False:
            continue
        used = used_outputs(node)
        if 0 not in used:
            continue
        if 1 in used:
            mask = used[1][0]
        else:
            with graph.inserting_after(node):
                mask = graph.call_function(operator.getitem, (node, 1))
        source, p = node.args[0], float(node.args[1])
        with graph.inserting_after(mask):
            masked = graph.call_function(aten.mul.Tensor, (source, mask))
        with graph.inserting_after(masked):
            output = graph.call_function(aten.mul.Tensor, (masked, 0.0 if p == 1 else 1 / (1 - p)))
        for getitem in used[0]:
            getitem.replace_all_uses_with(output)
            graph.erase_node(getitem)  # unread, the op's output is its scratch (the Graph's workspace)
        count += 1
    if count:
        module.recompile()
        _propagate(module)
    log.debug("derived the outputs of %d dropouts from their masks", count)
    return count


def _keep_small_copies(used: dict[int, list[fx.Node]]) -> None:
    """Mark the readers of an op's outputs that copy a small one of them as kept (see the module docstring)."""
    total = sum(_nbytes(items[0]) for items in used.values())
    for items in used.values():
        if SMALL * _nbytes(items[0]) > total:
            continue
        for item in items:
            for reader in item.users:
                source = COPY_SOURCE.get(reader.target)
                if source is not None and reader.args[source] is item:
                    reader.meta[KEPT] = True
                    log.debug("kept copy %s of %s (%d of %d B)", reader.name, item.name, _nbytes(item), total)


def is_kept_copy(node: fx.Node) -> bool:
    """Whether ``node`` copies a small output of a multi-output op (never recomputed: see the module docstring)."""
    return bool(node.meta.get(KEPT))


def undefine_masked_outputs(module: fx.GraphModule) -> None:
    """Masked-off outputs are undefined (None) at run time, though some meta kernels allocate them."""
    for node in module.graph.nodes:
        value = node.meta.get("val")
        mask_at = mask_position(node) if node.op == "call_function" else None
        if mask_at is not None and isinstance(value, (tuple, list)):
            mask = node.args[mask_at]
            node.meta["val"] = type(value)(item if keep else None for item, keep in zip(value, mask, strict=True))
