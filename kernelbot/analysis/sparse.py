"""Structure features of a sparse matrix input: what decides which SpMV/SpMM kernel is fastest (SparseRL's
premise: the best kernel depends on the matrix, not only on the code). Computed once per matrix in the
analysis sandbox and matched by rules (`match: {sparse: {...}}`)."""

from __future__ import annotations

from typing import Any

import torch

from kernelbot.harness.inputs import COMPRESSED

BLOCKS = (4, 8, 16)
SELL_SLICE, SELL_SIGMA = (
    32,
    256,
)  # SELL-C-sigma as sparse_spmm.py.j2 builds it: slices of 32 rows, sorted in 256


def first_sparse(inputs: list[Any]) -> torch.Tensor | None:
    return next((t for t in inputs if isinstance(t, torch.Tensor) and t.layout in COMPRESSED), None)


def rhs_cols(inputs: list[Any], matrix: torch.Tensor) -> int | None:
    """Columns of the dense operand the matrix multiplies (1 for a vector): the first dense 1-D or 2-D input
    with as many rows as the matrix has columns; None where there is none."""
    for t in inputs:
        dense = isinstance(t, torch.Tensor) and t.layout == torch.strided and t.dim() in (1, 2)
        if dense and t.shape[0] == matrix.shape[-1]:
            return 1 if t.dim() == 1 else int(t.shape[1])
    return None


def features(matrix: torch.Tensor) -> dict[str, Any]:
    """rows, cols, nnz, density; nonzeros per row (mean, std, max, skew) and the share of empty rows; the
    bandwidth (largest |col - row| of a nonzero) and its share of the columns; the share of nonzeros on the
    main diagonal; for b in 4, 8, 16 the density of the b x b blocks that hold any nonzero; and the share of
    stored slots that hold a nonzero in the padded formats: ELL (every row as long as the longest), SELL-C-sigma
    (each slice of 32 rows as long as its longest, after sorting rows by length in windows of 256) and DIA (a
    stripe of `rows` slots for each occupied diagonal)."""
    csr = matrix.detach()  # on its own device: a GPU computes the features of a large matrix in milliseconds
    if csr.layout == torch.sparse_csc:
        csr = csr.to_sparse_csr()
    elif csr.layout != torch.sparse_csr:  # block layouts convert to CSR only through COO
        csr = csr.to_sparse_coo().to_sparse_csr()
    rows, cols = int(csr.shape[-2]), int(csr.shape[-1])
    crow, col = csr.crow_indices().long(), csr.col_indices().long()
    nnz = int(col.numel())
    counts = crow[1:] - crow[:-1]
    per_row = counts.double()
    row_of = torch.repeat_interleave(torch.arange(rows, device=crow.device), counts)
    mean = float(per_row.mean()) if rows else 0.0
    std = float(per_row.std(unbiased=False)) if rows else 0.0
    skew = float(((per_row - mean) ** 3).mean() / std**3) if std > 0 else 0.0
    offset = (col - row_of).abs()
    bandwidth = int(offset.max()) if nnz else 0
    out: dict[str, Any] = {
        "rows": rows,
        "cols": cols,
        "nnz": nnz,
        "density": nnz / (rows * cols) if rows and cols else 0.0,
        "row_nnz_mean": round(mean, 4),
        "row_nnz_std": round(std, 4),
        "row_nnz_max": int(per_row.max()) if rows else 0,
        "row_nnz_skew": round(skew, 4),
        "empty_row_share": float((per_row == 0).double().mean()) if rows else 0.0,
        "bandwidth": bandwidth,
        "bandwidth_share": (bandwidth + 1) / cols if nnz and cols else 0.0,
        "diagonal_share": float((offset == 0).double().mean()) if nnz else 0.0,
    }
    diagonals = torch.unique(col - row_of).numel() if nnz else 0
    out["diagonals"] = diagonals
    out["dia_fill"] = nnz / (diagonals * rows) if diagonals else 0.0
    out["ell_fill"] = nnz / (rows * out["row_nnz_max"]) if nnz else 0.0
    out["sell_fill"] = nnz / sell_slots(counts) if nnz else 0.0
    for b in BLOCKS:
        blocks = torch.unique((row_of // b) * ((cols + b - 1) // b) + col // b).numel() if nnz else 0
        out[f"block_density_{b}"] = nnz / (blocks * b * b) if blocks else 0.0
    return out


def sell_slots(counts: torch.Tensor) -> int:
    """Stored slots of SELL-C-sigma for these row lengths: rows sorted longest first inside each window of
    SELL_SIGMA, every slice of SELL_SLICE consecutive sorted rows padded to its longest."""
    rows = counts.numel()
    padded = torch.zeros(-(-rows // SELL_SIGMA) * SELL_SIGMA, dtype=counts.dtype, device=counts.device)
    padded[:rows] = counts
    ordered = padded.view(-1, SELL_SIGMA).sort(dim=1, descending=True).values
    return int(ordered.reshape(-1, SELL_SLICE).max(dim=1).values.sum()) * SELL_SLICE
