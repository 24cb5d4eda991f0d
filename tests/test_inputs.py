"""Inputs for each seed: made on the operator's device directly, or on the CPU when the factory needs it."""

from __future__ import annotations

import pytest
import torch

from kernelbot.harness.loader import make_inputs


def test_inputs_are_made_on_the_device_and_a_seed_means_the_same_inputs() -> None:
    seen: list[str] = []

    def factory() -> list[torch.Tensor]:
        seen.append(torch.empty(0).device.type)  # where a factory's tensors are born
        return [torch.randn(4, 3), 2.0]

    (x, scale) = make_inputs(factory, 7, "meta")  # "meta" stands for a GPU here: a non-CPU device
    assert seen == ["meta"] and x.device.type == "meta" and scale == 2.0
    first, again, other = (make_inputs(factory, s, "cpu")[0] for s in (7, 7, 8))
    assert torch.equal(first, again) and not torch.equal(first, other)


def test_a_factory_that_needs_the_cpu_falls_back_to_it_with_the_same_seed() -> None:
    seen: list[str] = []

    def factory() -> list[torch.Tensor]:
        seen.append(torch.empty(0).device.type)
        return [torch.from_numpy(torch.randn(5).numpy())]  # .numpy() fails off the CPU

    (x,) = make_inputs(factory, 3, "meta")
    assert seen == ["meta", "cpu"] and x.device.type == "meta"
    (cpu,) = make_inputs(factory, 3, "cpu")
    torch.manual_seed(3)
    assert torch.equal(cpu, torch.randn(5))  # re-seeded before the CPU attempt


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_a_gpu_the_inputs_are_born_there_and_repeat_per_seed() -> None:
    seen: list[str] = []

    def factory() -> list[torch.Tensor]:
        seen.append(torch.empty(0).device.type)
        return [torch.randn(1024, 1024)]

    first, again = (make_inputs(factory, 11, "cuda")[0] for _ in range(2))
    assert seen == ["cuda", "cuda"] and first.is_cuda and torch.equal(first, again)
