"""Sandbox side, both processes: failures, and the input sets a timing rotates through and refreshes."""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Callable
from typing import Any

import torch

# Bound before any subject code runs (see without_grad).
_grad_enabled, _set_grad = torch.is_grad_enabled, torch._C._set_grad_enabled
# The refresh calls methods of the subject's own tensors by these, never through the object: a method set on
# one tensor object overrides its class's (a reviewer's `b.view = ...` wrote the set and computed the product
# inside the refresh, ~10x eager). Attributes such as .layout and .shape are data descriptors: not overridable.
_T = torch.Tensor
_view, _copy, _numel, _floating, _complex, _contiguous = (
    _T.view,
    _T.copy_,
    _T.numel,
    _T.is_floating_point,
    _T.is_complex,
    _T.is_contiguous,
)
_empty, _ge, _le, _all, _item, _getitem = torch.empty, _T.ge, _T.le, _T.all, _T.item, _T.__getitem__
# A set's tensor must carry no dispatch key its master lacks: a neg bit set by a timed call sent the refresh's
# own view and copy of it to a Negative-key kernel of the subject's (attacker round 24), and an input swapped
# in place for a meta tensor (torch.utils.swap_tensors) to a Meta-key one (round 25). It may lack one its
# master has: a clone resolves a conjugate view. The key sets' raw bits, by functions bound here.
_dispatch_keys, _raw_keys = torch._C._dispatch_keys, torch._C.DispatchKeySet.raw_repr
_crow, _ccol, _cols, _rows, _values = (
    _T.crow_indices,
    _T.ccol_indices,
    _T.col_indices,
    _T.row_indices,
    _T.values,
)


class Failure(Exception):
    """What went wrong with an evaluation, as the judge reports it (status, one-line reason, extra fields)."""

    def __init__(self, status: str, reason: str, **extra: Any) -> None:
        super().__init__(reason)
        self.status, self.reason, self.extra = status, reason, extra


MAX_INPUT_SET_BYTES = 512 * 1024 * 1024
# One set a call up to this many: a set given twice in a sample lets a cache answer the second call (attacker
# round 6: 2.3x eager at 64 sets, the calls a sample chosen while a single set was called back to back).
MAX_INPUT_SETS = 1024
# Each process keeps two copies of the sets it rotates (the pristine masters and what the calls get), and a
# measurement runs four sandboxes (two a side): the sets may take 1/MEMORY_SHARE of the device's memory, so
# all of them together stay under an eighth of it and the operators' own working sets have the rest. Total,
# not free, memory: what other processes (a subject's own allocations included) hold must not change how
# many sets one side rotates against another.
MEMORY_SHARE = 64


# Sparse matrices an operator may take as inputs (SpMV, SpMM): the compressed layouts, whose storage is three
# dense tensors. A refresh reorders their values and keeps their pattern; COO (indices that may be uncoalesced)
# is not supported: the operator converts with .to_sparse_csr().
COMPRESSED = (torch.sparse_csr, torch.sparse_bsr, torch.sparse_csc, torch.sparse_bsc)


def parts(v: torch.Tensor) -> list[torch.Tensor]:
    """A tensor's storage as dense tensors: itself, or a compressed sparse matrix's two index arrays and
    its values (each aliasing the matrix, so writing one writes the matrix)."""
    if v.layout in (torch.sparse_csr, torch.sparse_bsr):
        return [_crow(v), _cols(v), _values(v)]
    if v.layout in (torch.sparse_csc, torch.sparse_bsc):
        return [_ccol(v), _rows(v), _values(v)]
    if v.layout != torch.strided:
        raise Failure(
            "operator_error",
            f"an input has layout {v.layout}: kernelbot takes dense tensors and compressed sparse matrices "
            "(CSR, CSC, BSR, BSC); convert it in get_inputs(), e.g. .to_sparse_csr()",
        )
    return [v]


def same_tensor(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal tensors: the same layout, shape and storage (sparse matrices compared part by part)."""
    if a.layout != b.layout or a.shape != b.shape or a.dtype != b.dtype:
        return False
    return all(x.dtype == y.dtype and torch.equal(x, y) for x, y in zip(parts(a), parts(b), strict=True))


def clone(values: list[Any]) -> list[Any]:
    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]


def nbytes(values: list[Any]) -> int:
    return sum(p.numel() * p.element_size() for v in values if isinstance(v, torch.Tensor) for p in parts(v))


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


def out_of_memory(who: str, exc: BaseException) -> str:
    """One line for a CUDA out-of-memory error: who ran out, the memory at hand, and the fix."""
    first = str(exc).splitlines()[0].split(". GPU")[0] if str(exc) else "CUDA out of memory"
    return (
        f"{who} ran out of GPU memory{memory_note('cuda')}: {first}; give it a GPU with more free memory "
        "(no other processes on it) or time a smaller shape"
    )


# Elements up to which an input is reordered by a full random permutation (~100 ms a million elements on
# one CPU core, both sides, every sample: too slow above). Above, in blocks of BLOCK elements: the blocks
# in a random order, and inside each block a random affine permutation i -> (a*i + b) mod BLOCK (a coprime
# to it; the tail gets one of its own). Neighbours land far apart, so no row of the new input is a window
# of the master: a random shift (or a shift and an order of blocks) kept rows whole, and a row-wise
# operator's outputs could then be tabled for every shift at load time and gathered when timed. Each
# block's reads stay inside 256 KiB of the master (cache-resident), and above INDEX_MAX nothing of n elements is indexed.
PERMUTE_MAX = 1 << 14
BLOCK = 1 << 16
BLOCKS_AT_ONCE = 256  # blocks gathered per step: a bounded temporary for a multi-GB input
# Up to this many elements a block order is also kept as one index of the positions it reads (at most 8 MiB,
# made once a refresh per input position and shared by the sets), the two orders and the coin folded into
# it: each set is then gathered by one index_select, 3-4x faster than block by block on the CPU runner
# (benchmarks/results/2026-12-07-cpu-refresh/), where a short operator's sample rotates dozens of small sets,
# every one refreshed before every sample. Above it the index is not made: it costs 8 bytes an element (a
# multi-GB input's would not fit beside it), and for one set it costs more to make than it saves (4M elements:
# 118 ms against 54 ms by blocks; with four sets it would pay, 151 against 211 ms).
INDEX_MAX = 1 << 20
_index_select, _repeat, _lt = _T.index_select, _T.repeat, _T.lt
_no_torch_function = torch._C.DisableTorchFunction
_issubclass = issubclass


def _affine(m: int, pick: random.Random, device: torch.device) -> torch.Tensor:
    a = 1
    if m > 4:  # a in [2, m - 2]: neither 1 nor m - 1, which keep neighbours together (reversed)
        limit = min(m - 1, (1 << 62) // m)  # a*i stays inside int64
        a = pick.randrange(2, limit)
        while math.gcd(a, m) != 1:
            a = pick.randrange(2, limit)
    index = torch.arange(m, device=device, dtype=torch.int64)
    return index.mul_(a).add_(pick.randrange(m)).remainder_(m)


def _one_order(n: int, device: torch.device, seed: int) -> tuple[Any, ...]:
    generator = torch.Generator(device=device).manual_seed(seed)
    if n <= PERMUTE_MAX:
        return ("perm", torch.randperm(n, generator=generator, device=device))
    pick = random.Random(seed)
    blocks, tail = divmod(n, BLOCK)
    order = torch.randperm(blocks, generator=generator, device=device) if blocks else None
    inner = _affine(BLOCK, pick, device) if blocks else None
    last = _affine(tail, pick, device) if tail else None
    if n > INDEX_MAX:
        return ("blocks", order, inner, last)
    index = _empty(n, dtype=torch.int64, device=device)  # the positions _gather would read, in order
    if order is not None and inner is not None:
        _copy(
            _view(_getitem(index, slice(None, blocks * BLOCK)), (blocks, BLOCK)), _gather_index(order, inner)
        )
    if last is not None:
        _copy(_getitem(index, slice(blocks * BLOCK, None)), last.add_(blocks * BLOCK))
    return ("index", index)


def _gather_index(order: torch.Tensor, inner: torch.Tensor) -> torch.Tensor:
    """Block order[r]'s element inner[c] for every (r, c): what _gather's 2-D read takes, as positions."""
    return _getitem(order, (slice(None), None)).mul(BLOCK).add(_getitem(inner, (None, slice(None))))


def _order(n: int, device: torch.device, seed: int, draw: bool) -> tuple[Any, ...]:
    """Two independent orders of n elements, and which of them each position takes (a random half, one
    pattern for every block): each new value is a draw from the master's values, so their multiset changes
    from sample to sample. A reordering alone kept it, and a statistic of the values (a quantile, a norm)
    could be kept by a candidate from sample to sample (attacker round 8: a percentile clip, 113x eager).
    Without `draw` (integer and boolean values, see _reorder) the first order alone."""
    if not draw:
        return (_one_order(n, device, seed), None, None, None)
    generator = torch.Generator(device=device).manual_seed(seed ^ 0x2545F4914F6CDD1D)
    # One draw below another (a fair coin), by Tensor.lt: not `< 0.5`, since torch's Python wrapper of `<` runs
    # import statements and a Python float given to an operator made torch's C++ import a module, each import
    # reading the spec of a module in sys.modules (attacker round 26's probe ran a property of ModuleSpec
    # there, inside the refresh); and not against a tensor constant, which is state the subject can reach (round
    # 28 gave one a subclass in place; its values, changed, would have biased the draw).
    m = min(n, BLOCK)
    mask = _lt(
        torch.rand(m, generator=generator, device=device), torch.rand(m, generator=generator, device=device)
    )
    first, second = _one_order(n, device, seed), _one_order(n, device, seed ^ 0x5DEECE66D)
    if first[0] != "index":
        return (first, second, mask, None)
    # Both orders as positions: which one each position takes (the blocks' pattern repeated, the tail's from
    # its start) folded into one index, made once a refresh per input position and shared by its sets; each
    # set is then one index_select (not two and a where).
    pattern = _getitem(_repeat(mask, -(-n // BLOCK)), slice(None, n))
    return (first, second, mask, torch.where(pattern, first[1], second[1]))


def _gather(source: torch.Tensor, order: tuple[Any, ...], rows: slice | None) -> torch.Tensor:
    """source reordered: the whole of it ("perm"), a run of its blocks, or (rows None) its tail."""
    if order[0] == "perm":
        return source[order[1]]
    if order[0] == "index":
        return _index_select(source, 0, order[1])
    _, blocks, inner, tail = order
    if rows is None:
        return source[blocks.numel() * BLOCK if blocks is not None else 0 :][tail]
    src = source[: blocks.numel() * BLOCK].view(-1, BLOCK)
    return src[blocks[rows][:, None], inner[None, :]]


def _reorder(flat: torch.Tensor, source: torch.Tensor, order: tuple[Any, ...]) -> None:
    """flat = source's values drawn by the two orders (source is the untouched master, so every gather is out
    of place). Integer and boolean values by the first order alone: reordered, their multiset kept, so
    indices that were distinct stay distinct (an index_put's or a scatter's result stays defined)."""
    first, second, mask, drawn_index = order
    if first[0] == "index":  # one gather: by the folded index, or by the first order's alone
        _copy(flat, _index_select(source, 0, first[1] if drawn_index is None else drawn_index))
        return

    def drawn(rows: slice | None, pattern: torch.Tensor | None) -> torch.Tensor:
        one = _gather(source, first, rows)
        return one if pattern is None else torch.where(pattern, one, _gather(source, second, rows))

    if first[0] == "perm":
        flat.copy_(drawn(None, mask))
        return
    _, blocks, _, tail = first
    whole = 0
    if blocks is not None:
        whole = blocks.numel() * BLOCK
        dst = flat[:whole].view(-1, BLOCK)
        for start in range(0, blocks.numel(), BLOCKS_AT_ONCE):
            rows = slice(start, start + BLOCKS_AT_ONCE)
            dst[rows].copy_(drawn(rows, None if mask is None else mask[None, :]))
    if tail is not None:
        flat[whole:].copy_(drawn(None, None if mask is None else mask[: tail.numel()]))


def _reorderable(master: torch.Tensor) -> bool:
    """Whether a refresh reorders an input's values (else it restores them). Floating and complex ones, and
    integer and boolean ones too (indices, labels, masks: the same in every sample, an embedding lookup's
    outputs could be cached by a candidate, 230x eager on the CPU), unless sorted (either way) along their
    last dimension in every row: offsets, pointers, lengths, boundaries, a structure a permutation would
    break. One that breaks all the same makes the judge draw the inputs afresh (Judge._drawn_afresh)."""
    if _numel(master) <= 1:
        return False
    if _floating(master) or _complex(master):
        return True
    if master.shape[-1] < 2:
        return True
    later, earlier = _getitem(master, (..., slice(1, None))), _getitem(master, (..., slice(None, -1)))
    return not (_item(_all(_ge(later, earlier))) or _item(_all(_le(later, earlier))))


def without_grad(fn: Any, *args: Any) -> Any:
    """fn(*args) with grad mode off, by functions bound at import. Not `with torch.no_grad()`: that class's
    __exit__ is looked up when the block ends, after a refresh has written every input or a sample's calls
    are done (attacker round 6 replaced it and did the sample's work there, uncharged: reward 3)."""
    enabled = _grad_enabled()
    _set_grad(False)
    try:
        return fn(*args)
    finally:
        _set_grad(enabled)


def refresh(
    sets: list[list[Any]],
    masters: list[list[Any]],
    seed: int,
    *,
    renew: bool = False,
    drawn: list[list[Any]] | None = None,
) -> None:
    """The sample's inputs, from the masters (which the subject never sees, so a write into its inputs is
    undone): every input's values drawn from its master's by `seed` (_order), which the judge picks afresh
    for each sample and sends only when the sample is prepared, so no subject can know (or compute for) the
    next sample's inputs ahead of time; the rest restored (see _reorderable). Each input position has its
    own orders, shared by the sets (PERMUTE_MAX says which kind): one order for two inputs of a size kept
    their pairs, and a loss or a dot product of them was the same every sample. The values stay the
    master's (the distribution the factory drew), their multiset changes; each sample's inputs depend on its
    own seed alone.

    `drawn` (draw()'s rows, for an operator whose outputs a reordering does not change: a full sum, a sort):
    each set's dense inputs are written from its row instead. `renew` (an operator whose sparse matrix is new on
    every call): each sparse matrix is then replaced in its set by `renewed`.

    With torch-function dispatch off: no tensor subclass's __torch_function__ runs in here, whatever tensor
    it reaches (attacker round 28 gave a module constant a subclass in place, and its hook ran for every
    torch.where of the refresh). DisableTorchFunction is an immutable C type: its __enter__ is its own."""
    if drawn is not None:
        _rows_of_tensors(drawn, sets)
    with _no_torch_function():
        without_grad(_refresh, sets, masters, seed, renew, drawn)


def draw(factory: Callable[[int], list[Any]], seed: int, n: int) -> list[list[Any]]:
    """n sets of inputs drawn afresh from the operator's factory (its get_inputs), set i with seed + i, for
    refresh(drawn=...). With torch functions on: the factory's torch.device mode puts its tensors on the GPU
    directly (loader.make_inputs). The worker runs this as a job on the subject's thread: the factory's own
    lookups (torch.cuda's names) are in namespaces no check watches, and a hook there ran on the main thread."""
    return without_grad(_draw, factory, seed, n)


def _draw(factory: Callable[[int], list[Any]], seed: int, n: int) -> list[list[Any]]:
    return [list(factory(seed + number)) for number in range(n)]


def _rows_of_tensors(drawn: Any, sets: list[list[Any]]) -> None:
    """Drawn rows as refresh reads them, by exact type: made on the subject's thread, a list or tensor of a
    class of its own would run its code in the refresh's reads (each tensor is checked as it is written)."""
    if (
        type(drawn) is not list
        or len(drawn) != len(sets)
        or any(
            type(row) is not list or len(row) != len(values) for row, values in zip(drawn, sets, strict=True)
        )
    ):
        raise Failure("rejected", "anti-hack check: the inputs drawn afresh were not plain lists")


def _refresh(
    sets: list[list[Any]],
    masters: list[list[Any]],
    seed: int,
    renew: bool,
    drawn: list[list[Any]] | None,
) -> None:
    orders: dict[tuple[int, int, int], tuple[Any, ...]] = {}
    reorder: dict[tuple[int, int], bool] = {}  # decided once per input part, on the first set's master
    for number, (values, trusted) in enumerate(zip(sets, masters, strict=True)):
        made = drawn[number] if drawn is not None else None
        for position, (tensor, master) in enumerate(zip(values, trusted, strict=True)):
            if not _issubclass(type(master), torch.Tensor):  # by its type: isinstance reads __class__, code
                continue
            # Its __class__ reassigned: a subclass's hooks would run here.
            if type(tensor) is not type(master):
                raise Failure("rejected", "anti-hack check: an input tensor's class was changed")
            if _raw_keys(_dispatch_keys(tensor)) & ~_raw_keys(_dispatch_keys(master)):
                raise Failure(
                    "rejected",
                    "anti-hack check: an input tensor's dispatch keys were changed (a neg or conj bit set, "
                    "or the tensor swapped for one on another device)",
                )
            sparse = tensor.layout in COMPRESSED
            if made is not None and not sparse:
                _fill(tensor, made[position], position)
                continue
            # A sparse matrix: its pattern (the index arrays, parts 0 and 1) restored, its values reordered.
            for k, (v, t) in enumerate(zip(parts(tensor), parts(master), strict=True)):
                if (position, k) not in reorder:
                    reorder[position, k] = not (sparse and k < 2) and _reorderable(t)
                if not reorder[position, k]:
                    _copy(v, t)
                    continue
                key = (position, k, _numel(v))  # a sparse matrix's nonzeros, a length, may differ by set
                if key not in orders:
                    orders[key] = _order(
                        _numel(v),
                        v.device,
                        (seed + 7919 * (4 * position + k)) % (1 << 62),
                        draw=_floating(t) or _complex(t),
                    )
                if _contiguous(v):
                    _reorder(_view(v, -1), t.reshape(-1), orders[key])
                else:  # a transposed or strided input: reordered in its own (logical) order, then written
                    flat = _empty(_numel(v), dtype=v.dtype, device=v.device)
                    _reorder(flat, t.reshape(-1), orders[key])
                    _copy(v, _view(flat, v.shape))
    if renew:
        for values in sets:
            for i, tensor in enumerate(values):
                if _issubclass(type(tensor), torch.Tensor) and tensor.layout in COMPRESSED:
                    values[i] = renewed(tensor)


def _fill(tensor: torch.Tensor, drawn: Any, position: int) -> None:
    """A fresh draw written into the set's own tensor (it stays where it is: a CUDA graph replays on it)."""
    if type(drawn) is not type(tensor):  # by its type: a subclass's hooks (and its own .shape) would run here
        raise Failure("rejected", f"anti-hack check: input {position} drawn afresh is not a plain tensor")
    if _raw_keys(_dispatch_keys(drawn)) & ~_raw_keys(_dispatch_keys(tensor)):
        raise Failure(
            "rejected", f"anti-hack check: input {position} drawn afresh has dispatch keys of its own"
        )
    if drawn.shape != tensor.shape or drawn.dtype != tensor.dtype:
        raise Failure(
            "operator_error",
            f"get_inputs() gave input {position} another shape or dtype for another seed: inputs drawn afresh "
            "each sample must keep them",
        )
    _copy(tensor, drawn)


def renewed(matrix: torch.Tensor) -> torch.Tensor:
    """The same matrix as a new object over new index arrays, its values shared: whatever a subject derived
    from the pattern and kept by the matrix's identity or its index storage is not found again, so a format
    conversion is paid on every call, as for an operator that is given a new matrix each call. (A subject
    that keys its work on the pattern's contents still finds it: docs/rules.md says so.)"""
    compressed, plain, values = parts(matrix)
    return torch.sparse_compressed_tensor(
        compressed.clone(),
        plain.clone(),
        values,
        size=matrix.shape,
        layout=matrix.layout,
        check_invariants=False,  # the pattern is the master's, already checked
    )
