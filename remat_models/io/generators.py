"""Seeded, deterministic graph generators: Checkmate's chain, random layered DAGs, U-Net and transformer.

Every generator is also registered in ``GENERATORS`` as a :class:`GeneratorSpec`, so a caller can
build any of them uniformly with ``GENERATORS[name](size=..., seed=...)``.

Seeds are integers >= 0. No generator builds more than ``MAX_NODES`` (10 million) nodes: the node
count a size gives is computed first, and a size beyond the limit is a ConfigurationError naming it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from remat_models.core.graph import Graph
from remat_models.errors import ConfigurationError
from remat_models.io._training import Op, training_graph

_FLOAT_BYTES = 4  # activations are fp32
_FLOPS_PER_US = 1e8  # ~100 TFLOP/s: costs are in microseconds
_BYTES_PER_US = 1e6  # ~1 TB/s of memory bandwidth
_JITTER = 0.1  # relative cost noise of the realistic generators
MAX_NODES = 10_000_000  # the largest graph a generator builds (checked before building)


def linear_chain(n: int) -> Graph:
    """Generate Checkmate's linear training chain: f0..f{n-1}, loss, b{n-1}..b0 with unit costs and sizes.

    Edges: the chain (i, i+1) over all 2n+1 nodes and (f_i, b_i) for every i: 3n edges.
    """
    _check_size("n", n, 1)
    _check_nodes(2 * n + 1, n=n)
    ops = [Op(f"f{i}", (f"f{i - 1}",) if i else (), mem=1, cost=1.0, saves_inputs=False) for i in range(n)]
    loss = Op("loss", (f"f{n - 1}",), mem=1, cost=1.0)
    return training_graph(
        ops,
        loss,
        name=f"linear_chain_n{n}",
        backward_name=lambda forward: "b" + forward[1:],
        backward_cost=1.0,
        grad_mem="output",
    )


def random_layered(
    n: int,
    seed: int = 0,
    *,
    width: float = 0.27,
    edge_density: float = 0.2,
    skip_density: float = 0.14,
    max_cost: int = 1000,
    mem_scale: float = 2000.0,
    max_mem: int = 8000,
) -> Graph:
    """Generate a random layered DAG in the spirit of Gagrani et al.'s ``rl_*`` benchmark graphs.

    A source, layers of random width (uniform in 1..~3.5*width*sqrt(n)), and a sink. Neighbouring
    layers are joined with probability ``edge_density`` per pair, topped up so that every node has a
    predecessor in the layer above and a successor in the layer below (so the graph is connected);
    a ``skip_density`` share of all edges are skip connections to a layer at least two further on.
    Costs are uniform integers in 0..``max_cost`` (0 for the source and sink); sizes are
    exponential with mean ``mem_scale``, rounded, clipped to 10..``max_mem``.
    """
    _check_size("n", n, 2)
    _check_nodes(n, n=n)
    rng = _rng(seed)
    layers = _layer_widths(n, max(1, round(3.5 * width * math.sqrt(n))), rng)
    starts = np.concatenate([[0], np.cumsum(layers)])
    adjacent = [
        _adjacent_edges(int(starts[i]), int(starts[i + 1]), int(starts[i + 2]), edge_density, rng)
        for i in range(len(layers) - 1)
    ]
    edges = np.concatenate(adjacent)
    skips = _skip_edges(starts, round(skip_density / (1 - skip_density) * len(edges)), rng)
    cost = rng.integers(0, max_cost, size=n, endpoint=True).astype(np.float64)
    cost[[0, n - 1]] = 0.0
    mem = np.clip(np.rint(rng.exponential(mem_scale, size=n)), 10, max_mem).astype(np.int64)
    return Graph.from_arrays(
        [str(v) for v in range(n)],
        cost,
        mem,
        np.concatenate([edges, skips]),
        order=np.arange(n),
        name=f"random_layered_n{n}_w{width}_ed{edge_density}_scd{skip_density}_s{seed}",
    )


def unet(
    depth: int = 4, width: int = 2, seed: int = 0, *, batch: int = 8, channels: int = 32, resolution: int = 256
) -> Graph:
    """Generate a U-Net training graph of ``depth`` levels with ``width`` convs per block.

    Encoder levels (convs, then a pool), a bottleneck, mirrored decoder levels (up-conv, concat
    with the encoder's skip of the same level, convs), a 1x1 head and the loss, then the backward
    pass, whose gradients join where the skips fork.

    Level l has ``channels * 2**l`` channels at ``resolution / 2**l``: activations halve per level.
    """
    _check_size("depth", depth, 1)
    _check_size("width", width, 1)
    _check_nodes(2 * (depth * (2 * width + 3) + width + 1) + 1, depth=depth, width=width)
    if resolution % 2**depth:
        raise ConfigurationError(f"resolution {resolution} is not divisible by 2**depth = {2**depth}")
    cost = _CostModel(seed)
    ops: list[Op] = []

    def conv_block(level: int, source: str | None, c_in: int, prefix: str) -> str:
        pixels = batch * (resolution >> level) ** 2
        c_out = channels << level
        for j in range(width):
            ops.append(
                cost.op(f"{prefix}.conv{j}", (source,) if source else (), pixels * c_out, 18 * pixels * c_in * c_out)
            )
            source, c_in = ops[-1].name, c_out
        return ops[-1].name

    previous, c_in, skips = None, 3, []
    for level in range(depth):
        skips.append(conv_block(level, previous, c_in, f"enc{level}"))
        ops.append(
            cost.op(f"enc{level}.pool", (skips[-1],), batch * (resolution >> (level + 1)) ** 2 * (channels << level), 0)
        )
        previous, c_in = ops[-1].name, channels << level
    previous = conv_block(depth, previous, c_in, "mid")
    for level in reversed(range(depth)):
        pixels, c_out = batch * (resolution >> level) ** 2, channels << level
        ops.append(cost.op(f"dec{level}.up", (previous,), pixels * c_out, 2 * pixels * (2 * c_out) * c_out))
        ops.append(cost.op(f"dec{level}.concat", (ops[-1].name, skips[level]), 2 * pixels * c_out, 0, saves=False))
        previous = conv_block(level, ops[-1].name, 2 * c_out, f"dec{level}")
    ops.append(cost.op("head", (previous,), 2 * batch * resolution**2, 2 * batch * resolution**2 * channels * 2))
    loss = cost.op("loss", ("head",), 1, 0)
    return training_graph(ops, loss, name=f"unet_d{depth}_w{width}_s{seed}")


def transformer(
    layers: int = 4,
    seed: int = 0,
    *,
    batch: int = 8,
    seq: int = 1024,
    hidden: int = 1024,
    heads: int = 16,
    vocab: int = 32768,
) -> Graph:
    """Generate a decoder-only transformer training graph: embedding, ``layers`` pre-norm blocks, norm, logits, loss.

    Each block: layernorm, qkv, attention scores, softmax, attention output, projection, residual
    add, layernorm, MLP up, GELU, MLP down, residual add. The backward pass joins the residual
    gradients at each block input. Attention scores (batch x heads x seq x seq) dominate memory.
    """
    _check_size("layers", layers, 1)
    _check_nodes(24 * layers + 7, layers=layers)
    cost = _CostModel(seed)
    tokens, d = batch * seq, hidden
    ops = [cost.op("embed", (), tokens * d, 0, saves=False)]
    x = "embed"
    for i in range(layers):
        p = f"l{i}."
        ops += [
            cost.op(p + "ln1", (x,), tokens * d, 0, saves_output=False),
            cost.op(p + "qkv", (p + "ln1",), 3 * tokens * d, 2 * tokens * d * 3 * d, saves_output=False),
            cost.op(p + "scores", (p + "qkv",), batch * heads * seq * seq, 2 * tokens * seq * d, saves_output=False),
            cost.op(p + "softmax", (p + "scores",), batch * heads * seq * seq, 0, saves_inputs=False),
            cost.op(p + "attn", (p + "softmax", p + "qkv"), tokens * d, 2 * tokens * seq * d, saves_output=False),
            cost.op(p + "proj", (p + "attn",), tokens * d, 2 * tokens * d * d, saves_output=False),
            cost.op(p + "add1", (x, p + "proj"), tokens * d, 0, saves=False),
            cost.op(p + "ln2", (p + "add1",), tokens * d, 0, saves_output=False),
            cost.op(p + "up", (p + "ln2",), 4 * tokens * d, 2 * tokens * d * 4 * d, saves_output=False),
            cost.op(p + "gelu", (p + "up",), 4 * tokens * d, 0, saves_output=False),
            cost.op(p + "down", (p + "gelu",), tokens * d, 2 * tokens * 4 * d * d, saves_output=False),
            cost.op(p + "add2", (p + "add1", p + "down"), tokens * d, 0, saves=False),
        ]
        x = p + "add2"
    ops.append(cost.op("norm", (x,), tokens * d, 0, saves_output=False))
    ops.append(cost.op("logits", ("norm",), tokens * vocab, 2 * tokens * d * vocab, saves_output=False))
    loss = cost.op("loss", ("logits",), 1, 0)
    return training_graph(ops, loss, name=f"transformer_l{layers}_s{seed}")


@dataclass(frozen=True)
class GeneratorSpec:
    """A registered generator: callable as ``spec(size=..., seed=...)`` or with its own keywords."""

    name: str
    function: Callable[..., Graph]
    size_param: str
    default_size: int
    description: str
    seeded: bool = True

    def build(self, size: int | None = None, seed: int = 0, **options: Any) -> Graph:
        """Build the graph of the given size (the default if None) and seed, with generator-specific options."""
        kwargs = {self.size_param: self.default_size if size is None else size, **options}
        _check_size("seed", seed, 0)
        if self.seeded:
            kwargs["seed"] = seed
        return self.function(**kwargs)

    def __call__(self, size: int | None = None, seed: int = 0, **options: Any) -> Graph:
        """Like :meth:`build`; the size may also be passed under its own name (``depth=4``)."""
        if self.size_param in options:
            if size is not None:
                raise TypeError(f"{self.name}: give either size or {self.size_param}, not both")
            size = options.pop(self.size_param)
        return self.build(size, seed, **options)

    def describe(self) -> str:
        """Describe in one line: name, what the size means, its default, and what is generated."""
        seed_note = "" if self.seeded else " (ignores the seed)"
        return f"{self.name}: size = {self.size_param} (default {self.default_size}){seed_note}; {self.description}"


GENERATORS: dict[str, GeneratorSpec] = {
    spec.name: spec
    for spec in (
        GeneratorSpec("chain", linear_chain, "n", 8, "Checkmate's linear training chain, unit costs", seeded=False),
        GeneratorSpec("random-layered", random_layered, "n", 100, "random layered DAG like the rl_* benchmarks"),
        GeneratorSpec("unet", unet, "depth", 4, "U-Net training graph, activations in MiB"),
        GeneratorSpec("transformer", transformer, "layers", 4, "transformer training graph, attention-heavy"),
    )
}


def describe_generators() -> str:
    """Describe each registered generator in one line (for CLI help)."""
    return "\n".join(spec.describe() for spec in GENERATORS.values())


# --- helpers ---------------------------------------------------------------------------------------


class _CostModel:
    """Turns element counts and FLOPs into an Op: bytes of fp32, cost in microseconds with seeded jitter."""

    def __init__(self, seed: int) -> None:
        self._rng = _rng(seed)

    def op(
        self,
        name: str,
        inputs: tuple[str, ...],
        elements: int,
        flops: float,
        *,
        saves: bool = True,
        saves_inputs: bool | None = None,
        saves_output: bool | None = None,
    ) -> Op:
        """Make an op whose output has ``elements`` floats; cost = FLOPs + output traffic, jittered, whole µs."""
        mem = elements * _FLOAT_BYTES
        base = flops / _FLOPS_PER_US + 2 * mem / _BYTES_PER_US
        cost = max(1.0, float(np.rint(base * self._rng.uniform(1 - _JITTER, 1 + _JITTER))))
        return Op(
            name,
            inputs,
            mem=mem,
            cost=cost,
            saves_inputs=saves if saves_inputs is None else saves_inputs,
            saves_output=saves if saves_output is None else saves_output,
        )


def _check_size(name: str, value: int, minimum: int) -> None:
    """Reject a size parameter below ``minimum`` (or not an int)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ConfigurationError(f"{name} must be an integer >= {minimum}, got {value!r}")


def _check_nodes(nodes: int, **sizes: int) -> None:
    """Reject size parameters whose graph would have ``nodes`` > MAX_NODES nodes, naming them."""
    if nodes > MAX_NODES:
        named = ", ".join(f"{name} = {value:,}" for name, value in sizes.items())
        raise ConfigurationError(f"{named} would build {nodes:,} nodes, more than the maximum of {MAX_NODES:,}")


def _rng(seed: int) -> np.random.Generator:
    """The random generator of a seed (an integer >= 0)."""
    _check_size("seed", seed, 0)
    return np.random.default_rng(seed)


def _layer_widths(n: int, max_width: int, rng: np.random.Generator) -> list[int]:
    """Draw the widths of a source layer, random middle layers holding n-2 nodes, and a sink layer."""
    widths = [1]
    remaining = n - 2
    while remaining > 0:
        widths.append(min(remaining, int(rng.integers(1, max_width, endpoint=True))))
        remaining -= widths[-1]
    return [*widths, 1]


def _adjacent_edges(start: int, middle: int, stop: int, density: float, rng: np.random.Generator) -> np.ndarray:
    """Draw random edges from nodes start..middle-1 to middle..stop-1; every node gets at least one."""
    mask = rng.random((middle - start, stop - middle)) < density
    lonely = np.flatnonzero(~mask.any(axis=0))
    mask[rng.integers(0, middle - start, size=lonely.size), lonely] = True
    lonely = np.flatnonzero(~mask.any(axis=1))
    mask[lonely, rng.integers(0, stop - middle, size=lonely.size)] = True
    rows, cols = np.nonzero(mask)
    return np.stack([rows + start, cols + middle], axis=1)


def _skip_edges(starts: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    """Draw ``count`` distinct edges from a node to one at least two layers further (fewer if fewer exist)."""
    n = int(starts[-1])
    layer_of = np.repeat(np.arange(len(starts) - 1), np.diff(starts))
    sources = np.arange(int(starts[-3])) if len(starts) > 3 else np.arange(0)
    first_target = starts[layer_of[sources] + 2]
    possible = int((n - first_target).sum())
    count = min(count, possible)
    if count == 0:
        return np.empty((0, 2), dtype=np.int64)
    if possible <= 4 * count:  # dense: choose among all candidates
        all_u = np.repeat(sources, n - first_target)
        all_v = np.concatenate([np.arange(lo, n) for lo in first_target])
        chosen = np.sort(rng.choice(possible, size=count, replace=False))
        return np.stack([all_u[chosen], all_v[chosen]], axis=1)
    found: dict[tuple[int, int], None] = {}
    while len(found) < count:  # sparse: sample with rejection of duplicates
        u = rng.choice(sources, size=count)
        lo = first_target[u]
        v = lo + (rng.random(count) * (n - lo)).astype(np.int64)
        for pair in zip(u.tolist(), v.tolist(), strict=True):
            if len(found) < count:
                found.setdefault(pair)
    return np.array(list(found), dtype=np.int64)
