"""Adversarial-suite operator in declared form: y = 2x + 1 over several shapes."""

import torch


def scale(x):
    return x * 2.0 + 1.0


def make_inputs(shape, dtype, device):
    return [torch.randn(*shape, dtype=dtype, device=device)]
