#!/usr/bin/env python3
"""Golden test fixtures from PyTorch: small torchvision-style ResNets with random weights and realistic
BatchNorm statistics, fixed random inputs, and their logits.

Each net is built from torchvision's own BasicBlock/Bottleneck classes with the exact torchvision layout and
tensor names, only narrower (base width 8/16 instead of 64) so the fixtures stay small. For every net NAME this
writes, under tests/fixtures/:
  NAME.safetensors      the state_dict (F32), as safetensors.torch.save_file writes it
  NAME.io.safetensors   "input": NHWC F16 [N, H, W, 3] (what our preprocessing produces) and
                        "logits": F32 [N, classes], computed by PyTorch in float64 from that FP16 input

Usage: python3 tools/make_fixtures.py [--out tests/fixtures] [--seed 1234]   (CPU or GPU; needs torch, torchvision)
"""
import argparse
import os

import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from requires import require  # noqa: E402

torch, safetensors_torch, tv_resnet = require("torch", "safetensors.torch", "torchvision.models.resnet")
nn = torch.nn
save_file = safetensors_torch.save_file
BasicBlock, Bottleneck, ResNet = tv_resnet.BasicBlock, tv_resnet.Bottleneck, tv_resnet.ResNet


class NarrowResNet(ResNet):
    """torchvision.models.ResNet with the stem/layer1 width `base` instead of 64 (same names and structure)."""

    def __init__(self, block, layers, base, num_classes, groups=1, width_per_group=64):
        nn.Module.__init__(self)
        self._norm_layer = nn.BatchNorm2d
        self.inplanes = base
        self.dilation = 1
        self.groups = groups
        self.base_width = width_per_group
        self.conv1 = nn.Conv2d(3, base, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(base)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(block, base, layers[0])
        self.layer2 = self._make_layer(block, base * 2, layers[1], stride=2)
        self.layer3 = self._make_layer(block, base * 4, layers[2], stride=2)
        self.layer4 = self._make_layer(block, base * 8, layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(base * 8 * block.expansion, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")


NETS = {
    # name: (block, layers, base, groups, width_per_group)
    "basic_narrow": (BasicBlock, [2, 2, 2, 2], 8, 1, 64),        # ResNet-18 layout
    "bottleneck_narrow": (Bottleneck, [3, 4, 6, 3], 8, 1, 64),   # ResNet-50 layout
    "grouped_narrow": (Bottleneck, [1, 2, 2, 1], 16, 4, 16),     # ResNeXt-style grouped 3x3 convs
}
CLASSES, SIZE, BATCH = 10, 64, 3


def realistic_batchnorm(model, generator):
    """Random affine BN parameters, then running statistics from a few training-mode batches."""
    for name, m in model.named_modules():
        if isinstance(m, nn.BatchNorm2d):
            # The last BatchNorm of each residual branch gets small gains, as in trained ResNets (and
            # torchvision's zero_init_residual): otherwise a random deep net amplifies rounding chaotically and
            # no FP16 engine (PyTorch's included) could match its FP64 logits.
            last = name.endswith("bn3") or (name.endswith("bn2") and isinstance(model.layer1[0], BasicBlock))
            low, span = (0.1, 0.3) if last else (0.5, 1.0)
            m.weight.data = low + span * torch.rand(m.weight.shape, generator=generator)
            m.bias.data = 0.2 * torch.randn(m.bias.shape, generator=generator)
            m.momentum = None  # cumulative average over the batches below
    model.train()
    with torch.no_grad():
        for _ in range(4):
            model(torch.randn(8, 3, SIZE, SIZE, generator=generator))
    model.eval()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures"))
    parser.add_argument("--seed", type=int, default=1234)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for index, (name, (block, layers, base, groups, wpg)) in enumerate(NETS.items()):
        generator = torch.Generator().manual_seed(args.seed + index)
        torch.manual_seed(args.seed + index)
        model = NarrowResNet(block, layers, base, CLASSES, groups, wpg)
        realistic_batchnorm(model, generator)
        state = {k: v.contiguous() for k, v in model.state_dict().items()}
        save_file(state, os.path.join(args.out, f"{name}.safetensors"))

        x = torch.randn(BATCH, 3, SIZE, SIZE, generator=generator).half()  # FP16, as the engines get it
        with torch.no_grad():
            logits = model.double()(x.double()).float()
        io = {"input": x.permute(0, 2, 3, 1).contiguous(), "logits": logits.contiguous()}
        save_file(io, os.path.join(args.out, f"{name}.io.safetensors"))
        params = sum(v.numel() for v in state.values())
        print(f"{name}: {params} parameters, logits[0][:3] = {logits[0, :3].tolist()}, top-1 = {logits.argmax(1).tolist()}")


if __name__ == "__main__":
    main()
