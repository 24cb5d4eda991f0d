"""Level 3: a small CNN classifier (three conv-BatchNorm-ReLU stages, pooling, a linear head) at batch 8, eval."""

import torch
from torch import nn

BATCH, CLASSES = 8, 10


def stage(c_in: int, c_out: int) -> list[nn.Module]:
    return [nn.Conv2d(c_in, c_out, kernel_size=3, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU()]


class Model(nn.Module):
    def __init__(self, classes: int) -> None:
        super().__init__()
        self.features = nn.Sequential(
            *stage(3, 32), *stage(32, 64), nn.MaxPool2d(2), *stage(64, 128), nn.AdaptiveAvgPool2d(1)
        )
        self.head = nn.Linear(128, classes)
        with torch.no_grad():  # non-trivial running statistics, as after training
            for m in self.modules():
                if isinstance(m, nn.BatchNorm2d):
                    m.running_mean.uniform_(-0.2, 0.2)
                    m.running_var.uniform_(0.5, 2.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.features(x), 1))


def get_inputs():
    return [torch.randn(BATCH, 3, 32, 32)]


def get_init_inputs():
    return [CLASSES]
