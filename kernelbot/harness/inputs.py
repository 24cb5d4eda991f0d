"""Sandbox side, both processes: failures, and the input sets a timing rotates through and refreshes."""

from __future__ import annotations

import functools
from typing import Any

import torch


class Failure(Exception):
    """What went wrong with an evaluation, as the judge reports it (status, one-line reason, extra fields)."""

    def __init__(self, status: str, reason: str, **extra: Any) -> None:
        super().__init__(reason)
        self.status, self.reason, self.extra = status, reason, extra


MAX_INPUT_SET_BYTES = 512 * 1024 * 1024
MAX_INPUT_SETS = 64
# Each process keeps two copies of the sets it rotates (the pristine masters and what the calls get), and a
# measurement runs four sandboxes (two a side): the sets may take 1/MEMORY_SHARE of the device's memory, so
# all of them together stay under an eighth of it and the operators' own working sets have the rest. Total,
# not free, memory: what other processes (a subject's own allocations included) hold must not change how
# many sets one side rotates against another.
MEMORY_SHARE = 64


def clone(values: list[Any]) -> list[Any]:
    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]


def nbytes(values: list[Any]) -> int:
    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))


@functools.cache  # the device's total memory: fixed for the process, asked once, not every timing batch
def set_bytes_budget(device: str) -> int:
    """What the rotated input sets may take: MAX_INPUT_SET_BYTES, less on a GPU with little memory. The judge
    decides it and the subject is told (and checked)."""
    if device == "cuda" and torch.cuda.is_available():
        total = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
        return min(MAX_INPUT_SET_BYTES, total // MEMORY_SHARE)
    return MAX_INPUT_SET_BYTES


def input_sets_for(calls: int, per_set: int, budget: int = MAX_INPUT_SET_BYTES) -> int:
    """How many input sets a timing rotates through: one a call up to the caps (the judge checks the count)."""
    return max(1, min(calls, MAX_INPUT_SETS, budget // max(per_set, 1)))


def memory_note(device: str) -> str:
    """This process's peak and the device's free memory, for an out-of-memory message."""
    if device != "cuda" or not torch.cuda.is_available():
        return ""
    free, total = torch.cuda.mem_get_info()
    peak = torch.cuda.max_memory_allocated()
    gib = 1024**3
    return f" (this process peaked at {peak / gib:.1f} GiB; {free / gib:.1f} of {total / gib:.1f} GiB free on the GPU)"


# Elements up to which an input is reordered by a full random permutation; above, by a random cyclic shift
# and then a random order of BLOCKS equal blocks (BLOCKS! x n orders: none can be precomputed for). A full
# permutation of a million elements costs ~100 ms on one CPU core, both sides, every sample; the shift and
# the block order cost three copies.
PERMUTE_MAX = 1 << 14
BLOCKS = 64


def _order(flat: torch.Tensor, seed: int) -> tuple[Any, ...]:
    generator = torch.Generator(device=flat.device).manual_seed(seed)
    n = flat.numel()
    if n <= PERMUTE_MAX:
        return ("perm", torch.randperm(n, generator=generator, device=flat.device))
    shift = int(torch.randint(1, n, (1,), generator=generator, device=flat.device))
    blocks = torch.randperm(BLOCKS, generator=generator, device=flat.device)
    return ("blocks", shift, blocks)


def _reorder(flat: torch.Tensor, order: tuple[Any, ...]) -> None:
    if order[0] == "perm":
        flat.copy_(flat[order[1]])
        return
    _, shift, blocks = order
    rolled = flat.roll(shift)
    whole = flat.numel() // BLOCKS * BLOCKS  # the remainder (< BLOCKS elements) keeps its shifted place
    flat[:whole].copy_(rolled[:whole].view(BLOCKS, -1)[blocks].view(-1))
    flat[whole:].copy_(rolled[whole:])


def permute(input_sets: list[list[Any]], seed: int) -> None:
    """New contents for every floating input: its own values reordered by `seed`, which the judge picks
    afresh for each sample and sends only when the sample is prepared, so no subject can know (or compute
    for) the next sample's inputs ahead of time. The order is one of more than can be precomputed for
    (PERMUTE_MAX says which kind), the same for all inputs of one size and device in a sample. The multiset
    of values, and so the distribution the factory drew, stays as it was."""
    orders: dict[tuple[int, str], tuple[Any, ...]] = {}
    with torch.no_grad():
        for v in (v for values in input_sets for v in values):
            if isinstance(v, torch.Tensor) and v.is_floating_point() and v.numel() > 1 and v.is_contiguous():
                flat, key = v.view(-1), (v.numel(), str(v.device))
                if key not in orders:
                    orders[key] = _order(flat, seed)
                _reorder(flat, orders[key])


def restore(sets: list[list[Any]], masters: list[list[Any]]) -> None:
    with torch.no_grad():
        for values, trusted in zip(sets, masters, strict=True):
            for v, t in zip(values, trusted, strict=True):
                if isinstance(v, torch.Tensor):
                    v.copy_(t)


def refresh(sets: list[list[Any]], masters: list[list[Any]], seed: int) -> None:
    """The sample's inputs: the masters (which the subject never sees, so a write into its inputs is undone)
    reordered by this sample's seed. Each sample's inputs depend on its own seed alone."""
    restore(sets, masters)
    permute(sets, seed)
