"""Offload and prefetch of executor values: whole storages copied between the device and a host dict.

Copies keep each tensor's storage size, offset and strides, and tensors of one value that share a
storage share its copy, so the device bytes after a prefetch equal the bytes before the offload.
``move_value`` copies on the current stream (pinned host memory, non-blocking from CUDA: stream order
keeps them correct); ``remat_models.torch.copy_engine.StreamCopies`` passes its own storage copier to
run them on copy streams.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_unflatten

from remat_models.torch.mapping import tensors_of

StorageCopier = Callable[[torch.UntypedStorage], torch.UntypedStorage]


def move_value(value: Any, device: torch.device, copy: StorageCopier | None = None) -> Any:
    """Copy every tensor of an FX value (tensor, tuple, None...) to ``device``, storage by storage.

    ``copy`` makes the copy of one storage (default: a fresh storage on ``device``, copied on the current stream).
    """
    leaves, spec = tree_flatten(value)
    to_host = device.type == "cpu"
    copies: dict[int, torch.UntypedStorage] = {}
    moved = []
    for leaf in leaves:
        if not isinstance(leaf, torch.Tensor):
            moved.append(leaf)
            continue
        storage = leaf.untyped_storage()
        key = storage.data_ptr()
        if key not in copies:
            if copy is None:
                copies[key] = _copy_storage(storage, device, pin=to_host and storage.device.type == "cuda")
            else:
                copies[key] = copy(storage)
        tensor = torch.empty(0, dtype=leaf.dtype, device=device)
        tensor.set_(copies[key], leaf.storage_offset(), leaf.size(), leaf.stride())
        moved.append(tensor)
    return tree_unflatten(moved, spec)


def _copy_storage(storage: torch.UntypedStorage, device: torch.device, *, pin: bool) -> torch.UntypedStorage:
    """A fresh copy of ``storage`` on ``device`` (pinned host memory and a non-blocking copy when ``pin``)."""
    target = torch.UntypedStorage(storage.nbytes(), device=device)
    if pin:
        target = target.pin_memory()
    non_blocking = pin or (storage.device.type == "cpu" and storage.is_pinned() and device.type == "cuda")
    target.copy_(storage, non_blocking=non_blocking)
    return target


def host_bytes(value: Any) -> int:
    """Bytes of the distinct storages of a host value."""
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors_of(value)}
    return sum(storages.values())
