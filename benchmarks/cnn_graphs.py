"""Training CNNs of 50-200 nodes, traced to graphs (issue #31: H-ILP within 1.05 x of Checkmate's optimum at 80 %).

VGG-11 and VGG-19 (torchvision's layer lists, BatchNorm-free, a quarter of the channels, 64 images of 64x64),
the examples' ResNet and U-Net, and a
MobileNet-style stack of depthwise-separable blocks, each traced with fake tensors (FLOP costs) and written as
``NAME.json``. The graphs are read by ``benchmarks/hilp_bench.py --graphs cnn:NAME`` (from ``benchmarks/cnn``).

  python benchmarks/cnn_graphs.py -o benchmarks/cnn
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))

from models import resnet, unet  # noqa: E402

from remat_models.io import write_graph  # noqa: E402
from remat_models.torch import extract  # noqa: E402

VGG_LAYERS = {
    "vgg11": [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "vgg19": [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M", 512, 512, 512, 512, "M"],
}
MIN_NODES, MAX_NODES = 50, 200


def vgg(layers: list[int | str], width: float = 0.25) -> nn.Module:
    """A VGG on 3x64x64 images with ``width`` times the channels, 10 classes."""
    modules: list[nn.Module] = []
    channels = 3
    for item in layers:
        if item == "M":
            modules.append(nn.MaxPool2d(2))
        else:
            out = max(8, int(int(item) * width))
            modules += [nn.Conv2d(channels, out, 3, padding=1), nn.ReLU()]
            channels = out
    return nn.Sequential(*modules, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, 10))


def mobilenet(blocks: int = 4, width: int = 32) -> nn.Module:
    """Depthwise-separable blocks (depthwise 3x3, pointwise 1x1, each with BatchNorm and ReLU6), 10 classes."""
    modules: list[nn.Module] = [nn.Conv2d(3, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU6()]
    for _ in range(blocks):
        modules += [
            nn.Conv2d(width, width, 3, padding=1, groups=width),
            nn.BatchNorm2d(width),
            nn.ReLU6(),
            nn.Conv2d(width, width, 1),
            nn.BatchNorm2d(width),
            nn.ReLU6(),
        ]
    return nn.Sequential(*modules, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(width, 10))


def models() -> dict[str, tuple[nn.Module, torch.Tensor, torch.Tensor, object]]:
    """Every model with a batch and its loss."""
    torch.manual_seed(0)
    images, labels = torch.randn(64, 3, 64, 64), torch.randint(0, 10, (64,))  # activations well above the weights
    found = {name: (vgg(layers), images, labels, F.cross_entropy) for name, layers in VGG_LAYERS.items()}
    found["mobilenet"] = (mobilenet(), images, labels, F.cross_entropy)
    for name, example in (("resnet", resnet(64)), ("unet", unet(64))):
        found[name] = (example.model, example.inputs, example.targets, example.loss_fn)
    return found


def main() -> None:
    """Write every graph of 50-200 nodes; print each one's node count."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--out", type=Path, default=ROOT / "benchmarks" / "cnn")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name, (model, inputs, targets, loss_fn) in models().items():
        graph = extract(model, inputs, loss_fn, targets, name=name).graph
        kept = MIN_NODES <= graph.n <= MAX_NODES
        if kept:
            write_graph(graph, args.out / f"{name}.json")
        print(f"{name}: {graph.n} nodes{'' if kept else ' (outside 50-200: not written)'}")


if __name__ == "__main__":
    main()
