"""Worker side: compare a subject's output with the reference's, by the rules of measurement.md."""

from __future__ import annotations

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

# Captured at import, before any candidate code runs, so a patched torch function cannot judge itself.
_isnan, _isinf, _abs, _tensor_type = torch.isnan, torch.isinf, torch.abs, torch.Tensor


class Mismatch(Exception):
    """The output is wrong; the message says how, in terms a kernel author can act on."""


@dataclass
class Error:
    max_abs: float  # largest |out - ref| over all checked outputs
    max_rel: float  # largest |out - ref| / |ref| where |ref| > 0


def flatten(output: Any, who: str) -> list[torch.Tensor]:
    """The output as a list of tensors; only exact torch.Tensor (no subclass, no lazy object) counts."""
    items = list(output) if isinstance(output, tuple | list) else [output]
    for index, item in enumerate(items):
        if type(item) is not _tensor_type:
            where = f" (output {index})" if len(items) > 1 else ""
            raise Mismatch(
                f"{who} returned {type(item).__module__}.{type(item).__qualname__}{where}, not a torch.Tensor"
            )
    return items


def tolerance(dtype: torch.dtype, atol: float | None, rtol: float | None) -> tuple[float, float]:
    default = DEFAULT_TOLERANCE.get(dtype, (0.0, 0.0))
    return (atol if atol is not None else default[0], rtol if rtol is not None else default[1])


def compare(out: Any, ref: Any, atol: float | None, rtol: float | None) -> Error:
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
        o64, r64 = o.double(), r.double()
        ref_bad = _isnan(r64) | _isinf(r64)
        out_bad = _isnan(o64) | _isinf(o64)
        if bool((out_bad & ~ref_bad).any()):
            first = (out_bad & ~ref_bad).nonzero()[0].tolist()
            raise Mismatch(f"{tag}NaN/Inf where the reference has none, first at {first}")
        finite = ~ref_bad
        diff = _abs(o64 - r64)
        diff[~finite] = 0.0
        same_special = (o64[ref_bad] == r64[ref_bad]) | (_isnan(o64[ref_bad]) & _isnan(r64[ref_bad]))
        if not bool(same_special.all()):
            raise Mismatch(f"{tag}differs where the reference is NaN/Inf")
        a, rt = tolerance(r.dtype, atol, rtol)
        limit = a + rt * _abs(r64)
        over = (diff > limit) & finite
        max_abs = float(diff.max()) if diff.numel() else 0.0
        denom = _abs(r64).clamp_min(1e-30)
        max_rel = (
            float((diff / denom)[finite & (_abs(r64) > 0)].max())
            if bool((finite & (_abs(r64) > 0)).any())
            else 0.0
        )
        worst = Error(max(worst.max_abs, max_abs), max(worst.max_rel, max_rel))
        if bool(over.any()):
            idx = over.nonzero()
            first = idx[0].tolist()
            raise MismatchWithError(
                f"{tag}{idx.shape[0]} of {r.numel()} elements outside atol={a:g} rtol={rt:g}; first at {first}: "
                f"{o64[tuple(first)].item():.6g} vs {r64[tuple(first)].item():.6g} (max abs err {max_abs:.3g})",
                worst,
            )
    return worst


class MismatchWithError(Mismatch):
    def __init__(self, message: str, error: Error) -> None:
        super().__init__(message)
        self.error = error


def identical_or_rounding(a: Any, b: Any, atol: float | None, rtol: float | None) -> bool:
    """Two runs of the same subject on the same inputs agree beyond rounding (a tenth of the tolerance)."""
    for x, y in zip(flatten(a, "the subject"), flatten(b, "the subject"), strict=True):
        if torch.equal(x, y):
            continue
        if not x.is_floating_point():
            return False
        at, rt = tolerance(x.dtype, atol, rtol)
        if not torch.allclose(x.double(), y.double(), atol=at / 10, rtol=rt / 10, equal_nan=True):
            return False
    return True
