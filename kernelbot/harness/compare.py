"""Judge side: compare a subject's output with the reference's, by the rules of measurement.md."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

# KernelBench's current rule for float32; half types get the looser 1e-2.
DEFAULT_TOLERANCE = {
    torch.float32: (1e-4, 1e-4),
    torch.float64: (1e-7, 1e-7),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (1e-2, 1e-2),
}

# The float64 rule (as torch._dynamo.utils.same applies it with fp64_ref): an output the elementwise rule
# rejects is still right when its RMS error against a float64 run of the reference is at most this multiple
# of the float32 reference's own (3x for outputs of at most TINY_NUMEL elements), plus a floor of
# FLOOR_ROUNDINGS roundings of the output's RMS in its dtype. Exact rewrites that sum in another order pass;
# TF32 or bfloat16 where float32 is asked for are ~1000x worse than the reference and do not.
GOLDEN_MULTIPLIER, GOLDEN_MULTIPLIER_TINY, TINY_NUMEL = 2.0, 3.0, 10
FLOOR_ROUNDINGS = 4.0

# The scale rule: under the default tolerance, atol counts at most ATOL_SHARE x rtol of the output's RMS,
# over the whole output (RMS error). Where every element sits below atol (a softmax over 4M pixels: ~1e-7
# each, attacker round 54), the elementwise rule alone passed zeros, reward 2 with no work. At ATOL_SHARE 1
# the allowance joins the elementwise rule's at an RMS of atol / rtol (float32: 2e-4 of the output's own
# size). An output of at most TINY_NUMEL elements (a scalar loss) may be off by TINY_SHARE of its size: its
# float32 value can be the result of cancellation, and two roundings of one number are a ratio of one
# sample, which the float64 rule's 3x does not always cover. An atol the operator declares is its author's
# statement of scale: there the elementwise rule alone decides (a candidate's claim of a lower precision
# raises atol and rtol, and keeps the scale rule at them). A rejected output may still pass by the float64
# rule.
ATOL_SHARE, TINY_SHARE = 1.0, 1e-2
# The scale rule is kept block by block: each run of BLOCK consecutive elements (of the flattened output; the
# last block takes what is left) is held to its own RMS. Over the whole output, a large region's RMS paid for a
# small one's: zeros for the 84% of a decayed projection's rows that sit below atol (0.9**row) passed at
# reward 3 (attacker round 57). Where every block passes, the whole output does too. A block that fails may
# still pass by the float64 rule taken over that block, plus float32's smallest normal number (rows that
# underflow to subnormals, where the float32 reference is itself up to ~50% off). A block whose reference
# is all exact zeros is left to the elementwise rule: the scale of nothing is nothing, and honest
# arithmetic need not land on exact zeros there.
BLOCK = 4096

# Captured at import, before any candidate code runs, so a patched torch function cannot judge itself.
_isnan, _isinf, _abs, _equal, _tensor_type = torch.isnan, torch.isinf, torch.abs, torch.equal, torch.Tensor
_count_nonzero, _where, _dot = torch.count_nonzero, torch.where, torch.dot
_NONE = torch.zeros(0, dtype=torch.float64)


class Mismatch(Exception):
    """The output is wrong; the message says how, in terms a kernel author can act on."""


@dataclass
class Error:
    max_abs: float  # largest |out - ref| over all checked outputs
    max_rel: float  # largest |out - ref| / |ref| where |ref| > 0
    fp64_err: float | None = None  # RMS error against the float64 reference (the worst output's)
    fp64_ref_err: float | None = None  # the float32 reference's own RMS error there
    by_fp64: bool = False  # some output passed by the float64 rule, not the elementwise one

    @property
    def fp64_ratio(self) -> float:
        """The subject's float64 error as a multiple of the reference's (-1 when not measured)."""
        if self.fp64_err is None:
            return -1.0
        return self.fp64_err / max(self.fp64_ref_err or 0.0, 1e-300)

    def worse(self, other: Error) -> Error:
        """The worst of two errors, output by output or seed by seed."""
        fp64 = self if self.fp64_ratio >= other.fp64_ratio else other
        return Error(
            max(self.max_abs, other.max_abs),
            max(self.max_rel, other.max_rel),
            fp64.fp64_err,
            fp64.fp64_ref_err,
            self.by_fp64 or other.by_fp64,
        )


class Golden:
    """The reference's outputs in float64, computed on first use (most checks never need them)."""

    def __init__(self, run: Callable[[], list[torch.Tensor] | str]) -> None:
        self._run, self.done = run, False
        self._value: list[torch.Tensor] | str = ""

    def get(self) -> list[torch.Tensor] | str:
        """The float64 outputs, or why they could not be computed."""
        if not self.done:
            self._value, self.done = self._run(), True
        return self._value


# Elements compared at once: the float64 temporaries of a multi-GB output stay near 1 GiB (whole-tensor
# arithmetic took ~14 bytes of float64 scratch per element: 90 GB for a 6.4 GB output on the H200).
CHUNK = 1 << 24


def _spans(n: int) -> range:
    return range(0, n, CHUNK)


def _at(flat_index: int, shape: torch.Size) -> list[int]:
    """A flat index as the tensor's own (row-major) index."""
    out = []
    for size in reversed(shape):
        out.append(flat_index % size)
        flat_index //= size
    return out[::-1]


def _squares(x: torch.Tensor) -> float:
    """The sum of x's squares (a float64 vector): a dot product, with no squared copy."""
    flat = x.reshape(-1)
    return float(_dot(flat, flat)) if flat.numel() else 0.0


def _block_sizes(n: int) -> torch.Tensor:
    """The element counts of _block_sums' blocks for a chunk of n elements."""
    sizes = torch.full((-(-n // BLOCK),), float(BLOCK), dtype=torch.float64)
    if n % BLOCK:
        sizes[-1] = n % BLOCK
    return sizes


def _block_sums(x: torch.Tensor) -> torch.Tensor:
    """The sums of x's elements (a chunk of a flattened output, starting on a block's first element) by
    BLOCK, the last block what is left."""
    full = x.numel() // BLOCK * BLOCK
    sums = x[:full].view(-1, BLOCK).sum(1)
    sums = torch.cat([sums, x[full:].sum().reshape(1)]) if full < x.numel() else sums
    return sums.cpu()  # a few numbers a block, joined with other chunks' and the blocks' sizes on the CPU


def _golden_sums(o: torch.Tensor, r: torch.Tensor, g: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """By block: the sums of the squared errors of o and of r against the float64 reference g, of g's own
    squares, and the count of elements where g is finite (only those count), a chunk at a time."""
    of, rf, gf = o.reshape(-1), r.reshape(-1), g.reshape(-1)
    sums: list[list[torch.Tensor]] = [[], [], [], []]
    for start in _spans(gf.numel()):
        part = gf[start : start + CHUNK]
        o_part, r_part = of[start : start + CHUNK].double(), rf[start : start + CHUNK].double()
        good = ~(_isnan(part) | _isinf(part))
        part, o_part, r_part = (t.masked_fill(~good, 0.0) for t in (part, o_part, r_part))
        for into, x in zip(
            sums, ((o_part - part) ** 2, (r_part - part) ** 2, part**2, good.double()), strict=True
        ):
            into.append(_block_sums(x))
    return tuple(torch.cat(x) if x else torch.zeros(0, dtype=torch.float64) for x in sums)


def _golden_pass(
    sums: tuple[torch.Tensor, ...], dtype: torch.dtype, tiny: bool, extra: float = 0.0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The float64 rule on _golden_sums' four sums (whole outputs or blocks alike): passed, RMS error,
    reference's. `extra`: added to the floor."""
    err_sq, ref_sq, g_sq, count = sums
    n = count.clamp_min(1.0)
    err, ref_err, scale = ((x / n).sqrt() for x in (err_sq, ref_sq, g_sq))
    floor = FLOOR_ROUNDINGS * torch.finfo(dtype).eps * scale + extra
    return err <= (GOLDEN_MULTIPLIER_TINY if tiny else GOLDEN_MULTIPLIER) * ref_err + floor, err, ref_err


def fp64_rule(
    o: torch.Tensor,
    r: torch.Tensor,
    g: torch.Tensor,
    dtype: torch.dtype,
    blocks: torch.Tensor | None = None,
) -> tuple[bool, float, float, torch.Tensor | None]:
    """Whether an output passes the float64 rule; its RMS error and the reference's, against float64 (over
    the elements where the float64 reference is finite). With `blocks` (indices): which of those blocks pass
    the rule taken over the block alone, with float32's smallest normal number added to its floor (one pass
    over the output serves both)."""
    sums = _golden_sums(o, r, g)
    tiny = g.numel() <= TINY_NUMEL
    passed, err, ref_err = _golden_pass(tuple(x.sum().reshape(1) for x in sums), dtype, tiny)
    kept = None
    if blocks is not None:
        kept = _golden_pass(tuple(x[blocks] for x in sums), dtype, tiny, torch.finfo(dtype).tiny)[0]
    return bool(passed[0]), float(err[0]), float(ref_err[0]), kept


def flatten(output: Any, who: str) -> list[torch.Tensor]:
    """The output as a list of tensors; only exact torch.Tensor (no subclass, no lazy object) counts."""
    items = list(output) if isinstance(output, tuple | list) else [output]
    for index, item in enumerate(items):
        where = f" (output {index})" if len(items) > 1 else ""
        if type(item) is not _tensor_type:
            raise Mismatch(
                f"{who} returned {type(item).__module__}.{type(item).__qualname__}{where}, not a torch.Tensor"
            )
        if item.layout != torch.strided:
            raise Mismatch(
                f"{who} returned a {item.layout} tensor{where}: outputs are compared as dense tensors, "
                "so return .to_dense() (a sparse matrix's values are checked through it)"
            )
    return items


def tolerance(dtype: torch.dtype, atol: float | None, rtol: float | None) -> tuple[float, float]:
    default = DEFAULT_TOLERANCE.get(dtype, (0.0, 0.0))
    return (atol if atol is not None else default[0], rtol if rtol is not None else default[1])


def compare(
    out: Any,
    ref: Any,
    atol: float | None,
    rtol: float | None,
    golden: Golden | None = None,
    *,
    at_scale: bool = True,
) -> Error:
    """How far `out` is from `ref`; Mismatch when it is wrong. With `golden`, an output outside the
    elementwise tolerance may still pass by the float64 rule (and once the float64 outputs exist, every
    floating output's error against them is reported). `at_scale`: the scale rule too (off where the operator
    declares its own atol)."""
    outs, refs = flatten(out, "the subject"), flatten(ref, "the reference")
    if len(outs) != len(refs):
        raise Mismatch(f"returned {len(outs)} outputs, the reference returns {len(refs)}")
    worst = Error(0.0, 0.0)
    for index, (o, r) in enumerate(zip(outs, refs, strict=True)):
        tag = f"output {index}: " if len(outs) > 1 else ""
        if o.shape != r.shape:
            raise Mismatch(f"{tag}shape {list(o.shape)}, expected {list(r.shape)}")
        if o.dtype != r.dtype:
            raise Mismatch(f"{tag}dtype {o.dtype}, expected {r.dtype}")
        if o.device != r.device:
            raise Mismatch(f"{tag}on {o.device}, expected {r.device}")
        if not o.is_floating_point():
            bad = o != r
            if bool(bad.any()):
                first = bad.nonzero()[0].tolist()
                raise Mismatch(
                    f"{tag}{int(bad.sum())} elements differ, first at {first}: {o[tuple(first)].item()} vs {r[tuple(first)].item()}"
                )
            continue
        a, rt = tolerance(r.dtype, atol, rtol)
        of, rf = o.reshape(-1), r.reshape(-1)
        max_abs = max_rel = 0.0
        over_count, first_over = 0, -1
        err_blocks: list[torch.Tensor] = []  # squared errors and reference values summed by BLOCK
        ref_blocks: list[torch.Tensor] = []
        sizes: list[torch.Tensor] = []  # the blocks' element counts
        # Equal to the reference's values (eager itself, an exact rewrite) has no error to measure: the float64
        # pass below took ~3 s per 16M-element output on one CPU core. (NaN is never equal: it goes below.)
        exact = _equal(of, rf)
        for start in _spans(0 if exact else rf.numel()):
            o_part, r_part = of[start : start + CHUNK], rf[start : start + CHUNK]
            counted = _finite_chunk(o_part, r_part, a, rt, at_scale) or _special_chunk(
                o_part, r_part, a, rt, o.shape, start, tag, at_scale
            )
            found, chunk_first, chunk_abs, chunk_rel, chunk_err, chunk_ref = counted
            if found and first_over < 0:
                first_over = start + chunk_first
            over_count += found
            max_abs, max_rel = max(max_abs, chunk_abs), max(max_rel, chunk_rel)
            err_blocks.append(chunk_err)
            ref_blocks.append(chunk_ref)
            sizes.append(_block_sizes(o_part.numel()))
        this = Error(max_abs, max_rel)
        rejected = over_count > 0
        share = TINY_SHARE if r.numel() <= TINY_NUMEL else ATOL_SHARE * rt
        off_scale = (
            _off_scale(torch.cat(err_blocks), torch.cat(ref_blocks), torch.cat(sizes), a, rt, share)
            if at_scale and not rejected and err_blocks
            else None
        )
        scaled = off_scale is not None
        rejected = rejected or scaled
        note = ""
        if golden is not None and (rejected or golden.done):
            g = golden.get()
            if isinstance(g, str):
                note = f"; the float64 check could not run: {g}"
            else:
                blocks = off_scale.blocks if off_scale is not None else None
                passed, this.fp64_err, this.fp64_ref_err, kept = fp64_rule(o, r, g[index], r.dtype, blocks)
                note = (
                    f"; against float64 its RMS error is {this.fp64_err:.3g}, {this.fp64_ratio:.3g}x the float32 "
                    f"reference's {this.fp64_ref_err:.3g} (at most {GOLDEN_MULTIPLIER:g}x passes)"
                )
                if kept is not None:  # each block off its scale, by the rule over that block alone
                    passed = bool(kept.all())
                    note = (
                        f"; by the float64 rule over each such run alone (at most {GOLDEN_MULTIPLIER:g}x the float32 "
                        f"reference's own RMS error there), {int((~kept).sum())} of {kept.numel()} fail"
                    )
                this.by_fp64 = rejected and passed
                rejected = rejected and not passed
        worst = worst.worse(this)
        if rejected and off_scale is not None:
            where = (
                "over all its elements"
                if off_scale.end - off_scale.start == r.numel()
                else f"over its elements {_at(off_scale.start, o.shape)} to {_at(off_scale.end - 1, o.shape)}, "
                f"the first of {len(off_scale.blocks)} such runs of up to {BLOCK} elements"
            )
            raise MismatchWithError(
                f"{tag}its RMS error {off_scale.err_rms:.3g} is {off_scale.err_rms / off_scale.ref_rms:.3g}x the "
                f"reference's RMS {off_scale.ref_rms:.3g} ({where}), beyond rtol={rt:g} and atol counted at most "
                f"{share:g}x that RMS (every element may lie within atol={a:g} of values this small: each run of "
                "the output is compared at its own scale)"
                f"{note}",
                worst,
            )
        if rejected:
            first = _at(first_over, o.shape)
            raise MismatchWithError(
                f"{tag}{over_count} of {r.numel()} elements outside atol={a:g} rtol={rt:g}; first at {first}: "
                f"{float(of[first_over]):.6g} vs {float(rf[first_over]):.6g} (max abs err {max_abs:.3g}){note}",
                worst,
            )
    return worst


def _finite_chunk(
    o: torch.Tensor, r: torch.Tensor, atol: float, rtol: float, squares: bool = True
) -> tuple[int, int, float, float, torch.Tensor, torch.Tensor] | None:
    """Elements over the tolerance (and the first), the largest absolute and relative errors, the sums of the
    errors' and the reference's squares by BLOCK (empty unless `squares`: only the scale rule reads them), in
    float64, of a chunk where both sides are finite (None where either
    holds NaN or Inf): in-place arithmetic with no masked gathers, twice as fast as _special_chunk on one CPU
    core (a torch.compile baseline's rounding sent every chunk of a 6.4 GB output there)."""
    diff = (o.double() - r).abs_()  # not o.double().sub_(): that is o itself when o is float64 already
    size = _abs(r).double()
    max_abs = float(diff.max()) if diff.numel() else 0.0
    largest = float(size.max()) if size.numel() else 0.0
    if not (math.isfinite(max_abs) and math.isfinite(largest)):  # NaN propagates through max, Inf stays Inf
        return None
    over = diff > size * rtol + atol
    found = int(_count_nonzero(over))
    first = int(over.nonzero()[0]) if found else -1
    # before diff and size are divided in place below
    sums = (_block_sums(diff.square()), _block_sums(size.square())) if squares else (_NONE, _NONE)
    rel = _where(size > 0, diff.div_(size.clamp_min_(1e-30)), 0.0)
    return found, first, max_abs, float(rel.max()) if rel.numel() else 0.0, *sums


def _special_chunk(
    o: torch.Tensor,
    r: torch.Tensor,
    atol: float,
    rtol: float,
    shape: torch.Size,
    start: int,
    tag: str,
    squares: bool = True,
) -> tuple[int, int, float, float, torch.Tensor, torch.Tensor]:
    """As _finite_chunk where either side holds NaN or Inf: an output must have them where the reference does,
    and only there; there both sides count as zero (no error), the rest is _finite_chunk's."""
    o64, r64 = o.double(), r.double()
    ref_bad = _isnan(r64) | _isinf(r64)
    new_bad = (_isnan(o64) | _isinf(o64)) & ~ref_bad
    if bool(new_bad.any()):
        raise Mismatch(
            f"{tag}NaN/Inf where the reference has none, first at {_at(start + int(new_bad.nonzero()[0]), shape)}"
        )
    same_special = (o64[ref_bad] == r64[ref_bad]) | (_isnan(o64[ref_bad]) & _isnan(r64[ref_bad]))
    if not bool(same_special.all()):
        raise Mismatch(f"{tag}differs where the reference is NaN/Inf")
    counted = _finite_chunk(o64.masked_fill(ref_bad, 0.0), r64.masked_fill(ref_bad, 0.0), atol, rtol, squares)
    assert counted is not None  # every special value is now a zero on both sides
    return counted


@dataclass
class OffScale:
    """Where an output is off its own scale: the indices of the blocks that are, and the first's extent and
    RMS error and reference RMS."""

    blocks: torch.Tensor
    start: int
    end: int
    err_rms: float
    ref_rms: float


def _off_scale(
    err_sq: torch.Tensor, ref_sq: torch.Tensor, sizes: torch.Tensor, atol: float, rtol: float, share: float
) -> OffScale | None:
    """The scale rule by block (`sizes`: their element counts): a block's RMS error may be rtol of its
    reference's RMS plus atol, atol counted at most `share` of that RMS; None where every block keeps it."""
    err, ref = (err_sq / sizes).sqrt(), (ref_sq / sizes).sqrt()
    off = ((ref > 0) & (err > rtol * ref + (share * ref).clamp_max(atol))).nonzero().reshape(-1)
    if not off.numel():
        return None
    first = int(off[0])
    start = int(sizes[:first].sum())
    return OffScale(off, start, start + int(sizes[first]), float(err[first]), float(ref[first]))


class MismatchWithError(Mismatch):
    def __init__(self, message: str, error: Error) -> None:
        super().__init__(message)
        self.error = error


def _rms(x: torch.Tensor, y: torch.Tensor | None = None) -> float:
    """The RMS of x (or of x - y) over its finite elements, summed a chunk at a time in float64."""
    xf, yf = x.reshape(-1), None if y is None else y.reshape(-1)
    total, count = 0.0, 0
    for start in _spans(xf.numel()):
        part = xf[start : start + CHUNK].double()
        if yf is not None:
            part = part - yf[start : start + CHUNK].double()
        if not math.isfinite(float(_abs(part).max())):  # NaN or Inf somewhere: gather the rest
            part = part[~(_isnan(part) | _isinf(part))]
        total, count = total + _squares(part), count + part.numel()
    return math.sqrt(total / count) if count else 0.0


def _close(x: torch.Tensor, y: torch.Tensor, atol: float, rtol: float) -> bool:
    """torch.allclose in float64, a chunk at a time (two float64 copies of a 6.4 GB output are 26 GB)."""
    xf, yf = x.reshape(-1), y.reshape(-1)
    return all(
        torch.allclose(
            xf[i : i + CHUNK].double(), yf[i : i + CHUNK].double(), atol=atol, rtol=rtol, equal_nan=True
        )
        for i in _spans(xf.numel())
    )


def wide_sum(t: torch.Tensor) -> float:
    """The sum of t's elements in float64 (int64 for integers and booleans; the real part where complex), a
    chunk at a time: a float64 copy of a 6.4 GB output ran the judge out of memory on an 80 GB GPU."""
    flat = t.detach().reshape(-1)
    wide = (
        torch.complex128 if flat.is_complex() else torch.float64 if flat.is_floating_point() else torch.int64
    )
    total = sum(
        (flat[i : i + CHUNK].to(wide).sum() for i in _spans(flat.numel())), torch.zeros((), dtype=wide)
    )
    return float(total.real if total.is_complex() else total)


def identical_or_rounding(
    a: Any,
    b: Any,
    atol: float | None,
    rtol: float | None,
    refs: list[torch.Tensor] | None = None,
    golden: Golden | None = None,
) -> bool:
    """Two runs of the same subject on the same inputs agree to rounding: within a tenth of the tolerance,
    or (a reduction summed in another order each run: atomics, cuSPARSE's SpMV on long rows) no further
    apart, RMS, than two answers that each pass the float64 rule can be. A race that loses an update is."""
    for index, (x, y) in enumerate(zip(flatten(a, "the subject"), flatten(b, "the subject"), strict=True)):
        if torch.equal(x, y):
            continue
        if not x.is_floating_point():
            return False
        at, rt = tolerance(x.dtype, atol, rtol)
        if _close(x, y, at / 10, rt / 10):
            continue
        if golden is None or refs is None:
            return False
        g = golden.get()
        if isinstance(g, str) or not torch.equal(_isnan(x) | _isinf(x), _isnan(y) | _isinf(y)):
            return False
        ref_err = _rms(refs[index], g[index])  # the float32 reference's own distance from float64
        floor = FLOOR_ROUNDINGS * torch.finfo(x.dtype).eps * _rms(y)
        if _rms(x, y) > 2 * (GOLDEN_MULTIPLIER * ref_err + floor):
            return False
    return True
