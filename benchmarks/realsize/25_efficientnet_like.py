"""An EfficientNet-B0-like network at batch 32, 224^2: stem, seven MBConv blocks (expand, depthwise,
squeeze-excite, project), head and classifier. Many small kernels: launch overhead matters."""

import torch
from torch import nn

BATCH, SIZE, CLASSES = 32, 224, 1000
# (expansion, channels out, stride, kernel) per block
BLOCKS = [
    (1, 16, 1, 3),
    (6, 24, 2, 3),
    (6, 40, 2, 5),
    (6, 80, 2, 3),
    (6, 112, 1, 5),
    (6, 192, 2, 5),
    (6, 320, 1, 3),
]


class MBConv(nn.Module):
    def __init__(self, c_in: int, expand: int, c_out: int, stride: int, kernel: int) -> None:
        super().__init__()
        mid = c_in * expand
        self.expand = (
            nn.Sequential(nn.Conv2d(c_in, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.SiLU())
            if expand != 1
            else nn.Identity()
        )
        self.depthwise = nn.Sequential(
            nn.Conv2d(mid, mid, kernel, stride, kernel // 2, groups=mid, bias=False),
            nn.BatchNorm2d(mid),
            nn.SiLU(),
        )
        squeeze = max(1, c_in // 4)
        self.se = nn.Sequential(
            nn.AdaptiveAvgPool2d(1),
            nn.Conv2d(mid, squeeze, 1),
            nn.SiLU(),
            nn.Conv2d(squeeze, mid, 1),
            nn.Sigmoid(),
        )
        self.project = nn.Sequential(nn.Conv2d(mid, c_out, 1, bias=False), nn.BatchNorm2d(c_out))
        self.residual = stride == 1 and c_in == c_out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.depthwise(self.expand(x))
        y = self.project(y * self.se(y))
        return x + y if self.residual else y


class Model(nn.Module):
    def __init__(self, classes: int) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32), nn.SiLU())
        blocks, c = [], 32
        for expand, c_out, stride, kernel in BLOCKS:
            blocks.append(MBConv(c, expand, c_out, stride, kernel))
            c = c_out
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Sequential(
            nn.Conv2d(c, 1280, 1, bias=False), nn.BatchNorm2d(1280), nn.SiLU(), nn.AdaptiveAvgPool2d(1)
        )
        self.classifier = nn.Linear(1280, classes)
        # Running statistics as a trained network has them. The harness times in eval mode, where freshly
        # made BatchNorms (mean 0, variance 1) let the signal vanish through the blocks: the output was the
        # classifier's bias for every input, and kernelbot rightly refused it as not depending on its inputs.
        self._calibrate()

    @torch.no_grad()
    def _calibrate(self) -> None:
        norms = [m for m in self.modules() if isinstance(m, nn.BatchNorm2d)]
        for norm in norms:
            norm.momentum = 1.0  # the running statistics become the calibration batch's
        self.train()
        self(torch.randn(8, 3, 64, 64))
        for norm in norms:
            norm.momentum = 0.1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.head(self.blocks(self.stem(x))), 1))


def get_inputs():
    return [torch.randn(BATCH, 3, SIZE, SIZE)]


def get_init_inputs():
    return [CLASSES]
