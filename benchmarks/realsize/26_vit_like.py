"""A ViT-S-like network at batch 32, 224^2: 16x16 patches, 8 pre-norm transformer blocks of width 384
(6 heads, MLP 1536), class token, classifier. Eager it is many small kernels (~1.5 ms on an H200):
the case for CUDA-graph capture."""

import torch
from torch import nn

BATCH, SIZE, PATCH, WIDTH, HEADS, DEPTH, CLASSES = 32, 224, 16, 384, 6, 8, 1000


class Block(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.norm1(x)
        x = x + self.attn(y, y, y, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class Model(nn.Module):
    def __init__(self, classes: int) -> None:
        super().__init__()
        self.patch = nn.Conv2d(3, WIDTH, PATCH, PATCH)
        tokens = (SIZE // PATCH) ** 2 + 1
        self.cls = nn.Parameter(0.02 * torch.randn(1, 1, WIDTH))
        self.pos = nn.Parameter(0.02 * torch.randn(1, tokens, WIDTH))
        self.blocks = nn.Sequential(*[Block(WIDTH, HEADS) for _ in range(DEPTH)])
        self.norm = nn.LayerNorm(WIDTH)
        self.classifier = nn.Linear(WIDTH, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        return self.classifier(self.norm(self.blocks(x))[:, 0])


def get_inputs():
    return [torch.randn(BATCH, 3, SIZE, SIZE)]


def get_init_inputs():
    return [CLASSES]
