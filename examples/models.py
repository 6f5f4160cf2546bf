"""Small example models for the PyTorch front end: MLP, ResNet, U-Net, GPT-2-style transformer.

Each builder takes ``batch`` and returns ``(model, inputs, targets, loss_fn)`` with seeded weights
and data, sized so CPU tests stay fast (``remat graph from-torch examples/models.py:NAME``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import nn
from torch.nn import functional as F


class Example(NamedTuple):
    """A model with one sample batch and its loss function ``loss_fn(output, targets)``."""

    model: nn.Module
    inputs: torch.Tensor
    targets: torch.Tensor
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def mlp(batch: int = 256, width: int = 32, depth: int = 8) -> Example:
    """A ReLU multilayer perceptron on 32 features, 10 classes, cross-entropy."""
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    features = 32
    for _ in range(depth - 1):
        layers += [nn.Linear(features, width), nn.ReLU()]
        features = width
    model = nn.Sequential(*layers, nn.Linear(features, 10))
    return Example(model, torch.randn(batch, 32), torch.randint(0, 10, (batch,)), F.cross_entropy)


class BasicBlock(nn.Module):
    """ResNet basic block: two 3x3 conv-BN layers with an identity (or 1x1 strided) shortcut."""

    def __init__(self, inplanes: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or inplanes != planes:
            self.shortcut = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Residual forward with in-place ReLUs (exercises functionalization)."""
        out = F.relu(self.bn1(self.conv1(x)), inplace=True)
        out = self.bn2(self.conv2(out))
        out += self.shortcut(x)
        return F.relu(out, inplace=True)


class ResNet(nn.Module):
    """A small ResNet: stem, three stages of basic blocks, global average pool, linear head."""

    def __init__(self, widths: tuple[int, ...] = (8, 16, 32), classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, widths[0], 3, 1, 1, bias=False), nn.BatchNorm2d(widths[0]), nn.ReLU())
        blocks, inplanes = [], widths[0]
        for i, planes in enumerate(widths):
            blocks.append(BasicBlock(inplanes, planes, 1 if i == 0 else 2))
            inplanes = planes
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Linear(inplanes, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits for a batch of images."""
        return self.head(torch.flatten(F.adaptive_avg_pool2d(self.blocks(self.stem(x)), 1), 1))


def resnet(batch: int = 4) -> Example:
    """A 3-stage ResNet with BatchNorm on 16x16 RGB images, 10 classes, cross-entropy."""
    torch.manual_seed(0)
    return Example(ResNet(), torch.randn(batch, 3, 16, 16), torch.randint(0, 10, (batch,)), F.cross_entropy)


def _double_conv(cin: int, cout: int) -> nn.Sequential:
    """Two 3x3 convolutions with GroupNorm and ReLU."""
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, padding=1),
        nn.GroupNorm(2, cout),
        nn.ReLU(inplace=True),
        nn.Conv2d(cout, cout, 3, padding=1),
        nn.ReLU(inplace=True),
    )


class UNet(nn.Module):
    """A two-level U-Net: max-pool down, transposed-conv up, skip connections by concatenation."""

    def __init__(self, channels: int = 1, base: int = 8) -> None:
        super().__init__()
        self.down1 = _double_conv(channels, base)
        self.down2 = _double_conv(base, 2 * base)
        self.bottom = _double_conv(2 * base, 4 * base)
        self.up2 = nn.ConvTranspose2d(4 * base, 2 * base, 2, stride=2)
        self.dec2 = _double_conv(4 * base, 2 * base)
        self.up1 = nn.ConvTranspose2d(2 * base, base, 2, stride=2)
        self.dec1 = _double_conv(2 * base, base)
        self.out = nn.Conv2d(base, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Per-pixel logits of the same size as the input."""
        d1 = self.down1(x)
        d2 = self.down2(F.max_pool2d(d1, 2))
        bottom = self.bottom(F.max_pool2d(d2, 2))
        u2 = self.dec2(torch.cat([self.up2(bottom), d2], dim=1))
        u1 = self.dec1(torch.cat([self.up1(u2), d1], dim=1))
        return self.out(u1)


def unet(batch: int = 2) -> Example:
    """A U-Net on 1x16x16 images with a binary mask target, BCE-with-logits loss."""
    torch.manual_seed(0)
    inputs = torch.randn(batch, 1, 16, 16)
    return Example(UNet(), inputs, (inputs > 0).float(), F.binary_cross_entropy_with_logits)


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention written out (matmul, mask, softmax) so every op is visible."""

    def __init__(self, dim: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Attention over the sequence dimension with a causal mask."""
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(c // self.heads)
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        weights = self.dropout(scores.masked_fill(~mask, float("-inf")).softmax(dim=-1))
        return self.proj((weights @ v).transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    """Pre-norm transformer block: attention and GELU MLP, each with a residual connection."""

    def __init__(self, dim: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, heads, dropout)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim), nn.Dropout(dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Two residual sub-layers."""
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """A small GPT-2-style language model with learned positions and tied input/output embeddings."""

    def __init__(self, vocab: int = 64, seq: int = 16, dim: int = 32, heads: int = 2, layers: int = 2) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(seq, dim)
        self.drop = nn.Dropout(0.1)
        self.blocks = nn.Sequential(*(Block(dim, heads, 0.1) for _ in range(layers)))
        self.ln_f = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.wte.weight

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """Next-token logits of shape (batch, seq, vocab)."""
        positions = torch.arange(idx.shape[1], device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(positions))
        return self.head(self.ln_f(self.blocks(x)))


def lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of next-token logits."""
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def gpt2(batch: int = 2, seq: int = 16) -> Example:
    """A 2-layer GPT-2-style model (dropout 0.1) on random tokens, next-token cross-entropy."""
    torch.manual_seed(0)
    model = GPT(seq=seq)
    tokens = torch.randint(0, 64, (batch, seq + 1))
    return Example(model, tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous(), lm_loss)


EXAMPLES: dict[str, Callable[..., Example]] = {"mlp": mlp, "resnet": resnet, "unet": unet, "gpt2": gpt2}
